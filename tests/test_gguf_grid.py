"""The GGUF grid recipe is exact: the MatMulNBits initializers built from the SmolLM2 GGUF's own codes,
scales and minimums dequantize to the baseline's fp32 weights bit for bit, and a graph built from
them computes x @ W.T to fp32 rounding. Real GGUF, no model build (~15 s: one transformers load)."""
from __future__ import annotations

import numpy as np
import pytest

from models.errors import VariantUnavailable
from optimize.export import gguf_grid


@pytest.fixture(scope="module")
def gguf_path():
    from models.sources import smollm2_gguf

    try:
        return smollm2_gguf()
    except VariantUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def grid(gguf_path) -> dict[str, gguf_grid.GridWeight]:
    return gguf_grid.read_grid(gguf_path)


@pytest.fixture(scope="module")
def baseline_weights(gguf_path) -> dict[str, np.ndarray]:
    """What the baseline is: transformers' own GGUF loader, dequantized to fp32."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    return {name: tensor.numpy() for name, tensor in model.state_dict().items()}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype == np.float32 and a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_codes_dequantize_as_gguf_does(gguf_path, grid):
    """Nibble order and block layout, against gguf's own dequantize (tensors llama.cpp did not permute;
    the Q8_0 embedding is checked against transformers, which dequantizes with gguf, below)."""
    from gguf import GGUFReader, dequantize

    tensors = {t.name: t for t in GGUFReader(gguf_path).tensors}
    for name in ("blk.0.ffn_down.weight", "blk.7.attn_v.weight", "blk.29.attn_output.weight", "blk.12.ffn_gate.weight"):
        expected = dequantize(tensors[name].data, tensors[name].tensor_type)
        assert same_bits(grid[gguf_grid.hf_name(name)].dequantize(), expected), name


def test_initializers_are_the_baseline_weights_bit_for_bit(grid, baseline_weights):
    """Every quantized weight (Q4_1 projections with Q and K un-permuted, the Q8_0 embedding and
    the tied LM head), dequantized from the packed MatMulNBits initializers alone."""
    assert len(grid) == 30 * 7 + 2
    for name, weight in grid.items():
        initializers = gguf_grid.to_matmul_nbits(weight)
        assert initializers.bits == (8 if name in ("model.embed_tokens.weight", "lm_head.weight") else 4)
        assert same_bits(gguf_grid.dequantize(initializers), baseline_weights[name]), name


def test_the_q8_0_lm_head_as_two_4_bit_halves_is_the_baseline_weight_bit_for_bit(grid, baseline_weights):
    """The recipe carries the Q8_0 LM head as low + high 4-bit grids (the fast fp32-compute kernel)."""
    low, high = gguf_grid.split_q8_0(grid["lm_head.weight"])
    assert low.bits == high.bits == 4 and low.codes.max() <= 15 and high.codes.max() <= 15
    halves = gguf_grid.dequantize(gguf_grid.to_matmul_nbits(low)) + gguf_grid.dequantize(gguf_grid.to_matmul_nbits(high))
    assert same_bits(halves, baseline_weights["lm_head.weight"])


def run_graph(initializers: gguf_grid.NBitsInitializers, x: np.ndarray, accuracy_level: int = 0,
              minimum_bits: int = 32, fold_minimums: bool = False) -> np.ndarray:
    import onnxruntime
    from onnx import TensorProto, helper

    nodes, tensors = gguf_grid.matmul_nbits_nodes(initializers, "x", "y", "w", accuracy_level, rank=x.ndim,
                                                  minimum_bits=minimum_bits, fold_minimums=fold_minimums)
    graph = helper.make_graph(nodes, "one-weight", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("name", ["model.layers.3.mlp.down_proj.weight", "model.layers.5.self_attn.k_proj.weight",
                                  "lm_head.weight"])
def test_matmul_nbits_graph_computes_the_fp32_product(grid, baseline_weights, name):
    """Accuracy level 0 (fp32 compute) on [batch, sequence, K] activations: within fp32 rounding of
    x @ W.T — bounded by 2e-5 · (|x| @ |W|.T), far below any re-quantization error (~1e-2 relative)."""
    weight = baseline_weights[name]
    x = np.random.default_rng(0).standard_normal((1, 5, weight.shape[1])).astype(np.float32)
    y = run_graph(gguf_grid.to_matmul_nbits(grid[name]), x)
    exact = x.astype(np.float64) @ weight.T.astype(np.float64)
    bound = 2e-5 * (np.abs(x).astype(np.float64) @ np.abs(weight.T).astype(np.float64))
    assert y.shape == exact.shape
    assert np.all(np.abs(y - exact) <= bound), float(np.max(np.abs(y - exact) / bound))


@pytest.mark.parametrize("name", ["model.layers.3.mlp.down_proj.weight", "model.layers.5.self_attn.q_proj.weight"])
def test_an_8_bit_minimum_term_stays_within_its_rounding_of_the_exact_product(grid, baseline_weights, name):
    """The `gguf-q4-int8-m8` form at fp32 compute: only the minimums move, each by at most half its block's
    8-bit step, so the product moves by at most that times the block sums (|x| summed per block of 32)."""
    weight = baseline_weights[name]
    initializers = gguf_grid.to_matmul_nbits(grid[name])
    assert initializers.minimums_t is not None  # a Q4_1 weight: the term exists
    codes, scales, zero_points = gguf_grid.minimums_8bit(initializers.minimums_t)
    restored = ((codes.astype(np.float32) - zero_points[..., None]) * scales[..., None]).reshape(codes.shape[0], -1)
    step = np.repeat(scales, gguf_grid.MINIMUM_BLOCK, axis=1)[:, : initializers.minimums_t.shape[0]]
    assert np.all(np.abs(restored[:, : initializers.minimums_t.shape[0]] - initializers.minimums_t.T) <= 0.5001 * step)
    x = np.random.default_rng(1).standard_normal((1, 3, weight.shape[1])).astype(np.float32)
    y = run_graph(initializers, x, minimum_bits=8)
    exact = x.astype(np.float64) @ weight.T.astype(np.float64)
    block_sums = np.abs(x).reshape(1, 3, -1, gguf_grid.BLOCK).sum(-1).astype(np.float64)
    bound = 0.5001 * block_sums @ step.T.astype(np.float64) + 2e-5 * (np.abs(x).astype(np.float64) @ np.abs(weight.T).astype(np.float64))
    assert np.all(np.abs(y - exact) <= bound), float(np.max(np.abs(y - exact) / bound))
    assert not np.allclose(y, run_graph(initializers, x))  # it is a different (lossy) form, not the fp32 one


@pytest.mark.parametrize("name", ["model.layers.3.mlp.down_proj.weight", "model.layers.5.self_attn.q_proj.weight"])
def test_minimums_folded_into_the_weight_are_one_matmul_within_their_8_bit_rounding(grid, baseline_weights, name):
    """The `gguf-q4-int8-folded` form: one MatMulNBits over [x, s, s]. Each weight it carries (its block's
    codes with the zero point that takes most of the minimum, plus the hi and lo blocks of the residual) is
    the GGUF's within half a step of the residual's 8-bit rounding, a tenth of a Q4_1 step or less; at fp32
    compute the product moves by at most that times the block sums; it reads ≤ 3 % more bytes than the
    8-bit minimum term it replaces."""
    weight = baseline_weights[name]
    initializers = gguf_grid.to_matmul_nbits(grid[name])
    folded = gguf_grid.folded_minimums(initializers)
    K, sums = initializers.K, initializers.K // gguf_grid.BLOCK
    restored = gguf_grid.dequantize(folded)  # [N, K + 2 × padded sums]: the weight, then hi and lo per block sum
    appended = restored[:, K:].reshape(folded.N, 2, -1)
    carried = restored[:, :K] + np.repeat((appended[:, 0] + appended[:, 1])[:, :sums], gguf_grid.BLOCK, axis=1)
    padded = folded.scales.shape[1] - sums
    step = np.repeat(folded.scales[:, sums + padded // 2:][:, np.arange(sums) // gguf_grid.BLOCK], gguf_grid.BLOCK, axis=1)
    assert np.all(np.abs(carried - weight) <= 0.5001 * step + 1e-6 * np.abs(weight).max())
    assert np.all(step <= 0.1 * np.repeat(initializers.scales, gguf_grid.BLOCK, axis=1) + 1e-12)
    nbytes = lambda init: init.packed.nbytes + init.scales.nbytes + init.zero_points.nbytes  # noqa: E731
    assert nbytes(folded) <= 1.03 * (nbytes(initializers) + sum(a.nbytes for a in gguf_grid.minimums_8bit(initializers.minimums_t)))
    nodes, _ = gguf_grid.matmul_nbits_nodes(initializers, "x", "y", "w", 4, fold_minimums=True)
    assert [n.op_type for n in nodes] == ["Reshape", "ReduceSum", "Pad", "Concat", "MatMulNBits"]
    x = np.random.default_rng(2).standard_normal((1, 3, weight.shape[1])).astype(np.float32)
    y = run_graph(initializers, x, fold_minimums=True)
    exact = x.astype(np.float64) @ weight.T.astype(np.float64)
    bound = 0.5001 * np.abs(x).astype(np.float64) @ step.T.astype(np.float64) + 2e-5 * (np.abs(x).astype(np.float64) @ np.abs(weight.T).astype(np.float64))
    assert np.all(np.abs(y - exact) <= bound), float(np.max(np.abs(y - exact) / bound))
    assert not np.allclose(y, run_graph(initializers, x))  # lossy, not the exact form
    int8 = run_graph(initializers, x, accuracy_level=4, fold_minimums=True)  # the rung's int8 compute: within its rounding
    assert np.max(np.abs(int8 - exact)) < 0.05 * np.max(np.abs(exact))


def test_unpermute_inverts_llama_cpp_rotary_permute():
    """llama.cpp's convert_hf_to_gguf `permute` (reshape heads, 2, dim/2 → swap) and ours compose to identity."""
    rows, heads = 576, 9
    permuted = np.arange(rows).reshape(heads, 2, rows // heads // 2).swapaxes(1, 2).reshape(rows)
    assert np.array_equal(permuted[gguf_grid.unpermute_order(rows, heads)], np.arange(rows))
