"""Would drafts from a corpus n-gram table of the model's own greedy answers (as llama.cpp's static lookup
cache does) make exact lookup pay where the prompt alone does not (issue 53, the reading-prompt bar)?

Simulated, not timed: lookup is exact on the filled graph, so drafts change speed only, and the greedy
tokens of each evaluation prompt are known in advance. Each pass of w positions is priced at
`pass_width.py`'s measured cost on `optimized` (1.16x a step for 2 positions, 1.50x for 3, ...), and the
speedup is 64 tokens over the passes' total cost against 64 one-position steps.

- The table: `optimized`'s greedy answers (64 new tokens, end-of-sequence ignored while generating) to
  SQuAD 1.1 *training* reading prompts and the recovery instruction templates (no robot or bread topic:
  the bench's chat prompt). Keys are the last 1-3 tokens, values the next token's counts.
- `EOS_CUT=1` keeps each answer only up to its end-of-sequence, as the product stops there; unset, the
  table also learns the text the model writes after it, which only a timing that ignores end-of-sequence sees.
- Evaluated on the bench's two prompts and prompt-lookup/measure.py's validation prompts.

    [EOS_CUT=1] PYTHONPATH=. python experiments/ngram-drafts/simulate.py READING_PROMPTS INSTRUCTION_PROMPTS
"""
import json, os, pickle, random, sys, time
from collections import Counter, defaultdict
from pathlib import Path
import torch
from transformers import AutoTokenizer
from models.decoding import DraftPacer, OnnxCausalLM, PromptLookup
from models.runners import session_options
from optimize.bench.run import generation_prompt
from optimize.evaluate import reading, squad
from optimize import prompts as recovery
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "prompt-lookup"))
import measure as lookup_measure

BUILT = Path("artifacts/generation-smollm2/optimized")
OUT = Path("/tmp/ngram-drafts"); OUT.mkdir(exist_ok=True)  # generated texts cached between runs
N_READ, N_INSTR, NEW = int(sys.argv[1]), int(sys.argv[2]), 64
tok = AutoTokenizer.from_pretrained(BUILT)
model = OnnxCausalLM(BUILT, session_options, "CPUExecutionProvider")
def ids_of(text): return tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
def greedy(ids): return model.decoder.generate(torch.tensor([ids]), NEW, ignore_eos=True)[0, len(ids):].tolist()

corpus_file = OUT / f"corpus-{N_READ}-{N_INSTR}.pkl"
if corpus_file.exists():
    corpus = pickle.loads(corpus_file.read_bytes())
else:
    data = json.loads(squad.SQUAD11_TRAIN_PATH.read_text())["data"]
    rng = random.Random(7)
    qs = [(p["context"], q["question"]) for a in data for p in a["paragraphs"] for q in p["qas"]]
    rng.shuffle(qs)
    texts = [reading.PROMPT.format(context=c, question=q) for c, q in qs[:N_READ]]
    instr = [t.format(topic=topic) for t in recovery.TEMPLATES + recovery.FORMAT_TEMPLATES for topic in recovery.TOPICS
             if "robot" not in topic and "bread" not in topic]
    rng.shuffle(instr)
    texts += instr[:N_INSTR]
    corpus, start = [], time.time()
    for i, text in enumerate(texts):
        ids = ids_of(text)
        corpus.append((ids, greedy(ids)))
        if i % 50 == 0: print(i, f"{time.time()-start:.0f}s", flush=True)
    corpus_file.write_bytes(pickle.dumps(corpus))

tables = {n: defaultdict(Counter) for n in (1, 2, 3)}
EOS_CUT = os.environ.get("EOS_CUT") == "1"
END = tok.convert_tokens_to_ids("<|im_end|>")  # the chat turn's end: where the product stops
for prompt_ids, out in corpus:
    if EOS_CUT and END in out: out = out[: out.index(END) + 1]
    seq = prompt_ids + out
    for i in range(len(prompt_ids), len(seq)):
        for n in (1, 2, 3):
            tables[n][tuple(seq[i - n:i])][seq[i]] += 1

def table_draft(seq, k, min_count, min_share):
    draft, s = [], list(seq)
    for _ in range(k):
        for n in (3, 2, 1):
            c = tables[n].get(tuple(s[-n:]))
            if c:
                token, count = c.most_common(1)[0]
                total = sum(c.values())
                if count >= min_count and count / total >= min_share:
                    break
        else:
            break
        draft.append(token); s.append(token)
    return draft

COST = {1: 1.0, 2: 1.16, 3: 1.50, 4: 1.58, 5: 1.80, 6: 2.03, 7: 2.2, 8: 2.34, 9: 2.5}
def simulate(prompt_ids, out, policy):
    lookup, seq, i, cost, drafted, kept_total = PromptLookup(), list(prompt_ids), 0, 0.0, 0, 0
    pacer = DraftPacer(lookup)  # the product decoder's own schedule for prompt drafts
    while i < len(out):
        room = len(out) - i - 1
        draft = []
        if pacer.ready() and policy["prompt"] and i > 0:
            draft = lookup.draft(seq, room, pacer.length)
        if not draft and policy.get("table") and i > 0 and room > 0:
            draft = table_draft(seq, min(policy["table"], room), policy["min_count"], policy["min_share"])
            from_table = True
        else:
            from_table = False
        kept = 0
        while kept < len(draft) and draft[kept] == out[i + kept]: kept += 1
        if draft and not from_table:
            pacer.settle(len(draft), kept)
        cost += COST[len(draft) + 1]; drafted += len(draft); kept_total += kept
        new = out[i:i + kept + 1]; seq += new; i += len(new)
    return len(out) / cost, kept_total, drafted

evals = {"bench chat": generation_prompt(tok, 128)}
q = reading.questions()[0]
evals["bench reading"] = reading.PROMPT.format(context=q.context, question=q.question)
for kind, texts in lookup_measure.prompts().items():
    for j, text in enumerate(texts): evals[f"{kind} {j}"] = text
eval_file = OUT / "evals.pkl"
if eval_file.exists(): outs = pickle.loads(eval_file.read_bytes())
else:
    outs = {name: (ids_of(t), greedy(ids_of(t))) for name, t in evals.items()}
    eval_file.write_bytes(pickle.dumps(outs))
eos = END
policies = {"prompt lookup (today)": {"prompt": True},
            "table k1": {"prompt": False, "table": 1, "min_count": 2, "min_share": 0.0},
            "prompt + table k1": {"prompt": True, "table": 1, "min_count": 2, "min_share": 0.0},
            "prompt + table k1 share.5": {"prompt": True, "table": 1, "min_count": 2, "min_share": 0.5},
            "prompt + table k2 share.5": {"prompt": True, "table": 2, "min_count": 2, "min_share": 0.5},
            "prompt + table k3 share.6": {"prompt": True, "table": 3, "min_count": 3, "min_share": 0.6}}
print(f"corpus: {len(corpus)} sequences; keys {[len(tables[n]) for n in (1,2,3)]}")
for pname, policy in policies.items():
    row = []
    for name, (p, out) in outs.items():
        for cut in (False, True):
            o = out[: out.index(eos) + 1] if cut and eos in out else out
            if cut and len(o) == len(out): continue
            s, kept, drafted = simulate(p, o, policy)
            row.append(f"{name}{' (to eos)' if cut else ''}: {s:.2f}x {kept}/{drafted}")
    print(pname, " | ".join(row))
