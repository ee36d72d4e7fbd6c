"""Does `pruned-optimized` decode faster with each layer's gate and up weights as one MatMulNBits call (rows
stacked, then a Split), and would that carry it to issue 49's 1.2x `optimized` with lookup off? A probe on the built
graph (fewer_nodes.fuse_gate_up): the three decoders in one process, interleaved rounds, the bench's ~128-token chat
prompt, 64 new tokens (end-of-sequence ignored), `pruned-optimized` on its filled graph with lookup off as the bench
times it. Stacking rows leaves every output's arithmetic as it was, so the texts must be the built graph's.

    PYTHONPATH=. python experiments/decode-step-profile/pruned_gate_up.py [ROUNDS]
"""
from __future__ import annotations

import shutil
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from fewer_nodes import fuse_gate_up, save  # noqa: E402

OPTIMIZED = Path("artifacts/generation-smollm2/optimized")
BUILT = Path("artifacts/generation-smollm2/pruned-optimized")


def rewrite() -> Path:
    import onnx

    out = BUILT.parent / "pruned-optimized-gate-up"  # beside the build: ONNX Runtime refuses weights outside it
    out.mkdir(exist_ok=True)
    for item in BUILT.iterdir():
        if item.name not in ("model.onnx", "model.onnx.data") and not (out / item.name).exists():
            shutil.copy(item, out / item.name)
    model = onnx.load(str(BUILT / "model.onnx"), load_external_data=True)
    fuse_gate_up(model.graph, "/MatMul_Q8")
    print(f"gate-up: {len(model.graph.node)} nodes")
    return save(model, out, True)


def main() -> None:
    from transformers import AutoTokenizer

    from models.decoding import OnnxCausalLM
    from models.runners import session_options
    from optimize.bench.run import generation_prompt

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    tokenizer = AutoTokenizer.from_pretrained(BUILT)
    ids = torch.tensor([tokenizer.apply_chat_template([{"role": "user", "content": generation_prompt(tokenizer, 128)}],
                                                      add_generation_prompt=True)])
    models = {"optimized": OnnxCausalLM(OPTIMIZED, session_options, "CPUExecutionProvider"),
              "pruned-optimized": OnnxCausalLM(BUILT, session_options, "CPUExecutionProvider", filled=True),
              "pruned-optimized, gate-up": OnnxCausalLM(rewrite(), session_options, "CPUExecutionProvider", filled=True)}
    texts, rates = {}, {name: [] for name in models}
    for name, model in models.items():  # warm
        texts[name] = model.decoder.generate(ids, 64, ignore_eos=True)[0, ids.shape[1]:].tolist()
    for round_ in range(rounds):
        order = list(models)[round_ % len(models):] + list(models)[:round_ % len(models)]
        for name in order:
            decoder = models[name].decoder
            start = time.perf_counter()
            decoder.generate(ids, 1, ignore_eos=True)
            prefill = time.perf_counter() - start
            start = time.perf_counter()
            decoder.generate(ids, 64, ignore_eos=True)
            rates[name].append(63 / (time.perf_counter() - start - prefill))
    print("| decoder | decode tok/s (median) | vs optimized (median of per-round ratios) | per-round range | same 64 tokens as the built pruned-optimized |")
    print("|---|---|---|---|---|")
    for name, values in rates.items():
        ratios = [v / o for v, o in zip(values, rates["optimized"])]
        same = sum(a == b for a, b in zip(texts[name], texts["pruned-optimized"]))
        print(f"| {name} | {statistics.median(values):.1f} | {statistics.median(ratios):.3f}x | "
              f"{min(ratios):.3f}-{max(ratios):.3f} | {same}/64 |")


if __name__ == "__main__":
    main()
