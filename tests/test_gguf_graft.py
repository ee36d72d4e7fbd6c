"""The gguf-q4 recipe's graph surgery on a tiny llama whose weights sit on a Q4_1 / Q8_0 grid (as a
GGUF-born baseline's do): every weight grafted, the fp32 graph's answer kept, and a grid that does
not reproduce the graph's weights refused. The real SmolLM2 build is left to the lead's measured run."""
from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from models.errors import VariantUnavailable
from optimize.export import gguf_graft, gguf_grid
from optimize.export.onnx import genai_build
from optimize.quantize.recipes import OnnxRecipe, default_recipe, named_recipe


@pytest.fixture(scope="module")
def grid_llama(tmp_path_factory):
    """The tiny llama with its weights quantized by gguf (Q4_1 projections, Q8_0 tied embedding), the
    dequantized model saved as the baseline, and the grid read back from gguf's bytes. Its weights are at the
    scale the logit tolerances below were set for."""
    from gguf import GGMLQuantizationType, quantize
    from transformers import AutoModelForCausalLM

    from tests.tiny import tiny_llama

    source = tiny_llama(tmp_path_factory.mktemp("grid-source"), init_range=0.02)
    model = AutoModelForCausalLM.from_pretrained(source)
    grid = {}
    for name, parameter in model.named_parameters():
        if parameter.ndim != 2:
            continue
        kind = "Q8_0" if name == "model.embed_tokens.weight" else "Q4_1"
        data = quantize(parameter.detach().numpy(), GGMLQuantizationType[kind])
        grid[name] = gguf_grid.grid_weight(name, kind, data, parameter.shape[1])
        with torch.no_grad():
            parameter.copy_(torch.from_numpy(grid[name].dequantize()))
    grid["lm_head.weight"] = grid["model.embed_tokens.weight"]
    baseline = tmp_path_factory.mktemp("grid-llama")
    model.save_pretrained(baseline)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "chat_template.jinja"):
        if (source / name).exists():
            shutil.copy(source / name, baseline / name)
    return model, baseline, grid


@pytest.fixture(scope="module")
def fp32_graph(grid_llama, tmp_path_factory):
    _, baseline, _ = grid_llama
    output = tmp_path_factory.mktemp("builder") / "genai"
    path, _ = genai_build(baseline, output, OnnxRecipe(quantize=False, exporter="genai-builder"), cuda=False)
    shutil.copy(baseline / "config.json", output / "config.json")
    return path


def logits(model_dir, ids: torch.Tensor) -> np.ndarray:
    from models.decoding import OnnxCausalLM
    from models.runners import session_options

    return np.asarray(OnnxCausalLM(model_dir, session_options, "CPUExecutionProvider")(ids).logits)


def test_graft_carries_every_weight_and_keeps_the_answer(grid_llama, fp32_graph, tmp_path):
    import onnx

    model, _, grid = grid_llama
    grafted = tmp_path / "grafted"
    shutil.copytree(fp32_graph.parent, grafted)
    counts = gguf_graft.graft(grafted / fp32_graph.name, grid, accuracy_level=0)
    layers = model.config.num_hidden_layers
    assert counts == {"MatMulNBits 4-bit": 5 * layers, "MatMulNBits 8-bit": 0, "MatMulNBits 8-bit as two 4-bit halves": 1,
                      "GatherBlockQuantized 8-bit": 1, "re-quantized Q4_1": 0, "kept fp32": 0}
    graph = onnx.load(str(grafted / fp32_graph.name), load_external_data=False).graph
    assert not [node.name for node in graph.node if node.op_type == "MatMul" and "MinMatMul" not in node.name]
    assert sum(node.name.endswith("_proj/ReduceSum") for node in graph.node) == 4 * layers  # qkv, o, gate = up, down
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 1012, 102]])
    with torch.inference_mode():
        expected = model(ids).logits.numpy()
    got = logits(grafted, ids)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=2e-4 * np.abs(expected).max())
    assert (got.argmax(-1) == expected.argmax(-1)).all()


def test_pruned_rows_and_blocks_keep_the_gguf_codes_and_moved_weights_are_requantized(grid_llama):
    """A pruned model's weights: gate rows removed and down_proj's 32-wide input blocks removed still
    carry the GGUF's codes bit for bit; a retrained weight falls back to Q4_1 rounding (lossy, close)."""
    _, _, grid = grid_llama
    gate, down = grid["model.layers.0.mlp.gate_proj.weight"], grid["model.layers.0.mlp.down_proj.weight"]
    kept_rows = np.arange(0, gate.shape[0], 2)
    rows = gguf_grid.matching_rows(gate, gate.dequantize()[kept_rows])
    assert rows is not None and np.array_equal(rows.codes, gate.codes[kept_rows])
    assert down.shape[1] >= 2 * gguf_grid.BLOCK
    last_block = down.dequantize()[:, -gguf_grid.BLOCK:]
    blocks = gguf_grid.matching_rows(down, last_block)
    assert blocks is not None and np.array_equal(blocks.dequantize().view(np.uint32), last_block.view(np.uint32))
    retrained = gate.dequantize() + np.float32(1e-3)
    assert gguf_grid.matching_rows(gate, retrained) is None
    rounded = gguf_grid.quantize_q4_1("retrained", retrained)
    step = np.repeat(rounded.scales, gguf_grid.BLOCK, axis=1)
    assert np.all(np.abs(rounded.dequantize() - retrained) <= step / 2 + 1e-6)


def test_weights_off_the_grid_go_through_the_given_requantizer(grid_llama, fp32_graph, tmp_path):
    """The rounding of moved weights is pluggable (experiments/gguf-requantize: GPTQ): every weight the
    grid does not reproduce is handed to it once, with its transformers names, and what it returns ships."""
    grafted = tmp_path / "grafted"
    shutil.copytree(fp32_graph.parent, grafted)
    handed = []

    def requantize(names, fp32):
        handed.append(names)
        return gguf_grid.quantize_q4_1("+".join(names), fp32)

    counts = gguf_graft.graft(grafted / fp32_graph.name, {}, accuracy_level=0, requantize=requantize)
    assert handed and counts["re-quantized Q4_1"] == len(handed) == len(set(handed))
    assert ("model.layers.0.mlp.down_proj.weight",) in handed


def test_a_decoder_from_a_gguf_starts_its_ladder_with_the_gguf_recipe(generation_preset):
    """Generation variants that descend from a GGUF try `gguf-q4-int8-folded` first (int8 compute, 8-bit minimums
    folded into each weight, lossy), then `gguf-q4-int8-m8` (the minimums as their own term), then `gguf-q4-int8`, then `gguf-q4` (fp32 compute), then the INT8 ladder; other decoders keep the INT8 ladder; `--recipe gguf-q4` on a non-GGUF source is refused."""
    from models.catalog import default_preset
    from optimize.quantize.recipes import recipe_ladder

    assert named_recipe("generation", "gguf-q4") == OnnxRecipe(exporter="gguf-grid", weight_only_bits=4, block_size=32,
                                                                quantize=False)  # fp32 compute
    assert named_recipe("generation", "gguf-q4-int8").quantize  # int8 compute (accuracy level 4)
    assert named_recipe("generation", "gguf-q4-int8-m8").minimum_bits == 8  # and its minimum term read as 8-bit
    assert named_recipe("generation", "gguf-q4-int8-folded") == replace(named_recipe("generation", "gguf-q4-int8-m8"),
                                                                         fold_minimums=True)
    assert recipe_ladder("generation", from_gguf=True) == [
        named_recipe("generation", "gguf-q4-int8-folded"), named_recipe("generation", "gguf-q4-int8-m8"), named_recipe("generation", "gguf-q4-int8"),
        named_recipe("generation", "gguf-q4"), *recipe_ladder("generation")]
    assert recipe_ladder("generation")[:2] == [replace(default_recipe("generation"), fp32_attention_share=0.0),
                                               default_recipe("generation")]  # INT8 attention everywhere, then a third fp32
    assert default_recipe("generation").exporter == "genai-builder"
    smollm2 = default_preset("generation")
    assert gguf_graft.gguf_file(smollm2, "optimized") == gguf_graft.gguf_file(smollm2, "pruned-optimized")  # via pruned
    with pytest.raises(VariantUnavailable, match="GGUF"):
        gguf_graft.gguf_file(generation_preset, "optimized")


def test_builder_names_map_to_transformers_weights():
    assert gguf_graft.hf_weights("/model/layers.4/attn/qkv_proj/MatMul") == tuple(
        f"model.layers.4.self_attn.{p}_proj.weight" for p in "qkv")
    assert gguf_graft.hf_weights("/model/layers.12/mlp/down_proj/MatMul") == ("model.layers.12.mlp.down_proj.weight",)
    assert gguf_graft.hf_weights("/model/layers.0/attn/o_proj/MatMul") == ("model.layers.0.self_attn.o_proj.weight",)
    assert gguf_graft.hf_weights("/lm_head/MatMul") == ("lm_head.weight",)
    assert gguf_graft.hf_weights("/model/layers.0/attn/GroupQueryAttention") is None


def test_int8_compute_graph_runs_close(grid_llama, fp32_graph, tmp_path):
    """Accuracy level 4 (`gguf-q4-int8`): same weights, activations rounded to int8 per block."""
    model, _, grid = grid_llama
    grafted = tmp_path / "int8-compute"
    shutil.copytree(fp32_graph.parent, grafted)
    gguf_graft.graft(grafted / fp32_graph.name, grid, accuracy_level=4)
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 1012, 102]])
    with torch.inference_mode():
        expected = model(ids).logits.numpy()
    np.testing.assert_allclose(logits(grafted, ids), expected, atol=0.05 * np.abs(expected).max())


def test_build_with_the_gguf_recipe(grid_llama, monkeypatch):
    """`build --recipe gguf-q4` end to end on the tiny preset, its GGUF stood in for by the grid."""
    import json

    from optimize.build import build_onnx
    from tests.tiny import tiny_preset

    model, baseline, grid = grid_llama
    monkeypatch.setattr(gguf_graft, "gguf_file", lambda preset, variant: baseline / "tiny.gguf")
    monkeypatch.setattr(gguf_grid, "read_grid", lambda path: grid)
    preset = tiny_preset("generation", baseline, name="tiny-gguf-grid")
    target = build_onnx(preset, "optimized", recipe=named_recipe("generation", "gguf-q4"), evaluate=False)
    steps = json.loads((target / "manifest.json").read_text())["steps"]
    assert any("tiny.gguf as they are, bit-exact" in step and "accuracy level 0" in step for step in steps)
    ids = torch.tensor([[101, 2023, 2003, 102]])
    with torch.inference_mode():
        expected = model(ids).logits.numpy()
    np.testing.assert_allclose(logits(target, ids), expected, atol=2e-4 * np.abs(expected).max())
