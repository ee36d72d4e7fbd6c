"""A GGUF checkpoint's own quantization grid, laid out for ONNX Runtime's MatMulNBits.

Why: the baseline SmolLM2 is dequantized from a Q4_1 GGUF, so its weights already sit on a 4-bit
grid. Re-quantizing that fp32 copy (the default recipe) loses precision a second time; carrying the
GGUF's codes, scales and minimums over as they are loses nothing. Q4_1 (blocks of 32 along the
input dimension: w = d·q + m, q in 0..15) becomes 4-bit MatMulNBits with zero point 0, so that the
kernel computes x·(d·q), plus the minimum term (the activations' 32-wide block sums times m, K/32
columns); Q8_0 (w = d·q, q in −128..127) becomes 8-bit MatMulNBits with zero point 128. Both are
exact: `dequantize` of the initializers gives transformers' fp32 weights bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

BLOCK = 32  # Q4_1 and Q8_0 blocks: 32 weights along the input dimension
# llama.cpp's tensor names (blk.N.<name>.weight) → transformers' (model.layers.N.<name>.weight)
LLAMA_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
               "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
               "ffn_down": "mlp.down_proj"}


@dataclass(frozen=True)
class GridWeight:
    """One linear weight [N out, K in] on its GGUF grid: w[n, k] = scales[n, k // 32] · (codes[n, k] −
    zero_point) + minimums[n, k // 32] (no minimum for Q8_0)."""

    name: str  # transformers' parameter name
    bits: int  # 4 (Q4_1) or 8 (Q8_0)
    codes: np.ndarray  # uint8 [N, K]
    scales: np.ndarray  # float32 [N, K / 32] (fp16 in the file: exact in fp32)
    minimums: np.ndarray | None  # float32 [N, K / 32], Q4_1 only
    zero_point: int  # 0 for Q4_1 (the minimum is a separate term), 128 for Q8_0 (signed codes)

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape

    def dequantize(self) -> np.ndarray:
        """fp32 [N, K] in gguf's own arithmetic order ((d·q) + m, fp32), hence bit for bit its result."""
        blocks = self.codes.reshape(self.shape[0], -1, BLOCK).astype(np.float32) - np.float32(self.zero_point)
        weight = self.scales[..., None] * blocks
        if self.minimums is not None:
            weight = weight + self.minimums[..., None]
        return weight.reshape(self.shape)

    def rows(self, order: np.ndarray) -> GridWeight:
        """The same weight with its output rows reordered (Q/K un-permutation, fused projections)."""
        return GridWeight(self.name, self.bits, self.codes[order], self.scales[order],
                          None if self.minimums is None else self.minimums[order], self.zero_point)


@dataclass(frozen=True)
class NBitsInitializers:
    """MatMulNBits' inputs for one weight, plus the minimum term's [K / 32, N] matrix (Q4_1)."""

    packed: np.ndarray  # B: uint8 [N, K / 32, 32 · bits / 8]
    scales: np.ndarray  # float32 [N, K / 32]
    zero_points: np.ndarray  # uint8: 4 bits [N, ceil(K / 64)] two per byte; 8 bits [N, K / 32]
    minimums_t: np.ndarray | None  # float32 [K / 32, N]
    bits: int
    K: int
    N: int


def read_grid(gguf_path: Path) -> dict[str, GridWeight]:
    """Every Q4_1 / Q8_0 tensor of a llama-architecture GGUF, under transformers' names and in its row
    order: llama.cpp's converter permutes Q and K rows for its rotary layout and transformers' loader
    un-permutes them, so the same permutation is undone here. A tied embedding also serves as lm_head."""
    from gguf import GGMLQuantizationType, GGUFReader

    reader = GGUFReader(gguf_path)
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise NotImplementedError(f"GGUF grid recipe: architecture '{arch}' has no name map (llama only).")
    heads = int(reader.fields["llama.attention.head_count"].contents())
    kv_heads = int(reader.fields["llama.attention.head_count_kv"].contents())
    grid = {}
    for tensor in reader.tensors:
        if tensor.tensor_type not in (GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q8_0):
            continue
        name = hf_name(tensor.name)
        weight = grid_weight(name, tensor.tensor_type.name, np.asarray(tensor.data), int(tensor.shape[0]))
        if ".q_proj." in name or ".k_proj." in name:
            weight = weight.rows(unpermute_order(weight.shape[0], heads if ".q_proj." in name else kv_heads))
        grid[name] = weight
    if "lm_head.weight" not in grid and "model.embed_tokens.weight" in grid:
        grid["lm_head.weight"] = grid["model.embed_tokens.weight"]
    return grid


def hf_name(gguf_name: str) -> str:
    """blk.3.attn_q.weight → model.layers.3.self_attn.q_proj.weight (llama)."""
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    _, layer, part, suffix = gguf_name.split(".")
    return f"model.layers.{layer}.{LLAMA_NAMES[part]}.{suffix}"


def unpermute_order(rows: int, heads: int) -> np.ndarray:
    """HF row i is GGUF row order[i]: the inverse of llama.cpp's per-head rotary interleave, written as
    transformers' `_reverse_permute_weights` writes it (reshape heads, dim, 2 → swap → flatten)."""
    return np.arange(rows).reshape(heads, rows // heads // 2, 2).swapaxes(1, 2).reshape(rows)


def grid_weight(name: str, kind: str, data: np.ndarray, K: int) -> GridWeight:
    """One weight from its GGUF bytes (uint8 [N, bytes per row]); `kind` "Q4_1" or "Q8_0"."""
    return {"Q4_1": _q4_1, "Q8_0": _q8_0}[kind](name, data, K)


def _q4_1(name: str, data: np.ndarray, K: int) -> GridWeight:
    """Q4_1 block (20 bytes): fp16 d, fp16 m, 16 bytes; byte j holds weight j (low nibble) and j + 16 (high)."""
    blocks = data.reshape(data.shape[0], K // BLOCK, 20)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    nibbles = blocks[..., 4:]
    codes = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).reshape(data.shape[0], K)
    return GridWeight(name, 4, codes, d, m, zero_point=0)


def _q8_0(name: str, data: np.ndarray, K: int) -> GridWeight:
    """Q8_0 block (34 bytes): fp16 d, then 32 int8 codes; stored here as uint8 code + 128."""
    blocks = data.reshape(data.shape[0], K // BLOCK, 34)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    codes = (blocks[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8).reshape(data.shape[0], K)
    return GridWeight(name, 8, codes, d, None, zero_point=128)


def concat_rows(weights: list[GridWeight], name: str) -> GridWeight:
    """Projections fused along N (q, k, v → qkv): blocks run along K, so rows stack as they are."""
    if len({(w.bits, w.zero_point, w.minimums is None) for w in weights}) != 1:
        raise ValueError(f"{name}: cannot fuse weights of different GGUF types")
    minimums = None if weights[0].minimums is None else np.concatenate([w.minimums for w in weights])
    return GridWeight(name, weights[0].bits, np.concatenate([w.codes for w in weights]),
                      np.concatenate([w.scales for w in weights]), minimums, weights[0].zero_point)


def split_q8_0(weight: GridWeight) -> tuple[GridWeight, GridWeight]:
    """A Q8_0 weight as two 4-bit grids whose sum is it, bit for bit: q = 16·hi + lo with lo in 0..15
    and hi in −8..7, so d·q = d·lo + 16d·(hi + 8 − 8); each product and the sum are exact in fp32
    (d is an fp16 and q has 8 bits). Why: ONNX Runtime's 8-bit MatMulNBits has no fast fp32-compute
    kernel (SmolLM2's LM head alone took longer than a whole decode step should); two 4-bit ones read
    the same bytes on the fast path."""
    signed = weight.codes.astype(np.int16) - weight.zero_point
    low = (signed & 0x0F).astype(np.uint8)
    high = ((signed >> 4) + 8).astype(np.uint8)
    return (GridWeight(f"{weight.name}/low", 4, low, weight.scales, None, zero_point=0),
            GridWeight(f"{weight.name}/high", 4, high, weight.scales * np.float32(16), None, zero_point=8))


def quantize_q4_1(name: str, weight: np.ndarray) -> GridWeight:
    """llama.cpp's Q4_1 rounding of an fp32 weight [N, K] (per block of 32 along K: m = min,
    d = (max − min) / 15, q = round((w − m) / d)): for weights that recovery training moved off the
    GGUF's grid. Lossy, unlike the GGUF's own codes; the build's gates measure what it costs."""
    N, K = weight.shape
    blocks = np.asarray(weight, dtype=np.float32).reshape(N, K // BLOCK, BLOCK)
    low, high = blocks.min(-1), blocks.max(-1)
    d = (high - low) / np.float32(15)
    inverse = np.divide(1, d, out=np.zeros_like(d), where=d > 0)
    codes = np.clip(np.rint((blocks - low[..., None]) * inverse[..., None]), 0, 15).astype(np.uint8)
    return GridWeight(name, 4, codes.reshape(N, K), d.astype(np.float32), low.astype(np.float32), zero_point=0)


def matching_rows(weight: GridWeight, fp32: np.ndarray) -> GridWeight | None:
    """`weight` (or a cut of it) reproducing `fp32` bit for bit: as it is, or when `fp32` is `weight` with output rows
    removed (pruned gate / up neurons) or with whole 32-wide input blocks removed (FFN neurons
    pruned in aligned groups of 32, in down_proj); None when anything was retrained or cut across
    a block."""
    dequantized = weight.dequantize()
    fp32 = np.ascontiguousarray(fp32, dtype=np.float32)
    if weight.shape == fp32.shape and np.array_equal(dequantized.view(np.uint32), fp32.view(np.uint32)):
        return weight  # unchanged
    if weight.shape[1] == fp32.shape[1]:
        lookup = {row.tobytes(): index for index, row in enumerate(dequantized)}
        order = [lookup.get(row.tobytes()) for row in fp32]
        return None if None in order else weight.rows(np.array(order))
    if weight.shape[0] != fp32.shape[0] or fp32.shape[1] % BLOCK:
        return None
    def blocks(matrix: np.ndarray) -> list[bytes]:
        return [np.ascontiguousarray(matrix[:, i:i + BLOCK]).tobytes() for i in range(0, matrix.shape[1], BLOCK)]
    lookup = {block: index for index, block in enumerate(blocks(dequantized))}
    kept = [lookup.get(block) for block in blocks(fp32)]
    if None in kept:
        return None
    columns = (np.array(kept)[:, None] * BLOCK + np.arange(BLOCK)).reshape(-1)
    return GridWeight(weight.name, weight.bits, np.ascontiguousarray(weight.codes[:, columns]), weight.scales[:, kept],
                      None if weight.minimums is None else weight.minimums[:, kept], weight.zero_point)


def pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """4-bit codes along the last axis, two per byte: code 2i in the low nibble of byte i, 2i + 1 in the high one."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def to_matmul_nbits(weight: GridWeight) -> NBitsInitializers:
    """MatMulNBits' layout: within a block, weight 2i in the low nibble of byte i and 2i + 1 in the high one."""
    N, K = weight.shape
    blocks = weight.codes.reshape(N, K // BLOCK, BLOCK)
    if weight.bits == 4:
        packed = pack_nibbles(blocks)
        zero_points = np.full((N, (K // BLOCK + 1) // 2), weight.zero_point * 0x11, dtype=np.uint8)
    else:
        packed = blocks.astype(np.uint8)
        zero_points = np.full((N, K // BLOCK), weight.zero_point, dtype=np.uint8)
    minimums_t = None if weight.minimums is None else np.ascontiguousarray(weight.minimums.T)
    return NBitsInitializers(np.ascontiguousarray(packed), weight.scales.copy(), zero_points, minimums_t,
                             weight.bits, K, N)


def dequantize(init: NBitsInitializers) -> np.ndarray:
    """fp32 [N, K] from the packed initializers alone (what the graph carries): d·(q − zp) (+ m)."""
    blocks = init.K // BLOCK
    if init.bits == 4:
        codes = np.stack([init.packed & 0x0F, init.packed >> 4], axis=-1).reshape(init.N, blocks, BLOCK)
        zp = np.stack([init.zero_points & 0x0F, init.zero_points >> 4], axis=-1).reshape(init.N, -1)[:, :blocks]
    else:
        codes, zp = init.packed, init.zero_points
    weight = init.scales[..., None] * (codes.astype(np.float32) - zp[..., None].astype(np.float32))
    if init.minimums_t is not None:
        weight = weight + init.minimums_t.T[..., None]
    return weight.reshape(init.N, init.K)


MINIMUM_BLOCK = 16  # the 8-bit minimum term's blocks along K / 32 (18 and 48 block sums for SmolLM2)


def minimums_8bit(minimums_t: np.ndarray, block: int = MINIMUM_BLOCK) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The minimum term's [K / 32, N] matrix as 8-bit MatMulNBits initializers (codes [N, blocks, block],
    scales [N, blocks], uint8 zero points [N, blocks]), asymmetric per block (zero-padded): each minimum
    within half a step of its block's range / 255 (lossy; the int8-compute rung is lossy already)."""
    minimums = minimums_t.T.astype(np.float32)
    N, K = minimums.shape
    blocks = -(-K // block)
    padded = np.zeros((N, blocks * block), np.float32)
    padded[:, :K] = minimums
    padded = padded.reshape(N, blocks, block)
    low, high = np.minimum(padded.min(-1), 0), np.maximum(padded.max(-1), 0)
    scales = ((high - low) / 255).astype(np.float32)
    scales[scales == 0] = 1
    zero_points = np.clip(np.round(-low / scales), 0, 255).astype(np.uint8)
    codes = np.clip(np.round(padded / scales[..., None]) + zero_points[..., None], 0, 255).astype(np.uint8)
    return codes, scales, zero_points


def folded_minimums(init: NBitsInitializers) -> NBitsInitializers:
    """A Q4_1 weight and its minimum term as one 4-bit MatMulNBits over [x, s, s], s being x's K / 32
    block sums zero-padded to a multiple of 32 (`folded_input_nodes`). Each minimum m moves d·z into the
    block's own zero point (z = round(−m/d) in 0..15: d·(q − z) + (m + d·z) = d·q + m), and the residual
    r = m + d·z (|r| ≤ d/2, an eleventh to a seventeenth of the 8-bit error of m itself on SmolLM2) becomes
    8-bit codes per block of 32 (`minimums_8bit`), carried as two 4-bit blocks: hi (scale 16σ, zero point
    Z >> 4) and lo (σ, Z & 15), whose sum is σ(16·hi + lo − Z). Why: the minimum term as its own
    MatMulNBits + Add cost a quarter of a decoding step for a twentieth of its bytes
    (experiments/gguf-int8-folded); folded, a weight is one kernel call reading ≤ 3 % more bytes."""
    N = init.N
    minimums = init.minimums_t.T
    steps = np.where(init.scales > 0, init.scales, 1)
    zero = np.where(init.scales > 0, np.clip(np.rint(-minimums / steps), 0, 15), 0).astype(np.uint8)
    residual = (minimums + init.scales * zero).astype(np.float32)
    codes, sigma, zero_points = minimums_8bit(residual.T, block=BLOCK)
    packed = np.concatenate([init.packed, pack_nibbles(codes >> 4), pack_nibbles(codes & 0x0F)], axis=1)
    scales = np.concatenate([init.scales, sigma * np.float32(16), sigma], axis=1)
    nibbles = np.concatenate([zero, zero_points >> 4, zero_points & 0x0F], axis=1)
    if nibbles.shape[1] % 2:
        nibbles = np.concatenate([nibbles, np.zeros((N, 1), np.uint8)], axis=1)
    return NBitsInitializers(np.ascontiguousarray(packed), np.ascontiguousarray(scales), pack_nibbles(nibbles), None, 4,
                             init.K + 2 * codes.shape[1] * BLOCK, N)


def block_sums_nodes(x: str, K: int, prefix: str, rank: int = 3) -> tuple[list, list, str]:
    """x's sums per block of 32 along its last axis (Reshape + ReduceSum, the leading dims kept): the
    nodes, initializers and f"{prefix}/block_sums"."""
    from onnx import helper, numpy_helper

    names = {key: f"{prefix}/{key}" for key in ("shape", "axes", "blocks", "block_sums")}
    initializers = [numpy_helper.from_array(np.array([0] * (rank - 1) + [K // BLOCK, BLOCK], np.int64), names["shape"]),
                    numpy_helper.from_array(np.array([-1], np.int64), names["axes"])]
    nodes = [helper.make_node("Reshape", [x, names["shape"]], [names["blocks"]], name=f"{prefix}/Reshape"),
             helper.make_node("ReduceSum", [names["blocks"], names["axes"]], [names["block_sums"]],
                              name=f"{prefix}/ReduceSum", keepdims=0)]
    return nodes, initializers, names["block_sums"]


def folded_input_nodes(x: str, K: int, prefix: str, rank: int = 3) -> tuple[list, list, str]:
    """[x, s, s] for `folded_minimums`: x's block sums, zero-padded to a multiple of 32 and appended twice.
    Returns the nodes, initializers and the folded input's name."""
    from onnx import helper, numpy_helper

    sums = K // BLOCK
    nodes, initializers, block_sums = block_sums_nodes(x, K, prefix, rank)
    names = {key: f"{prefix}/{key}" for key in ("pads", "padded_sums", "folded_input")}
    initializers.append(numpy_helper.from_array(np.array([0] * (2 * rank - 1) + [-(-sums // BLOCK) * BLOCK - sums], np.int64),
                                                names["pads"]))
    nodes += [helper.make_node("Pad", [block_sums, names["pads"]], [names["padded_sums"]], name=f"{prefix}/Pad"),
              helper.make_node("Concat", [x, names["padded_sums"], names["padded_sums"]], [names["folded_input"]],
                               name=f"{prefix}/Concat", axis=-1)]
    return nodes, initializers, names["folded_input"]


def matmul_nbits_nodes(init: NBitsInitializers, x: str, y: str, prefix: str, accuracy_level: int = 0,
                       rank: int = 3, min_term: bool = True, block_sums: str | None = None,
                       minimum_bits: int = 32, fold_minimums: bool = False) -> tuple[list, list]:
    """ONNX nodes and initializers computing y = x @ W.T: MatMulNBits on d·(q − zp), then for Q4_1
    + ReduceSum(x in blocks of 32) @ minimums_t. `rank` is x's rank (the block reshape keeps its
    leading dims). `block_sums`: the name of x's block sums already computed for another weight
    with the same input (gate and up); otherwise they are computed here as f"{prefix}/block_sums".
    `min_term=False` leaves the minimum out (the benchmark's float-zero-point form folds it into
    the zero points instead). `minimum_bits=8` reads the minimums as 8-bit (`minimums_8bit`): the
    fp32 minimums were a sixth of the bytes a decoding step reads (experiments/gguf-int8-m8).
    `fold_minimums`: one MatMulNBits over [x, s, s] (`folded_minimums`); `block_sums` then names that
    folded input when another weight made it, otherwise it is made here as f"{prefix}/folded_input"."""
    from onnx import helper, numpy_helper

    if fold_minimums and min_term and init.minimums_t is not None:
        folded, nodes, initializers = folded_minimums(init), [], []
        if block_sums is None:
            nodes, initializers, block_sums = folded_input_nodes(x, init.K, prefix, rank)
        names = [f"{prefix}/{key}" for key in ("B", "scales", "zero_points")]
        initializers += [numpy_helper.from_array(folded.packed, names[0]), numpy_helper.from_array(folded.scales, names[1]),
                         numpy_helper.from_array(folded.zero_points, names[2])]
        nodes.append(helper.make_node("MatMulNBits", [block_sums, *names], [y], name=f"{prefix}/MatMulNBits",
                                      domain="com.microsoft", K=folded.K, N=folded.N, bits=4, block_size=BLOCK,
                                      accuracy_level=accuracy_level))
        return nodes, initializers
    names = {key: f"{prefix}/{key}" for key in ("B", "scales", "zero_points", "minimums_t")}
    initializers = [numpy_helper.from_array(init.packed, names["B"]), numpy_helper.from_array(init.scales, names["scales"]),
                    numpy_helper.from_array(init.zero_points, names["zero_points"])]
    with_min = min_term and init.minimums_t is not None
    product = f"{prefix}/product" if with_min else y
    nodes = [helper.make_node("MatMulNBits", [x, names["B"], names["scales"], names["zero_points"]], [product],
                              name=f"{prefix}/MatMulNBits", domain="com.microsoft", K=init.K, N=init.N,
                              bits=init.bits, block_size=BLOCK, accuracy_level=accuracy_level)]
    if with_min:
        if block_sums is None:
            sums_nodes, sums_initializers, block_sums = block_sums_nodes(x, init.K, prefix, rank)
            nodes += sums_nodes
            initializers += sums_initializers
        if minimum_bits == 32:
            initializers.append(numpy_helper.from_array(init.minimums_t, names["minimums_t"]))
            nodes.append(helper.make_node("MatMul", [block_sums, names["minimums_t"]], [f"{prefix}/min_term"],
                                          name=f"{prefix}/MinMatMul"))
        else:
            codes, scales, zero_points = minimums_8bit(init.minimums_t)
            minimum = {key: f"{prefix}/minimums_{key}" for key in ("B", "scales", "zero_points")}
            initializers += [numpy_helper.from_array(codes, minimum["B"]), numpy_helper.from_array(scales, minimum["scales"]),
                             numpy_helper.from_array(zero_points, minimum["zero_points"])]
            nodes.append(helper.make_node("MatMulNBits", [block_sums, minimum["B"], minimum["scales"], minimum["zero_points"]],
                                          [f"{prefix}/min_term"], name=f"{prefix}/MinMatMulNBits", domain="com.microsoft",
                                          K=init.minimums_t.shape[0], N=init.N, bits=8, block_size=MINIMUM_BLOCK,
                                          accuracy_level=accuracy_level))
        nodes.append(helper.make_node("Add", [product, f"{prefix}/min_term"], [y], name=f"{prefix}/Add"))
    return nodes, initializers
