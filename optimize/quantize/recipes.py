"""How an ONNX variant is made (`OnnxRecipe`), and the ladder of recipes a build tries fastest first:
what each rung keeps in fp32 and why, as measured.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path

from models.machine import has_vnni

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnnxRecipe:
    """How an ONNX variant is made. Defaults are what measured best on a 2-core AVX-512 CPU."""

    optimization_level: int = 2  # ORT transformers optimizer: 1 basic, 2 extended (fusions), 99 all
    quantize: bool = True  # dynamic INT8 weights (CPU only; CUDA gets FP16 instead)
    per_channel: bool = False
    reduce_range: bool = False
    weight_only_bits: int | None = None  # MatMulNBits weight-only INT8 instead of dynamic W8A8
    block_size: int = 32  # MatMulNBits block
    opset: int | None = None
    exporter: str = "optimum"  # or "genai-builder": ONNX Runtime GenAI's model builder (decoders); or "gguf-grid":
    # the builder's fp32 graph with the source GGUF's own 4/8-bit weights (optimize/export/gguf_graft.py; `quantize`: int8 compute)
    keep_fp32: tuple[str, ...] = ()  # MatMuls left fp32: genai-builder "attention", "lm_head"; optimum "ffn_output", "ffn_input"
    smooth_alpha: float | None = None  # genai-builder INT8: SmoothQuant the MLPs first (optimize/quantize/smooth.py)
    smooth_attention: bool = False  # ... and the attention projections too
    fp32_attention_share: float = 0.0  # genai-builder INT8: the most INT8-sensitive share of layers keeps fp32 attention
    minimum_bits: int = 32  # gguf-grid: the Q4_1 minimum term as an fp32 MatMul (32) or 8-bit MatMulNBits (8, lossy)
    fold_minimums: bool = False  # gguf-grid: the minimums in each weight's one MatMulNBits (zero points + 8-bit residual)


GGUF_Q4 = OnnxRecipe(exporter="gguf-grid", weight_only_bits=4, block_size=32, quantize=False)


def recipe_ladder(task: str, from_gguf: bool = False) -> list[OnnxRecipe]:
    """Best first; the build publishes the first that keeps its promise (optimize/evaluate/gates.py). A decoder that
    descends from a GGUF first gets that GGUF's own weights with int8 compute (`gguf-q4-int8`, lossy:
    perplexity and reading comprehension within budget), then at fp32 compute (`gguf-q4`: exact for
    the baseline, so gated on the same text; a recovered pruned model's moved weights are re-quantized
    to Q4_1 and gated as a lossy export). Then INT8 rungs; the fp32 graph (fusions, no quantization) agrees with
    PyTorch on ~100% and is the last resort."""
    if task == "qa":  # lossy rungs are gated on F1 within a point of the source (issue 26), the fp32 graph on sameness
        return [OnnxRecipe(per_channel=True, reduce_range=not has_vnni()), default_recipe(task),
                replace(default_recipe(task), keep_fp32=("ffn_output", "ffn_input")), OnnxRecipe(quantize=False)]
    if from_gguf:  # int8 compute on the GGUF's grid first (the minimums folded into each weight, then as an 8-bit
        # term of their own: faster still): lossy, gated on task quality
        m8 = replace(GGUF_Q4, quantize=True, minimum_bits=8)
        return [replace(m8, fold_minimums=True), m8, replace(GGUF_Q4, quantize=True), GGUF_Q4, *recipe_ladder(task)]
    attention_fp32 = replace(default_recipe(task), keep_fp32=("attention",), smooth_attention=False,
                             fp32_attention_share=0.0)
    # INT8 attention in every layer first (experiments/int8-attention: the gates decide per model); the last
    # resort for an architecture the model builder does not build (GPT-2): optimum's fp32 export
    return [replace(default_recipe(task), fp32_attention_share=0.0), default_recipe(task), attention_fp32, replace(attention_fp32, keep_fp32=("attention", "lm_head")),
            OnnxRecipe(quantize=False, exporter="genai-builder"), OnnxRecipe(quantize=False)]


def cuda_ladder(task: str) -> list[OnnxRecipe]:
    """On a GPU every rung is FP16 (ONNX Runtime's INT8 kernels are CPU kernels): QA's optimum graph
    with fusions; a decoder's model-builder graph (GroupQueryAttention), then optimum's as the last resort."""
    if task == "qa":
        return [OnnxRecipe(quantize=False)]
    return [OnnxRecipe(quantize=False, exporter="genai-builder"), OnnxRecipe(quantize=False)]


def default_recipe(task: str) -> OnnxRecipe:
    """The defaults' recipes, each the fastest rung that kept its gates when measured on this
    project's 2-core AVX-512 machines (every figure: docs/measurements.md, "recipes.py").

    Generation (SmolLM2): ONNX Runtime GenAI's model builder, whose fused graph (GroupQueryAttention,
    SkipSimplifiedLayerNorm, MatMulNBits) has a tenth of optimum's nodes per decode step. Weight-only
    INT8 with int8 compute in blocks of 64 (ONNX Runtime's 8-bit kernel runs much faster per byte with
    long blocks than with 16 on AVX-512 + VNNI; not measured on AVX2. 64 is the longest block whose rows it
    computes the same in a pass of any width, which exact prompt lookup needs: experiments/int8-block-size), after SmoothQuant (α 0.5) of the MLPs and the
    attention, with the attention of the third of layers most sensitive to INT8 kept fp32
    (optimize/prune/sensitivity.py): INT8 everywhere missed the agreement gate, dynamic W8A8 was far
    off, fp32 compute with 8-bit weights was unusably slow.
    QA (MiniLM encoder): optimum export + ORT fusions + dynamic INT8 per channel with the FFN output
    MatMuls kept fp32 (they moved the answers most; SmoothQuant made them worse); fp32 is the next
    rung, and the models trained on more data land there when INT8 misses the gates."""
    if task == "generation":
        return OnnxRecipe(weight_only_bits=8, block_size=64, exporter="genai-builder", smooth_alpha=0.5,
                          smooth_attention=True, fp32_attention_share=1 / 3)
    return OnnxRecipe(per_channel=True, reduce_range=not has_vnni(), keep_fp32=("ffn_output",))


def fp32_nodes(source: Path, keep_fp32: tuple[str, ...], attention_layers: list[int] = ()) -> list[str]:
    """The model builder's node names for the MatMuls a recipe keeps in fp32."""
    layers = json.loads((source / "config.json").read_text())["num_hidden_layers"]
    attention_layers = range(layers) if "attention" in keep_fp32 else attention_layers
    nodes = [f"/model/layers.{i}/attn/{name}/MatMul" for i in attention_layers for name in ("qkv_proj", "o_proj")]
    if "lm_head" in keep_fp32:
        nodes.append("/lm_head/MatMul")
    return nodes


def named_recipe(task: str, name: str) -> OnnxRecipe:
    """`build --recipe`: "int8" (QA: dynamic W8A8 per-channel on every MatMul; generation: the INT8 recipe that
    non-GGUF decoders start from), "fp32", "gguf-q4" (a decoder from a GGUF, its default: the GGUF's own Q4_1 /
    Q8_0 weights, bit-exact, fp32 compute: SmolLM2's 64 held-out continuations identical to PyTorch's), or
    "gguf-q4-int8": the same weights with int8 compute (level 4: 89% teacher-forced agreement,
    reports/gguf-grid-kernels.md), or "gguf-q4-int8-m8": that with its minimum term read as 8-bit
    (experiments/gguf-int8-m8), or "gguf-q4-int8-folded": the minimums folded into each weight's one
    MatMulNBits, its zero points and an 8-bit residual (experiments/gguf-int8-folded)."""
    if name.startswith("gguf-q4"):
        folded = name.endswith("-folded")
        return replace(GGUF_Q4, quantize=name.startswith("gguf-q4-int8"),
                       minimum_bits=8 if name.endswith("-m8") or folded else 32, fold_minimums=folded)
    if name == "fp32":
        return OnnxRecipe(quantize=False, exporter="genai-builder" if task == "generation" else "optimum")
    if task == "qa":
        return OnnxRecipe(per_channel=True, reduce_range=not has_vnni())
    return default_recipe(task)
