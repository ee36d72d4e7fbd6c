"""Activation-aware re-quantization onto Q4_1 (GPTQ) for weights that recovery moved off a GGUF's grid.

Why: a pruned SmolLM2's recovery (LoRA merged into every kept block) moves every weight off the GGUF's
grid, and llama.cpp's round-to-nearest Q4_1 of the moved weights cost the 20 % cut 1.13x perplexity
against its source (the lossy gate allows 1.03x). GPTQ (Frantar et al., 2022) rounds one input column
at a time and spreads each column's rounding error over the columns not yet rounded, weighted by the
inverse second moment of the layer's inputs (H = XᵀX over calibration prompts), so what it minimises is
the error of the layer's *output*, not of its weights. The grid is the same: blocks of 32 along the
input, each with a scale and a minimum taken from the (already error-corrected) block when its first
column is reached, so the graph and its kernels do not change.

Measured (results.md): it loses less than round-to-nearest, not enough for the lossy gate, so the
build keeps llama.cpp's rounding. Rerun: `python experiments/gguf-requantize/gptq.py` rebuilds
`pruned-optimized` with this rounding in the gguf-grid rungs (the ladder then falls back as usual).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from optimize.export.gguf_grid import BLOCK, GridWeight, quantize_q4_1

CALIBRATION_TEXTS = 64
LAZY_COLUMNS = 128  # columns rounded before the rest of the matrix is updated at once (a multiple of BLOCK)


def input_hessians(model, tokenizer, texts: list[str] | None = None) -> dict[str, torch.Tensor]:
    """XᵀX / tokens of every block linear's input, keyed by its weight's name (fp64 sums):
    the prompts a served decoder sees (the reading-comprehension prompt over training questions and
    the recovery set's instructions; none held out), prefilled through the chat template."""
    from models.generation import preprocess

    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}

    def record(name: str):
        def hook(module, args, output):
            x = args[0].detach().flatten(0, 1).double()
            sums[name] = sums.get(name, 0) + x.T @ x
            counts[name] = counts.get(name, 0) + x.shape[0]
        return hook

    handles = [module.register_forward_hook(record(name)) for name, module in model.named_modules()
               if isinstance(module, torch.nn.Linear) and ".layers." in name]
    try:
        with torch.inference_mode():
            for text in texts if texts is not None else calibration_texts():
                model(input_ids=preprocess(tokenizer, text), use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return {f"{name}.weight": (total / counts[name]).float() for name, total in sums.items()}


def calibration_texts(count: int = CALIBRATION_TEXTS) -> list[str]:
    """Half reading-comprehension prompts over SQuAD training questions (dev articles 0-8: neither
    the validation nor the test articles), half the recovery set's instructions."""
    from optimize.evaluate import reading, squad
    from optimize.prompts import TOPICS, prompts

    data = [e for e in squad.examples(squad.load_articles(), squad.WIDE_VALIDATION.train) if e.answers]
    step = max(1, len(data) // (count // 2))
    asked = [reading.PROMPT.format(context=e.context, question=e.question) for e in data[::step][: count // 2]]
    return asked + prompts([], count, topics=TOPICS)[: count - len(asked)]


def gptq_q4_1(name: str, weight: np.ndarray, hessian: torch.Tensor, damp: float = 0.01) -> GridWeight:
    """`weight` [N out, K in] on a Q4_1 grid (blocks of 32 along K), rounded by GPTQ under `hessian` [K, K]."""
    W = torch.tensor(weight, dtype=torch.float32).clone()
    N, K = W.shape
    H = hessian.clone().float()
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    H += damp * torch.mean(torch.diag(H)) * torch.eye(K)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    codes = torch.zeros((N, K), dtype=torch.uint8)
    scales = torch.zeros((N, K // BLOCK))
    minimums = torch.zeros((N, K // BLOCK))
    for start in range(0, K, LAZY_COLUMNS):
        end = min(start + LAZY_COLUMNS, K)
        W1, H1 = W[:, start:end].clone(), Hinv[start:end, start:end]
        errors = torch.zeros_like(W1)
        for i in range(end - start):
            column = start + i
            if column % BLOCK == 0:  # this block's grid, from its columns as corrected so far
                group = column // BLOCK
                block = W1[:, i: i + BLOCK]
                low, high = block.min(1).values, block.max(1).values
                scales[:, group], minimums[:, group] = (high - low) / 15, low
            d, m = scales[:, column // BLOCK], minimums[:, column // BLOCK]
            inverse = torch.where(d > 0, 1 / d, torch.zeros_like(d))
            q = torch.clamp(torch.round((W1[:, i] - m) * inverse), 0, 15)
            codes[:, column] = q.to(torch.uint8)
            error = (W1[:, i] - (d * q + m)) / H1[i, i]
            W1[:, i:] -= error[:, None] * H1[i, i:][None, :]
            errors[:, i] = error
        W[:, end:] -= errors @ Hinv[start:end, end:]
    return GridWeight(name, 4, codes.numpy(), scales.numpy().astype(np.float32), minimums.numpy().astype(np.float32),
                      zero_point=0)


def output_error(weight: np.ndarray, grid: GridWeight, hessian: torch.Tensor) -> float:
    """tr(E H Eᵀ) / tr(W H Wᵀ) for E = weight − grid: the share of the output's energy the grid loses."""
    W = torch.tensor(weight, dtype=torch.float32)
    E = W - torch.tensor(grid.dequantize())
    return float(torch.einsum("nk,kl,nl->", E, hessian, E) / torch.einsum("nk,kl,nl->", W, hessian, W))


def requantizer(source: Path):
    """A `gguf_graft.graft` re-quantizer for the model in `source`: GPTQ under that model's own input
    statistics (measured on the first call only: a graph whose weights are all on the grid never
    pays for it), or round-to-nearest where that loses less of the output (a check that keeps the
    choice honest). Returns (callable, per-weight output errors of both roundings and the choice)."""
    hessians: dict[str, torch.Tensor] = {}
    chosen: dict[str, dict] = {}

    def requantize(names: tuple[str, ...], fp32: np.ndarray) -> GridWeight:
        if not hessians:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
            hessians.update(input_hessians(model, AutoTokenizer.from_pretrained(source)))
            del model
        name = "+".join(names)
        hessian = hessians[names[0]]  # fused projections read the same input
        rounded, corrected = quantize_q4_1(name, fp32), gptq_q4_1(name, fp32, hessian)
        errors = {"round-to-nearest": output_error(fp32, rounded, hessian), "gptq": output_error(fp32, corrected, hessian)}
        best = min(errors, key=errors.get)
        chosen[name] = {"chosen": best, **{k: round(v, 6) for k, v in errors.items()}}
        return corrected if best == "gptq" else rounded

    return requantize, chosen


def requantized_text(chosen: dict[str, dict]) -> str:
    """One line for the manifest's steps: how the re-quantized weights were rounded, and what each
    rounding loses of the layers' output energy (mean over the weights)."""
    if not chosen:
        return "round-to-nearest"
    gptq = sum(entry["chosen"] == "gptq" for entry in chosen.values())
    mean = {kind: sum(entry[kind] for entry in chosen.values()) / len(chosen) for kind in ("gptq", "round-to-nearest")}
    return (f"GPTQ on {gptq} of {len(chosen)}, round-to-nearest on the rest; output error {100 * mean['gptq']:.3f} % "
            f"against round-to-nearest's {100 * mean['round-to-nearest']:.3f} %")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from optimize.__main__ import main
    from optimize.export import gguf_graft

    rounding, errors = requantizer(Path("artifacts/generation-smollm2/pruned"))
    grafted = gguf_graft.graft
    gguf_graft.graft = lambda path, grid, accuracy_level=4: grafted(path, grid, accuracy_level, requantize=rounding)
    main(["build", "--task", "generation", "--variant", "pruned-optimized", "--force"])
    print(requantized_text(errors))
