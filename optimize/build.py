"""`python -m optimize build`: baseline → ONNX (optimum) → ORT graph optimization → dynamic INT8
on CPU (FP16 on CUDA), then accuracy against the source, written atomically with a manifest.

A build whose manifest records the same inputs (source weights' sha256 and this config) is
skipped; `--force` rebuilds.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from models.catalog import Preset
from models.manifest import atomic_dir, read_manifest, size_bytes, verify, write_manifest
from models.runners import ONNX_FILE, providers
from models.sources import resolve
from optimize.cpu import has_vnni
from optimize.gates import GateFailed, check, failures
from optimize.gguf_graft import source_gguf
from optimize.progress import quiet_quantizer, stage

log = logging.getLogger("optimize.build")
Progress = Callable[[str], None]
EXPORT_TASKS = {"qa": "question-answering", "generation": "text-generation-with-past"}
KEEP_FILES = ("config.json", "generation_config.json", "qa_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "vocab.txt", "chat_template.jinja", "merges.txt", "vocab.json",
              "added_tokens.json", "tokenizer.model")


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
    # the builder's fp32 graph with the source GGUF's own 4/8-bit weights (optimize/gguf_graft.py; `quantize`: int8 compute)
    keep_fp32: tuple[str, ...] = ()  # MatMuls left fp32: genai-builder "attention", "lm_head"; optimum "ffn_output", "ffn_input"
    smooth_alpha: float | None = None  # genai-builder INT8: SmoothQuant the MLPs first (optimize/smooth.py)
    smooth_attention: bool = False  # ... and the attention projections too
    fp32_attention_share: float = 0.0  # genai-builder INT8: the most INT8-sensitive share of layers keeps fp32 attention


GGUF_Q4 = OnnxRecipe(exporter="gguf-grid", weight_only_bits=4, block_size=32, quantize=False)


def recipe_ladder(task: str, from_gguf: bool = False) -> list[OnnxRecipe]:
    """Best first; the build publishes the first that keeps its promise (optimize/gates.py). A decoder that
    descends from a GGUF first gets that GGUF's own weights (`gguf-q4`: exact for the baseline, so
    gated on the same text; a recovered pruned model's moved weights are re-quantized to Q4_1 and
    gated as any export). Then INT8 rungs; the fp32 graph (fusions, no quantization) agrees with
    PyTorch on ~100% and is the last resort."""
    if task == "qa":  # lossy rungs are gated on F1 within a point of the source (issue 26), the fp32 graph on sameness
        return [OnnxRecipe(per_channel=True, reduce_range=not has_vnni()), default_recipe(task),
                replace(default_recipe(task), keep_fp32=("ffn_output", "ffn_input")), OnnxRecipe(quantize=False)]
    if from_gguf:
        return [GGUF_Q4, *recipe_ladder(task)]
    attention_fp32 = replace(default_recipe(task), keep_fp32=("attention",), smooth_attention=False,
                             fp32_attention_share=0.0)
    return [default_recipe(task), attention_fp32, replace(attention_fp32, keep_fp32=("attention", "lm_head")),
            OnnxRecipe(quantize=False, exporter="genai-builder")]


def default_recipe(task: str) -> OnnxRecipe:
    """Measured on this project's defaults (2-core AVX-512 CPUs; numbers in the README).

    Generation (SmolLM2): optimum's export leaves 3,714 nodes per decode step (unfused rotary
    attention and shape arithmetic); ONNX Runtime GenAI's model builder writes the same model as
    341 nodes (GroupQueryAttention, SkipSimplifiedLayerNorm, MatMulNBits): 135 vs 84 tok/s with the
    same decoder loop. Dynamic W8A8 agreed with fp32 on ~60% of greedy tokens (per-channel: garbage).
    Weight-only INT8 with int8 compute (MatMulNBits, accuracy level 4) on every MatMul agreed on
    97.3% (blocks of 16) — under the 98% gate; fp32 compute passes (98.4%) but runs at 3 tok/s.
    INT8 in the MLPs and the LM head, attention projections fp32, agreed on 98.4% (as MLPs-only
    did) at 76.5 vs 68.8 tok/s (~128-token prompt) on 16 held-out prompts — but on 64 on 97.4%
    (97.4% for the pruned model too). SmoothQuant of the MLPs first (optimize/smooth.py, α 0.5)
    raised that to 98.2% (pruned: 98.1%) at the same speed. Attention INT8 too (SmoothQuant on it as
    well) read 241 → 168 MB per token and decoded +9-18% faster, but agreed on 97.8%; with the
    attention of the third of layers most sensitive to INT8 kept fp32 (optimize/sensitivity.py,
    ranked on calibration prompts) the pruned model agreed on 98.14% at +6%: the default; attention
    fp32 everywhere is the next rung, then MLPs-only.
    QA (MiniLM encoder): optimum export + ORT fusions + dynamic W8A8 per-channel INT8 (3.8x PyTorch's
    model time) gave the same answer on 91.7% of held-out questions at −1.5 F1 (per-tensor 77%;
    FFN output kept fp32 93%), missing the 98% / 1-point gates. On the pruned model (4 heads, 512
    FFN) all-INT8 agreed on 97.2% (8.2 vs 11.0 ms at 384 tokens); per MatMul class alone: FFN
    output 97.6%, FFN input 98.1%, Q/K/V 99.1%, attention output 99.9%. SmoothQuant of the FFN
    outputs (an explicit Mul by 1/s before them, α 0.5) made all-INT8 worse: 96.0%. With the FFN output
    MatMuls kept fp32 it agreed on 98.4% at +0.05 F1, 9.6 ms: the default; fp32 is the next rung
    (the 12-head `optimized` lands there). MatMulNBits INT8 agreed on 98.6% but was slower than
    PyTorch at 384 tokens (it is a decode-time kernel). The models trained on more data (issue 11)
    quantize worse: the default rung agrees on ~89% for both; on the pruned one (10 heads, 1280
    FFN), dynamic INT8 of the attention projections alone (Q/K/V + output) agreed on 94.5% of
    forced spans, the FFN input alone 89.6%, both 90.4% (one-off probe, 2026-11-23), so no partial
    INT8 rung is worth adding to the ladder: QA ships fp32."""
    if task == "generation":
        return OnnxRecipe(weight_only_bits=8, block_size=16, exporter="genai-builder", smooth_alpha=0.5,
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
    reports/gguf-grid-kernels.md)."""
    if name.startswith("gguf-q4"):
        return replace(GGUF_Q4, quantize=name == "gguf-q4-int8")
    if name == "fp32":
        return OnnxRecipe(quantize=False, exporter="genai-builder" if task == "generation" else "optimum")
    if task == "qa":
        return OnnxRecipe(per_channel=True, reduce_range=not has_vnni())
    return default_recipe(task)


def add_logits_to_keep(model_path: Path) -> None:
    """Slice the hidden states before the LM head to the last `logits_to_keep` positions (the idea
    of transformers' argument of that name). Prefill otherwise projects every prompt position onto
    the 49k-token vocabulary and keeps one: for a 128-token prompt the LM head was about a quarter
    of the prefill's MatMulNBits work. Teacher-forced accuracy passes the full length."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(model_path), load_external_data=False)  # weights stay in model.onnx.data
    graph = model.graph
    # the LM head: the builder's /lm_head/ node(s) (the gguf-q4 recipe's two halves), else the logits' producer
    heads = [node for node in graph.node if node.name.startswith("/lm_head/")] or [
        next(node for node in graph.node if "logits" in node.output)]
    graph.input.append(helper.make_tensor_value_info("logits_to_keep", TensorProto.INT64, [1]))
    graph.initializer.extend([helper.make_tensor("logits_to_keep/ends", TensorProto.INT64, [1], [2**63 - 1]),
                              helper.make_tensor("logits_to_keep/axes", TensorProto.INT64, [1], [1])])
    hidden = heads[0].input[0]
    for head in heads:
        head.input[:] = ["logits_to_keep/hidden" if name == hidden else name for name in head.input]
    position = list(graph.node).index(heads[0])  # nodes stay topologically sorted: the new ones go just before the head
    graph.node.insert(position, helper.make_node("Neg", ["logits_to_keep"], ["logits_to_keep/starts"],
                                                 name="/logits_to_keep/Neg"))
    graph.node.insert(position + 1, helper.make_node(
        "Slice", [hidden, "logits_to_keep/starts", "logits_to_keep/ends", "logits_to_keep/axes"],
        ["logits_to_keep/hidden"], name="/logits_to_keep/Slice"))
    logits = next(output for output in graph.output if output.name == "logits")
    logits.type.tensor_type.shape.dim[1].dim_param = "logits_length"
    onnx.save(model, str(model_path))


def genai_build(source: Path, output: Path, recipe: OnnxRecipe, cuda: bool) -> tuple[Path, list[int]]:
    """ONNX Runtime GenAI's model builder: fused decoder graph + weight-only INT8 (FP16 on CUDA).
    Returns the model and the layers whose attention stayed fp32 by sensitivity."""
    import subprocess
    import sys

    from optimize import narrow_ffn

    int8 = recipe.quantize and not cuda
    smooth = bool(recipe.smooth_alpha and int8)
    widths = json.loads((source / "config.json").read_text()).get("intermediate_sizes")
    fp32_attention_layers: list[int] = []
    if smooth or widths or (int8 and recipe.fp32_attention_share):  # one load, edits in memory, one copy for the builder
        from transformers import AutoTokenizer

        from models.runners import load_causal_lm
        from optimize import sensitivity
        from optimize.smooth import smooth_attention, smooth_mlps

        model, tokenizer = load_causal_lm(source), AutoTokenizer.from_pretrained(source)
        if smooth:
            smooth_mlps(model, tokenizer, recipe.smooth_alpha)
        if int8 and recipe.fp32_attention_share:
            scores = sensitivity.attention_sensitivity(model, tokenizer)
            fp32_attention_layers = sensitivity.most_sensitive(scores, recipe.fp32_attention_share)
        if smooth and recipe.smooth_attention:
            smooth_attention(model, tokenizer, recipe.smooth_alpha)
        if widths:  # the builder assumes one FFN width: build padded, then cut each layer back
            narrow_ffn.pad_to_uniform(model)
        source = save_model_like(model, source, output.parent / "prepared")
    precision, provider = ("fp16", "cuda") if cuda else (f"int{recipe.weight_only_bits or 8}" if recipe.quantize else "fp32", "cpu")
    options = ["shared_embeddings=false", f"block_size={recipe.block_size}", "accuracy_level=4"]
    excluded = fp32_nodes(source, recipe.keep_fp32, fp32_attention_layers)
    if excluded and precision.startswith("int"):
        options.append("nodes_to_exclude=" + ",".join(excluded))
    command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(source), "-o", str(output),
               "-p", precision, "-e", provider, "-c", str(output.parent / "builder-cache"), "--extra_options", *options]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not (output / ONNX_FILE).exists():
        raise RuntimeError(f"onnxruntime-genai model builder failed: {done.stderr[-2000:]}")
    if widths:
        narrow_ffn.narrow(output / ONNX_FILE, widths)
    return output / ONNX_FILE, fp32_attention_layers


def save_model_like(model, source: Path, output: Path) -> Path:
    """`model` saved to `output` with `source`'s tokenizer and chat-template files beside it."""
    model.save_pretrained(output, safe_serialization=True)
    for name in KEEP_FILES:
        if (source / name).exists() and not (output / name).exists():
            shutil.copy(source / name, output / name)
    return output


def source_fingerprint(directory: Path) -> str:
    """sha256 over the source's weight files, so a retrained baseline triggers a rebuild."""
    digest = hashlib.sha256()
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file() and path.suffix in (".safetensors", ".onnx", ".bin", ".json"):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def export(source: Path, output: Path, task: str, opset: int | None) -> Path:
    """optimum's export. The tracer warns about every Python value it freezes into the graph; the
    shapes it freezes are the exporter's business, so those warnings are not shown."""
    import warnings

    import torch
    from optimum.exporters.onnx import main_export

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        main_export(str(source), output, task=EXPORT_TASKS[task], opset=opset, do_validation=False,
                    local_files_only=True, library_name="transformers")
    return output / ONNX_FILE


def graph_optimize(onnx_dir: Path, output: Path, level: int, cuda: bool) -> Path:
    from optimum.onnxruntime import ORTOptimizer
    from optimum.onnxruntime.configuration import OptimizationConfig

    # onnxruntime's fusion modules log under their bare module names; this one warns, on every build,
    # that shape inference is off, which this config asks for on purpose
    logging.getLogger("fusion_skiplayernorm").setLevel(logging.ERROR)
    optimizer = ORTOptimizer.from_pretrained(onnx_dir, file_names=[ONNX_FILE])
    config = OptimizationConfig(optimization_level=level, optimize_for_gpu=cuda, fp16=cuda,
                                disable_shape_inference=True)
    optimizer.optimize(config, save_dir=output, file_suffix="")
    return output / ONNX_FILE


GRAPH_TIE = 0.03  # the fused graph must be this much faster to be kept
GRAPH_TIMING_SHAPES = ((1, 384), (2, 384), (1, 128))  # (windows, tokens): one full window, a long context, a short one


def graph_latency_ms(graphs: dict[str, Path], shapes: tuple[tuple[int, int], ...] = GRAPH_TIMING_SHAPES,
                     rounds: int = 20) -> dict[str, float]:
    """Summed median latency over `shapes` per encoder graph, rounds interleaved, with the serving
    session options. Why measure per build: which one wins depends on the model and the thread
    settings (no spinning: the fused Attention won on the 12-head MiniLM, 34.1 vs 36.4 ms, and lost
    on the 4-head pruned one, 13.2 vs 11.8 ms; with 100 µs spinning they tied at 9.8 ms). Why several
    shapes: visitors paste contexts of every length, and a choice made on one 384-token window said
    nothing about two windows or a short question (issue 31)."""
    import numpy as np
    import onnxruntime

    from models.runners import session_options
    from models.timing import percentile, timed_rounds

    sessions = {name: onnxruntime.InferenceSession(str(path), session_options(), providers=["CPUExecutionProvider"])
                for name, path in graphs.items()}
    totals = dict.fromkeys(graphs, 0.0)
    for shape in shapes:
        ids = np.random.default_rng(0).integers(1000, 2000, shape, dtype=np.int64)
        values = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        calls = {name: functools.partial(session.run, None, {i.name: values[i.name] for i in session.get_inputs()})
                 for name, session in sessions.items()}
        for name, runs in timed_rounds(calls, rounds, warmup=3).items():
            totals[name] += percentile([1e3 * seconds for seconds, _ in runs], 50)
    return totals


def quantize_dynamic(onnx_dir: Path, output: Path, recipe: OnnxRecipe) -> Path:
    """ONNX Runtime's dynamic quantizer (u8 activations, s8 weights). Called directly rather than
    through optimum's ORTQuantizer because after fusion the graph holds com.microsoft ops
    (Attention, SkipLayerNormalization) whose output types shape inference cannot name; the
    `DefaultTensorType` option tells the quantizer they are float."""
    import onnx
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic

    output.mkdir(parents=True, exist_ok=True)
    graph = onnx.load(str(onnx_dir / ONNX_FILE), load_external_data=False).graph
    excluded = []
    if "ffn_output" in recipe.keep_fp32:  # BERT's FFN down-projection: its GELU input quantizes worst
        excluded += [node.name for node in graph.node if node.op_type == "MatMul"
                     and "/output/dense/" in node.name and "/attention/" not in node.name]
    if "ffn_input" in recipe.keep_fp32:  # the up-projection: with both fp32, only attention's projections are INT8
        excluded += [node.name for node in graph.node if node.op_type == "MatMul" and "/intermediate/dense/" in node.name]
    with quiet_quantizer():
        ort_quantize_dynamic(
            onnx_dir / ONNX_FILE, output / ONNX_FILE, weight_type=QuantType.QInt8, per_channel=recipe.per_channel,
            reduce_range=recipe.reduce_range, nodes_to_exclude=excluded,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    return output / ONNX_FILE


def quantize_weight_only(onnx_dir: Path, output: Path, bits: int, block_size: int = 32) -> Path:
    """Weight-only quantization (MatMulNBits): weights in `bits` bits with a scale per block,
    activations quantized per block at run time (accuracy level 4) instead of per tensor."""
    import onnx

    output.mkdir(parents=True, exist_ok=True)
    with quiet_quantizer():  # its import calls logging.basicConfig(level=INFO) when nothing configured logging
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        # measured on SmolLM2: 97.8% greedy agreement; keeping the LM head fp32 did not help (97.5%)
        quantizer = MatMulNBitsQuantizer(onnx.load(onnx_dir / ONNX_FILE), bits=bits, block_size=block_size,
                                         is_symmetric=True, accuracy_level=4)
        quantizer.process()
    quantizer.model.save_model_to_file(str(output / ONNX_FILE), use_external_data_format=False)
    return output / ONNX_FILE


def build_onnx(preset: Preset, variant_name: str, recipe: OnnxRecipe | None = None, force: bool = False,
               progress: Progress = log.info, evaluate: bool = True, strict: bool = True) -> Path:
    """Build an ONNX Runtime variant of `preset` from the variant it is built from.

    A missed accuracy gate fails the build (nothing is published). With no explicit recipe, the
    task's recipes are tried fastest first (`recipe_ladder`) and the first that passes its gates is
    published, with the rejected ones and their misses in its manifest (a strict build measures a
    recipe only until its agreement gate is out of reach). `strict=False` publishes the first recipe
    even when it misses a gate, recording the miss (the app shows it), measured in full."""
    ladder = [recipe] if recipe else recipe_ladder(preset.task, from_gguf=preset.task == "generation" and source_gguf(preset, variant_name) is not None)
    if not strict:
        ladder = ladder[:1]
    variant = preset.variant(variant_name)
    source = resolve(preset, preset.variant(variant.built_from))
    target = preset.built_dir(variant_name)
    cuda = providers()[0] == "CUDAExecutionProvider"
    inputs = json.loads(json.dumps({"source": str(source), "source_sha256": source_fingerprint(source),
                                    "recipes": [asdict(r) for r in ladder], "cuda": cuda}))  # as the manifest stores it
    if up_to_date(target, inputs) and not force:
        progress(f"{preset.name}/{variant_name}: up to date, skipped")
        return target
    rejected: list[dict] = []
    for index, candidate in enumerate(ladder):
        try:
            return _build_onnx_once(preset, variant_name, candidate, source, target, inputs, cuda, progress,
                                    evaluate, strict, rejected)
        except GateFailed as error:
            if index == len(ladder) - 1:
                raise
            rejected.append({"recipe": asdict(candidate), "missed": str(error), "gates_missed": error.missed})
            progress(f"{preset.name}/{variant_name}: {error} Trying the next recipe.")
    raise AssertionError("unreachable")


def _build_onnx_once(preset: Preset, variant_name: str, recipe: OnnxRecipe, source: Path, target: Path, inputs: dict,
                     cuda: bool, progress: Progress, evaluate: bool, strict: bool, rejected: list[dict]) -> Path:
    variant = preset.variant(variant_name)
    steps = []
    with atomic_dir(target) as staging:
        work = staging / "work"
        exact = False  # the graph carries its source's weights bit for bit and computes in fp32
        if recipe.exporter == "gguf-grid":
            current, exact = _gguf_grid_steps(preset, variant_name, source, work, recipe, cuda, steps, progress)
        elif recipe.exporter == "genai-builder":
            with stage(progress, f"{preset.name}/{variant_name}: ONNX Runtime GenAI model builder (fused graph, "
                                 f"{'INT8 weights' if recipe.quantize else 'fp32'})"):
                current, fp32_layers = genai_build(source, work / "genai", recipe, cuda)
            weights = ("fp16" if cuda else f"MatMulNBits int{recipe.weight_only_bits} block {recipe.block_size}"
                       + (f", fp32 {' + '.join(recipe.keep_fp32)}" if recipe.keep_fp32 else "")
                       + (f", fp32 attention in the most INT8-sensitive layers {fp32_layers}" if fp32_layers else "")
                       + (f", {'MLPs + attention' if recipe.smooth_attention else 'MLPs'} SmoothQuant α={recipe.smooth_alpha}"
                          if recipe.smooth_alpha else "") if recipe.quantize else "fp32")
            steps.append(f"export+fuse+quantize (onnxruntime-genai model builder: GroupQueryAttention, {weights})")
        else:
            current = _optimum_steps(source, work, preset, variant, recipe, cuda, steps, progress)
        if recipe.exporter != "optimum":
            add_logits_to_keep(current)
            steps.append("logits_to_keep input: the LM head runs on the last position only when decoding")
        for path in current.parent.iterdir():
            if path.name.startswith(ONNX_FILE):
                shutil.move(path, staging / path.name)
        for name in KEEP_FILES:
            if (source / name).exists():
                shutil.copy(source / name, staging / name)
        shutil.rmtree(work)
        metrics = {}
        if evaluate:
            promise = "lossy" if recipe.quantize or (recipe.exporter == "gguf-grid" and not exact) else "exact"
            metrics = _evaluate(preset, variant_name, staging, source, strict, progress, promise, weights_exact=exact)
        if rejected:
            metrics["rejected_recipes"] = rejected
            steps.append(f"(chosen after {len(rejected)} faster recipe(s) missed an accuracy gate)")
        write_manifest(staging, source=f"{preset.name}/{variant.built_from}", steps=steps, metrics=metrics,
                       inputs=inputs, size_bytes=size_bytes(staging), preset=preset.name, variant=variant_name)
    progress(f"{preset.name}/{variant_name}: ready ({size_bytes(target) / 1e6:.1f} MB) {json.dumps(metrics)}")
    return target


def _gguf_grid_steps(preset: Preset, variant_name: str, source: Path, work: Path, recipe: OnnxRecipe, cuda: bool,
                     steps: list[str], progress: Progress) -> tuple[Path, bool]:
    """The builder's fp32 graph, then every weight back on the source GGUF's grid (optimize/gguf_graft.py).
    Returns the model and whether it computes the source's model exactly (fp32 compute, level 0)."""
    from optimize import gguf_graft
    from optimize.gguf_grid import read_grid

    if cuda:
        raise ValueError("the gguf-grid recipe is CPU-only (MatMulNBits with a minimum term)")
    gguf = gguf_graft.gguf_file(preset, variant_name)
    progress(f"{preset.name}/{variant_name}: ONNX Runtime GenAI model builder (fp32), then {gguf.name}'s own weights")
    current, _ = genai_build(source, work / "genai", OnnxRecipe(quantize=False, exporter="genai-builder"), cuda)
    level = 4 if recipe.quantize else 0
    counts = gguf_graft.graft(current, read_grid(gguf), accuracy_level=level)
    requantized = counts.pop("re-quantized Q4_1")
    steps.append(f"export+fuse (onnxruntime-genai model builder, fp32: GroupQueryAttention), then the weights of {gguf.name} "
                 f"as they are, bit-exact: {', '.join(f'{n} {kind}' for kind, n in counts.items() if n)}"
                 + (f"; {requantized} weights moved by training re-quantized to Q4_1" if requantized else "")
                 + f"; accuracy level {level} ({'int8' if level else 'fp32'} compute)")
    return current, level == 0 and not requantized


def _optimum_steps(source: Path, work: Path, preset: Preset, variant, recipe: OnnxRecipe, cuda: bool,
                   steps: list[str], progress: Progress) -> Path:
    """optimum export → ORT graph optimization → INT8 (CPU); returns the final model path."""
    name = f"{preset.name}/{variant.name}"
    with stage(progress, f"{name}: exporting {variant.built_from} to ONNX"):
        current = export(source, work / "export", preset.task, recipe.opset)
    steps.append(f"export-onnx (optimum, task {EXPORT_TASKS[preset.task]})")
    if recipe.optimization_level:
        exported = current
        with stage(progress, f"{name}: ORT graph optimization level {recipe.optimization_level}"):
            current = graph_optimize(current.parent, work / "optimized", recipe.optimization_level, cuda)
        steps.append(f"graph-optimize (level {recipe.optimization_level}{', fp16' if cuda else ''})")
        if preset.task == "qa" and not cuda:
            with stage(progress, f"{name}: timing the fused graph against ONNX Runtime's own load-time fusions"):
                timings = graph_latency_ms({"fused": current, "load-time fusions only": exported})
            # fused only when clearly faster: within a few percent the pick was a coin toss, and the INT8
            # rungs quantize whichever graph was kept (the pruned model's FFN-output rung measured forced-span
            # F1 -1.03 on one graph and -0.84 on the other), so a tie keeps the build reproducible
            kept = "fused" if timings["fused"] < (1 - GRAPH_TIE) * timings["load-time fusions only"] else "load-time fusions only"
            current = current if kept == "fused" else exported
            shapes = ", ".join(f"{w}x{t}" for w, t in GRAPH_TIMING_SHAPES)
            steps.append(f"kept the faster graph over windows x tokens {shapes} ({kept}), summed: "
                         + ", ".join(f"{k} {v:.1f} ms" for k, v in timings.items()))
    if recipe.quantize and not cuda and recipe.weight_only_bits:
        with stage(progress, f"{name}: weight-only INT{recipe.weight_only_bits} quantization"):
            current = quantize_weight_only(current.parent, work / "quantized", recipe.weight_only_bits, recipe.block_size)
        steps.append(f"quantize-weight-only-int{recipe.weight_only_bits} (MatMulNBits, block {recipe.block_size}, "
                     "accuracy level 4)")
    elif recipe.quantize and not cuda:
        with stage(progress, f"{name}: dynamic INT8 quantization"):
            current = quantize_dynamic(current.parent, work / "quantized", recipe)
        steps.append(f"quantize-dynamic-int8 (per_channel={recipe.per_channel}, reduce_range={recipe.reduce_range}"
                     + (f", fp32: {', '.join(recipe.keep_fp32)}" if recipe.keep_fp32 else "") + ")")
    return current


def build_assembled(preset: Preset, variant_name: str, force: bool = False, progress: Progress = log.info,
                    evaluate: bool = True, strict: bool = True) -> Path:
    """A pruned decoder assembled from its baseline and a committed plan + recovery delta
    (optimize/prune_generation.py): the recovered weights are data-dependent, but committing them
    whole would break the 150 MB cap, so only what training produced is committed."""
    from models.catalog import REPO_ROOT
    from optimize.prune_generation import DELTA_FILE, PLAN_FILE, assemble

    variant = preset.variant(variant_name)
    recipe_dir = REPO_ROOT / variant.recipe_dir
    if not (recipe_dir / DELTA_FILE).exists():
        raise FileNotFoundError(f"No pruning plan at {variant.recipe_dir}; run `python -m optimize prune --task {preset.task}`.")
    source = resolve(preset, preset.variant(variant.built_from))
    target = preset.built_dir(variant_name)
    inputs = {"source": str(source), "source_sha256": source_fingerprint(source),
              "recipe_sha256": source_fingerprint(recipe_dir)}
    if up_to_date(target, inputs) and not force:
        progress(f"{preset.name}/{variant_name}: up to date, skipped")
        return target
    plan = json.loads((recipe_dir / PLAN_FILE).read_text())
    with atomic_dir(target) as staging:
        with stage(progress, f"{preset.name}/{variant_name}: assembling from {variant.built_from} + {variant.recipe_dir}"):
            assemble(source, recipe_dir, staging)
        metrics = {}
        if evaluate:
            metrics = _evaluate(preset, variant_name, staging, source, strict, progress, "pruned")
        write_manifest(staging, source=f"{preset.name}/{variant.built_from} + {variant.recipe_dir}",
                       steps=[f"drop layers {plan['dropped_layers']}", f"keep FFN neurons per layer: {plan['ffn_kept']}",
                              "apply LoRA + norm recovery delta"],
                       metrics=metrics, inputs=inputs, size_bytes=size_bytes(staging), preset=preset.name,
                       variant=variant_name)
    progress(f"{preset.name}/{variant_name}: ready ({size_bytes(target) / 1e6:.1f} MB) {json.dumps(metrics)}")
    return target


def up_to_date(target: Path, inputs: dict) -> bool:
    """Built from the same inputs, and every file still as the manifest recorded it: a corrupt
    artifact (truncated, edited, a file missing) is rebuilt, not skipped."""
    if verify(target):
        return False
    existing = read_manifest(target)
    return bool(existing) and existing.get("inputs") == inputs


def _evaluate(preset: Preset, variant_name: str, staging: Path, source: Path, strict: bool, progress: Progress,
              promise: str, weights_exact: bool = False) -> dict:
    """`promise` (exact, lossy, pruned: optimize/gates.py) decides which gate applies; it and a
    one-line summary of the gated measures go into the manifest for /variants and the app."""
    from optimize.gates import promise_line

    variant = preset.variant(variant_name)
    with stage(progress, f"{preset.name}/{variant_name}: measuring accuracy against {variant.built_from} ({promise})"):
        from optimize.accuracy import measure
        metrics = measure(preset, staging, variant_name, reference=source, promise=promise, stop_below_gate=strict)
    metrics["promise"] = promise
    if weights_exact:
        metrics["weights_exact"] = True
    metrics["summary"] = promise_line(preset.task, variant.runtime, metrics)
    _gate(preset, variant_name, variant.runtime, metrics, strict, progress)
    return metrics


def _gate(preset: Preset, variant_name: str, runtime: str, metrics: dict, strict: bool, progress: Progress) -> None:
    """Strict (the default): a missed gate fails the build and nothing is published. Lenient
    (`--allow-missed-gates`): the miss is recorded in the manifest and shown by the app."""
    missed = failures(preset.task, runtime, metrics)
    if not missed:
        return
    metrics["gates_missed"] = missed
    if strict:
        check(f"{preset.name}/{variant_name}", preset.task, runtime, metrics)
    progress(f"{preset.name}/{variant_name}: WARNING missed accuracy gate: {'; '.join(missed)}")
