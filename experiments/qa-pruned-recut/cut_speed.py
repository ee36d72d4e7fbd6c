"""RULE-R7.md: the PyTorch fp32 speed of cuts of B3, side by side (untrained: a cut's speed does not depend on its
weights). `PYTHONPATH=. python experiments/qa-pruned-recut/cut_speed.py` from the repository root."""
import copy, time, statistics, torch
from transformers import AutoModelForQuestionAnswering
torch.set_num_threads(2)
base = AutoModelForQuestionAnswering.from_pretrained("weights/qa-minilm-squad2", dtype=torch.float32).eval()

def cut(heads, ffn):
    m = copy.deepcopy(base)
    if heads < 12:
        m.prune_heads({i: list(range(heads, 12)) for i in range(6)})
    for layer in m.bert.encoder.layer:
        keep = torch.arange(ffn)
        li, lo = layer.intermediate.dense, layer.output.dense
        ni = torch.nn.Linear(384, ffn); ni.weight.data = li.weight.data[keep].clone(); ni.bias.data = li.bias.data[keep].clone()
        no = torch.nn.Linear(ffn, 384); no.weight.data = lo.weight.data[:, keep].clone(); no.bias.data = lo.bias.data.clone()
        layer.intermediate.dense, layer.output.dense = ni, no
    return m.eval()

cuts = [(12, 1536), (4, 512), (5, 512), (6, 384), (5, 448), (6, 448), (4, 768), (6, 512), (6, 768), (8, 768)]
models = {c: (base if c == (12, 1536) else cut(*c)) for c in cuts}
for length in (384, 160):
    ids = torch.randint(1000, 20000, (1, length)); mask = torch.ones_like(ids)
    times = {c: [] for c in cuts}
    with torch.inference_mode():
        for c in cuts:
            for _ in range(5): models[c](input_ids=ids, attention_mask=mask)
        for rep in range(40):
            for c in cuts:  # interleaved: side by side
                t = time.perf_counter(); models[c](input_ids=ids, attention_mask=mask); times[c].append(time.perf_counter() - t)
    b = statistics.median(times[(12, 1536)])
    print(length, {f"{h}h/{f}": f"{statistics.median(times[(h, f)])*1000:.1f}ms {b/statistics.median(times[(h, f)]):.2f}x" for h, f in cuts}, flush=True)
