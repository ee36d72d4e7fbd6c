"""Where a decoding step's time goes: ONNX Runtime's profiler over 64 greedy steps of a built
generation variant (the bench's chat prompt), node time summed by op type (prompt pass left out).

    PYTHONPATH=. python experiments/decode-step-profile/step_profile.py [VARIANT_DIR] [--filled]
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import torch

from models.decoding import OnnxCausalLM
from models.runners import session_options

STEPS = 64


def profiled_options(prefix: str):
    def make():
        options = session_options()
        options.enable_profiling = True
        options.profile_file_prefix = prefix
        return options
    return make


def main() -> None:
    directory = Path(sys.argv[1] if len(sys.argv) > 1 else "artifacts/generation-smollm2/optimized")
    filled = "--filled" in sys.argv
    from transformers import AutoTokenizer

    from optimize.bench.run import generation_prompt

    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = OnnxCausalLM(directory, profiled_options(f"/tmp/profile-{directory.name}"), "CPUExecutionProvider", filled=filled)
    ids = torch.tensor([tokenizer.apply_chat_template([{"role": "user", "content": generation_prompt(tokenizer, 128)}],
                                                      add_generation_prompt=True)])
    model.decoder.generate(ids, STEPS, ignore_eos=True)  # warm
    model.decoder.generate(ids, STEPS, ignore_eos=True)
    trace = json.loads(Path(model.session.end_profiling()).read_text())
    runs = [e for e in trace if e.get("cat") == "Session" and e["name"] == "model_run"]
    decode_runs = runs[-STEPS + 1:]  # the last generate's steps after its prompt pass
    start = decode_runs[0]["ts"]
    by_op, calls = Counter(), Counter()
    for event in trace:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and event["ts"] >= start:
            op = event["args"]["op_name"]
            by_op[op] += event["dur"]
            calls[op] += 1
    steps = len(decode_runs)
    run_us = sum(e["dur"] for e in decode_runs) / steps
    node_us = sum(by_op.values()) / steps
    print(f"{directory.name}{' (filled)' if filled else ''}: {steps} steps, model_run {run_us:.0f} µs/step, "
          f"node kernels {node_us:.0f} µs/step, outside kernels {run_us - node_us:.0f} µs/step, "
          f"{sum(calls.values()) / steps:.0f} nodes/step")
    print("| op | µs/step | share of model_run | calls/step | µs/call |\n|---|---|---|---|---|")
    for op, total in by_op.most_common():
        print(f"| {op} | {total / steps:.0f} | {100 * total / steps / run_us:.1f} % | {calls[op] / steps:.0f} | "
              f"{total / calls[op]:.1f} |")


if __name__ == "__main__":
    main()
