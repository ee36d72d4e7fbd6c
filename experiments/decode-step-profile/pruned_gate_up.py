"""Does `pruned-optimized` decode faster with each layer's gate and up weights as one MatMulNBits call (rows
stacked, then a Split), and would that carry it to issue 49's 1.2x `optimized` with lookup off? A probe on the built
graph (fewer_nodes.fuse_gate_up): the three decoders in one process, interleaved rounds, the bench's ~128-token chat
prompt, 64 new tokens (end-of-sequence ignored), `pruned-optimized` on its filled graph with lookup off as the bench
times it. Stacking rows leaves every output's arithmetic as it was, so the texts must be the built graph's.

    PYTHONPATH=. python experiments/decode-step-profile/pruned_gate_up.py [ROUNDS]
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from fewer_nodes import fuse_gate_up, print_rows, save, timed_rounds  # noqa: E402

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
    texts, rates = timed_rounds(models, ids, rounds)
    print("| decoder | decode tok/s (median) | vs optimized (median of per-round ratios) | per-round range | same 64 tokens as the built pruned-optimized |")
    print("|---|---|---|---|---|")
    print_rows(texts, rates, "optimized", "pruned-optimized")

if __name__ == "__main__":
    main()
