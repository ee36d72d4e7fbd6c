"""Does an ONNX Runtime session setting make `optimized`'s decoding step cheaper (issue 53)? The shipped
settings (models/runners.session_options) against four more, one session each, in one process: rounds in a
shuffled order (models.timing.timed_rounds, as the bench times; the recorded run rotated the order), the bench's
chat prompt, 64 new tokens (end-of-sequence ignored). Results: ./results.md.

    PYTHONPATH=. python experiments/decode-step-profile/session_settings.py [ROUNDS] [BUILT_DIR]
"""
import statistics
import sys
import time
from pathlib import Path
import torch
from transformers import AutoTokenizer
from models.decoding import OnnxCausalLM
from models.runners import session_options
from models.timing import timed_rounds
from optimize.bench.run import generation_prompt

BUILT = Path(sys.argv[2] if len(sys.argv) > 2 else "artifacts/generation-smollm2/optimized")

def with_entries(**entries):
    def factory():
        options = session_options()
        for key, value in entries.items():
            options.add_session_config_entry(key, value)
        return options
    return factory

contenders = {
    "shipped": session_options,
    "dynamic_block_base=4": with_entries(**{"session.dynamic_block_base": "4"}),
    "affinity worker=cpu2": with_entries(**{"session.intra_op_thread_affinities": "2"}),
    "spin 1000us": with_entries(**{"session.intra_op.spin_duration_us": "1000"}),
    "prepack parallel": with_entries(**{"session.prepack.enable_parallel": "1"}),
}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
tokenizer = AutoTokenizer.from_pretrained(BUILT)
ids = torch.tensor([tokenizer.apply_chat_template([{"role": "user", "content": generation_prompt(tokenizer, 128)}], add_generation_prompt=True)])
models = {name: OnnxCausalLM(BUILT, factory, "CPUExecutionProvider") for name, factory in contenders.items()}
texts = {name: model.decoder.generate(ids, 64, ignore_eos=True)[0, ids.shape[1]:].tolist() for name, model in models.items()}


def decode_rate(decoder) -> float:
    """Tokens/s after the first: the time of a 64-token call less that of a 1-token call (the prefill)."""
    start = time.perf_counter()
    decoder.generate(ids, 1, ignore_eos=True)
    prefill = time.perf_counter() - start
    start = time.perf_counter()
    decoder.generate(ids, 64, ignore_eos=True)
    return 63 / (time.perf_counter() - start - prefill)


timings = timed_rounds({name: (lambda d: lambda: decode_rate(d))(model.decoder) for name, model in models.items()},
                       rounds, warmup=0)
rates = {name: [rate for _, rate in runs] for name, runs in timings.items()}
for name, values in rates.items():
    ratios = [v / b for v, b in zip(values, rates["shipped"])]
    print(f"{name:24s} {statistics.median(values):7.1f} tok/s  {statistics.median(ratios):.3f}x  "
          f"[{min(ratios):.3f}-{max(ratios):.3f}]  same={texts[name] == texts['shipped']}")
