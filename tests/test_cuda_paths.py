"""The GPU paths that can be checked without a GPU: which device the catalog picks, what a build on
CUDA tries, how the CUDA report judges each promise, and a clear refusal where there is no GPU.
The measuring itself needs a lent GPU (experiments/gpu/cuda_showdown.sh; reports/*-cuda.md)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from models.runners import load_runner, providers, torch_device
from optimize.bench.cuda import EAGER
from optimize.bench.cuda_tables import markdown
from optimize.quantize.recipes import OnnxRecipe, cuda_ladder, recipe_ladder


def test_showdown_device_cpu_keeps_every_runtime_on_the_cpu(monkeypatch):
    monkeypatch.setenv("SHOWDOWN_DEVICE", "cpu")
    assert torch_device().type == "cpu"
    assert providers() == ["CPUExecutionProvider"]


def test_runners_say_where_they_run_and_the_qa_api_passes_it_on(built_presets):
    from models.showdown import Showdown

    showdown = Showdown(presets=dict(built_presets))
    answer = showdown.answer("Ada wrote the first program in 1843.", "Who wrote the first program?", "optimized")
    assert answer["device"] == "cpu"  # no GPU here: the ONNX variant runs on the CPU provider
    assert showdown.runner("qa", "baseline").device == "cpu"
    assert showdown.runner("generation", "optimized").device == "cpu"
    explicit = load_runner("qa", "baseline", "torch", showdown.runner("qa", "baseline").path, device="cpu")
    assert explicit.device == "cpu" and explicit.model.dtype.is_floating_point


def test_a_build_on_cuda_tries_fp16_rungs_only_and_gates_them_as_lossy():
    from optimize.build import promise_of

    assert cuda_ladder("qa") == [OnnxRecipe(quantize=False)]
    assert [r.exporter for r in cuda_ladder("generation")] == ["genai-builder", "optimum"]
    assert all(not r.quantize for r in cuda_ladder("generation"))
    # FP16 compute is not the source's arithmetic: held to the lossy budget, not to 99.5 % agreement
    assert {promise_of(r, cuda=True, weights_exact=True) for task in ("qa", "generation") for r in cuda_ladder(task)} == {"lossy"}
    assert promise_of(OnnxRecipe(quantize=False), cuda=False, weights_exact=True) == "exact"
    assert any(r.quantize for r in recipe_ladder("qa"))  # the CPU ladder still starts with INT8


def test_prompt_lookup_is_built_into_a_cpu_decoder_only():
    """Lookup runs on the CPU only (models/decoding.py): a CUDA build of the default `pruned-optimized` saved it as its
    decoding and said "decodes with exact prompt lookup by default", which the GPU row then did not do."""
    from pathlib import Path

    from models.catalog import default_preset
    from optimize.build import BuildTarget, decoding_inputs

    preset = default_preset("generation")
    target = BuildTarget(preset, preset.variant("pruned-optimized"), Path("source"), Path("built"))
    assert decoding_inputs(target, cuda=False) == {"prompt_lookup": True}
    assert decoding_inputs(target, cuda=True) == {}
    assert decoding_inputs(BuildTarget(preset, preset.variant("optimized"), Path("source"), Path("built")), cuda=False) == {}


def _record(task: str, agreement: dict) -> dict:
    machine = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580", "torch": "2.11", "torch_cuda": "13.0", "cudnn": 91900,
               "onnxruntime": "1.31.1", "providers": ["CUDAExecutionProvider"], "python": "3.12.3"}
    if task == "qa":
        timings = [{"tokens": 384, "variant": name, "device": "cuda", "model_p50_ms": ms, "model_p95_ms": ms,
                    "total_p50_ms": ms + 1, "speedup_model": 4.0 / ms, "speedup_total": 5.0 / (ms + 1)}
                   for name, ms in ((EAGER, 4.0), ("pruned-optimized", 0.5))]
    else:
        timings = [{"variant": EAGER, "device": "cuda", "new_tokens": 64, "total_p50_ms": 900.0, "ttft_ms": 20.0,
                    "decode_tokens_per_s": 70.0, "speedup_decode": 1.0, "speedup_total": 1.0}]
    return {"task": task, "machine": machine, "builds": {"optimized": "ready", "pruned-optimized": "OSError: no space"},
            "load_failures": {"pruned": "VariantUnavailable: missing"}, "timings": timings, "agreement": agreement,
            "config": {"qa_rounds": "100", "warmup": "10", "generation_rounds": "5"}}


def test_the_cuda_report_judges_each_promise_and_says_what_did_not_work():
    qa = markdown(_record("qa", {
        "optimized": {"source": "baseline (CPU)", "questions": 400, "same_answer": 0.99, "same_answer_interval": [0.97, 1.0],
                      "f1": 70.0, "source_f1": 70.5},
        "pruned-optimized": {"source": "pruned (CPU)", "questions": 400, "same_answer": 0.97,
                             "same_answer_interval": [0.95, 0.98], "f1": 70.0, "source_f1": 70.1}}))
    assert "| optimized | baseline (CPU) | 400 | 99.0 % | 97.0-100.0 % | 70.00 | 70.50 | kept |" in qa
    assert "| pruned-optimized | pruned (CPU) | 400 | 97.0 % | 95.0-98.0 % | 70.00 | 70.10 | **missed** |" in qa
    assert "| ~384 | pruned-optimized | cuda | 0.50 | 0.50 | 1.50 | 8.00x |" in qa
    assert "`pruned-optimized` did not build: OSError: no space" in qa and "`pruned` did not load" in qa
    assert "NVIDIA H100 80GB HBM3" in qa
    generation = markdown(_record("generation", {
        "baseline": {"source": "baseline (CPU)", "prompts": 8, "token_agreement": 0.97, "identical_texts": 6}}))
    assert "| baseline | baseline (CPU) | not measured | — | 8 | 97.0 % | 6/8 | **missed** |" in generation  # an old record
    generation = markdown(_record("generation", {
        "optimized": {"source": "baseline (CPU)", "prompts": 8, "token_agreement": 0.87, "identical_texts": 7,
                      "paragraphs": 40, "perplexity": 22.3, "source_perplexity": 22.1, "perplexity_ratio": 1.009,
                      "perplexity_ratio_ci95": [1.001, 1.016]},
        "pruned-optimized": {"source": "pruned (CPU)", "prompts": 8, "token_agreement": 1.0, "identical_texts": 8,
                             "paragraphs": 40, "perplexity": 27.0, "source_perplexity": 25.7, "perplexity_ratio": 1.05,
                             "perplexity_ratio_ci95": [1.03, 1.07]}}))
    assert "| optimized | baseline (CPU) | 22.30 (22.10) | 1.009x (1.001-1.016x) | 8 | 87.0 % | 7/8 | kept |" in generation
    assert "| pruned-optimized | pruned (CPU) | 27.00 (25.70) | 1.050x (1.030-1.070x) | 8 | 100.0 % | 8/8 | **missed** |" in generation


def test_cuda_generation_rows_are_judged_on_perplexity_beside_token_agreement(built_presets):
    """The CUDA bench's generation check (optimize/bench/cuda.py), run here on the CPU runners: the paired
    perplexity ratio against the source, and agreement beside it; a runner against itself reads exactly 1."""
    from models.showdown import Showdown
    from optimize.bench.cuda import CudaBenchConfig, generation_agreement

    showdown = Showdown(presets=dict(built_presets))
    baseline, optimized = showdown.runner("generation", "baseline"), showdown.runner("generation", "optimized")
    measured = generation_agreement({"baseline": baseline, "optimized": optimized}, {"baseline": baseline},
                                    CudaBenchConfig(agreement_prompts=2, agreement_tokens=8))
    assert measured["baseline"]["perplexity_ratio"] == 1.0 and measured["baseline"]["token_agreement"] == 1.0
    assert measured["optimized"]["paragraphs"] > 0 and measured["optimized"]["perplexity"] > 1.0
    low, high = measured["optimized"]["perplexity_ratio_ci95"]
    assert low <= measured["optimized"]["perplexity_ratio"] <= high


def test_bench_cuda_refuses_clearly_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the refusal is for machines without one")
    done = subprocess.run([sys.executable, "-m", "optimize", "bench-cuda", "--task", "qa"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "needs a CUDA GPU" in done.stderr and "Traceback" not in done.stderr


def test_a_fixed_shape_encoder_pads_each_window_and_keeps_the_dynamic_graphs_logits(tiny_qa_dir, tmp_path):
    """The CUDA-graph path (models/static_encoder.py), run on the CPU provider: its graph has no shape
    arithmetic left (what kept ONNX Runtime from capturing a CUDA graph), and each window padded to the
    fixed width gives the logits the dynamic graph gives at the window's own length."""
    import numpy as np
    import onnx

    from models.runners import OnnxQA, session_options
    from models.static_encoder import StaticEncoder, fixed_shape_model
    from optimize.export.onnx import export

    model_file = export(tiny_qa_dir, tmp_path / "onnx", "qa", None)
    fixed = onnx.load_from_string(fixed_shape_model(model_file, 48))
    constants = {i.name for i in fixed.graph.initializer}
    assert not [n for n in fixed.graph.node if n.op_type == "Shape"]  # the shape arithmetic is folded away, so
    assert all(n.input[1] in constants for n in fixed.graph.node if n.op_type == "Reshape")  # nothing waits on the CPU
    assert len(fixed.graph.node) < len(onnx.load(model_file).graph.node) / 2
    static = StaticEncoder(model_file, 48, session_options(), "CPUExecutionProvider", cuda_graph=False)
    assert [i.shape for i in static.session.get_inputs()] == [[1, 48]] * len(static.session.get_inputs())
    dynamic = OnnxQA(model_file.parent, session_options(), "CPUExecutionProvider")
    assert not dynamic.cuda_graph  # the graph is a CUDA path only
    rng = np.random.default_rng(0)
    for windows, tokens in ((1, 48), (2, 30), (1, 5)):
        inputs = {"input_ids": rng.integers(1, 100, (windows, tokens)), "attention_mask": np.ones((windows, tokens), np.int64),
                  "token_type_ids": np.zeros((windows, tokens), np.int64)}
        start, end = static(inputs)
        reference = dynamic(**inputs)
        assert start.shape == (windows, tokens)
        np.testing.assert_allclose(start, reference.start_logits, atol=1e-4)
        np.testing.assert_allclose(end, reference.end_logits, atol=1e-4)
    with pytest.raises(ValueError, match="does not fit"):
        static({"input_ids": np.ones((1, 49), np.int64), "attention_mask": np.ones((1, 49), np.int64),
                "token_type_ids": np.zeros((1, 49), np.int64)})
