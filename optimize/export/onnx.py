"""ONNX export: optimum's exporter and ORT's graph optimizer for encoders, ONNX Runtime GenAI's model
builder for decoders, and the per-build choice between a fused and an unfused encoder graph.
"""
from __future__ import annotations

import functools
import json
import logging
import shutil
from pathlib import Path

from models.runners import ONNX_FILE
from optimize.quantize.recipes import OnnxRecipe, fp32_nodes

log = logging.getLogger(__name__)
EXPORT_TASKS = {"qa": "question-answering", "generation": "text-generation-with-past"}
KEEP_FILES = ("config.json", "generation_config.json", "qa_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "vocab.txt", "chat_template.jinja", "merges.txt", "vocab.json",
              "added_tokens.json", "tokenizer.model")




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


GENAI_BUILDER_TYPES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi", "phi3", "granite",
                       "olmo", "nemotron", "chatglm"}
# SmoothQuant and the attention-sensitivity ranking edit Llama-style blocks: gate/up/down, v/o, and an
# RMSNorm whose gain multiplies (Gemma's adds one to it, so dividing its gain is not exact)
LLAMA_BLOCK_TYPES = {"llama", "mistral", "qwen2"}


def _check_builder_recipe(model_type: str, smooths: bool, ranks_attention: bool) -> None:
    """A recipe this architecture cannot take is a rung the ladder skips, with the reason."""
    from optimize.prune.encoder_layout import UnsupportedArchitecture

    if model_type not in GENAI_BUILDER_TYPES:
        raise UnsupportedArchitecture(f"ONNX Runtime GenAI's model builder does not build '{model_type}' models")
    if (smooths or ranks_attention) and model_type not in LLAMA_BLOCK_TYPES:
        raise UnsupportedArchitecture(f"SmoothQuant and the attention-sensitivity ranking here edit Llama-style blocks "
                                      f"({', '.join(sorted(LLAMA_BLOCK_TYPES))}), not '{model_type}'")


def genai_build(source: Path, output: Path, recipe: OnnxRecipe, cuda: bool) -> tuple[Path, list[int]]:
    """ONNX Runtime GenAI's model builder: fused decoder graph + weight-only INT8 (FP16 on CUDA).
    Returns the model and the layers whose attention stayed fp32 by sensitivity."""
    from optimize.export import narrow_ffn

    int8 = recipe.quantize and not cuda
    smooth = bool(recipe.smooth_alpha and int8)
    config = json.loads((source / "config.json").read_text())
    _check_builder_recipe(config["model_type"], smooth or bool(recipe.smooth_attention and int8),
                          bool(int8 and recipe.fp32_attention_share))
    widths = config.get("intermediate_sizes")
    fp32_attention_layers: list[int] = []
    if smooth or widths or (int8 and recipe.fp32_attention_share):  # one load, edits in memory, one copy for the builder
        from transformers import AutoTokenizer

        from models.runners import load_causal_lm
        from optimize.prune import sensitivity
        from optimize.quantize.smooth import smooth_attention, smooth_mlps

        model, tokenizer = load_causal_lm(source), AutoTokenizer.from_pretrained(source)
        if smooth:
            smooth_mlps(model, tokenizer, recipe.smooth_alpha)
        if int8 and recipe.fp32_attention_share:
            scores = sensitivity.attention_sensitivity(model, tokenizer, recipe.block_size)
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
    from optimize.prune.encoder_layout import UnsupportedArchitecture

    try:
        _run_builder(source, output, precision, provider, options)
    except Exception as error:  # noqa: BLE001 - the builder raises plain Exceptions for what it cannot build
        log.warning("onnxruntime-genai model builder failed: %s", error, exc_info=True)
        # a rung this model cannot take (the ladder goes on to optimum's export), with the builder's own reason
        raise UnsupportedArchitecture(f"ONNX Runtime GenAI's model builder failed on this model ({str(error)[:300]})") from error
    if not (output / ONNX_FILE).exists():
        raise UnsupportedArchitecture(f"ONNX Runtime GenAI's model builder wrote no {ONNX_FILE} for this model")
    if widths:
        narrow_ffn.narrow(output / ONNX_FILE, widths)
    return output / ONNX_FILE, fp32_attention_layers


def _run_builder(source: Path, output: Path, precision: str, provider: str, options: list[str]) -> None:
    """The builder's own command line (`python -m onnxruntime_genai.models.builder -i ... --extra_options ...`),
    called in this process: a subprocess paid the imports of torch and transformers again for every build
    (docs/measurements.md), and the builder sets no global state. Its prints go to the log at debug level."""
    import contextlib
    import io

    from onnxruntime_genai.models import builder

    cache = str(output.parent / "builder-cache")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        extra = builder.parse_extra_options(None, str(source), str(output), precision, provider, cache, options)
        builder.create_model(None, str(source), str(output), precision, provider, cache, **extra)
    log.debug("onnxruntime-genai model builder:\n%s", printed.getvalue()[-4000:])


def save_model_like(model, source: Path, output: Path) -> Path:
    """`model` saved to `output` with `source`'s tokenizer and chat-template files beside it."""
    model.save_pretrained(output, safe_serialization=True)
    for name in KEEP_FILES:
        if (source / name).exists() and not (output / name).exists():
            shutil.copy(source / name, output / name)
    return output


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


def graph_optimize(onnx_dir: Path, output: Path, level: int, cuda: bool, skip_layer_norm: bool = True) -> Path:
    """`skip_layer_norm`: False keeps each residual Add and its LayerNormalization apart (optimize/export/layer_norm.py)."""
    from optimum.onnxruntime import ORTOptimizer
    from optimum.onnxruntime.configuration import OptimizationConfig

    # onnxruntime's fusion modules log under their bare module names; this one warns, on every build,
    # that shape inference is off, which this config asks for on purpose
    logging.getLogger("fusion_skiplayernorm").setLevel(logging.ERROR)
    # and this one, six times per head-pruned encoder, that its attention width (heads kept × head size) is
    # not the input width: pruning made it so, the fused Attention takes both widths, and the build times the
    # fused graph against the unfused one anyway
    logging.getLogger("fusion_attention").setLevel(logging.ERROR)
    optimizer = ORTOptimizer.from_pretrained(onnx_dir, file_names=[ONNX_FILE])
    config = OptimizationConfig(optimization_level=level, optimize_for_gpu=cuda, fp16=cuda,
                                disable_shape_inference=True, disable_skip_layer_norm_fusion=not skip_layer_norm,
                                disable_bias_skip_layer_norm_fusion=not skip_layer_norm)
    optimizer.optimize(config, save_dir=output, file_suffix="")
    return output / ONNX_FILE


# the fused graph must be this much faster to be kept. The two measured 1-3 % apart on this CPU, and a 3 %
# tie let a loaded CI machine flip the pick: the INT8 rungs quantize whichever graph was kept, so the shipped
# `optimized` answered one unanswerable seed question differently from run to run. A choice that changes
# the model must not rest on noise: only a clear win counts (docs/measurements.md).
GRAPH_TIE = 0.10
GRAPH_TIMING_SHAPES = ((1, 384), (2, 384), (1, 128))  # (windows, tokens): one full window, a long context, a short one


def graph_latency_ms(graphs: dict[str, Path], shapes: tuple[tuple[int, int], ...] = GRAPH_TIMING_SHAPES,
                     rounds: int = 20, settings: dict | None = None) -> dict[str, float]:
    """Summed median latency over `shapes` per encoder graph, rounds interleaved, with the serving
    session options. Why measure per build: which one wins depends on the model and the thread
    settings (the fused Attention won on the 12-head MiniLM and lost on the 4-head pruned one with no
    spinning, and they tied with bounded spinning: docs/measurements.md). Why several
    shapes: visitors paste contexts of every length, and a choice made on one 384-token window said
    nothing about two windows or a short question (issue 31). `settings`: the variant's session settings
    (models/runners.py session_settings), as it will be served."""
    import numpy as np
    import onnxruntime

    from models.runners import session_options
    from models.timing import percentile, timed_rounds

    sessions = {name: onnxruntime.InferenceSession(str(path), session_options(settings), providers=["CPUExecutionProvider"])
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


def faster_graph(fused: Path, exported: Path, settings: dict) -> tuple[Path, str]:
    """The fused graph or the export (ONNX Runtime's load-time fusions only), whichever is clearly faster here,
    and the manifest's line with both timings."""
    timings = graph_latency_ms({"fused": fused, "load-time fusions only": exported}, settings=settings)
    # fused only when clearly faster: within a few percent the pick was a coin toss, and the INT8
    # rungs quantize whichever graph was kept (the pruned model's FFN-output rung measured forced-span
    # F1 -1.03 on one graph and -0.84 on the other), so a tie keeps the build reproducible
    kept = "fused" if timings["fused"] < (1 - GRAPH_TIE) * timings["load-time fusions only"] else "load-time fusions only"
    shapes = ", ".join(f"{w}x{t}" for w, t in GRAPH_TIMING_SHAPES)
    return (fused if kept == "fused" else exported), (f"kept the faster graph over windows x tokens {shapes} ({kept}), "
                                                      "summed: " + ", ".join(f"{k} {v:.1f} ms" for k, v in timings.items()))
