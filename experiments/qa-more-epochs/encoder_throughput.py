"""Training throughput on this machine (2 cores) of the shipped QA encoder's shape against a base-size
one (12 layers, 768 wide: all-mpnet-base-v2's shape), randomly initialised: batch 16 x 384 tokens,
bf16 autocast, AdamW, the fastest of three steps after a warm-up. What a larger encoder would cost here
per epoch of the full data (119,005 windows).

PYTHONPATH=. python experiments/qa-more-epochs/encoder_throughput.py"""
import time

import torch
from transformers import BertConfig, BertForQuestionAnswering

WINDOWS_PER_EPOCH = 119_005
SHAPES = {
    "MiniLM-L6-H384 (shipped)": BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                           intermediate_size=1536),
    "L12-H768 (all-mpnet-base-v2's shape)": BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                                       intermediate_size=3072),
}

torch.set_num_threads(2)
torch.manual_seed(0)
input_ids = torch.randint(1000, 20000, (16, 384))
positions = torch.randint(0, 384, (16,))
for name, config in SHAPES.items():
    model = BertForQuestionAnswering(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    step_seconds = []
    for _ in range(4):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                         start_positions=positions, end_positions=positions).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step_seconds.append(time.perf_counter() - started)
    windows_per_second = len(input_ids) / min(step_seconds[1:])
    print(f"{name}: {windows_per_second:.1f} windows/s; one epoch of the full data "
          f"{WINDOWS_PER_EPOCH / windows_per_second / 3600:.1f} h", flush=True)
