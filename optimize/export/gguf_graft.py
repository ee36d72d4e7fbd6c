"""The `gguf-q4` recipe: the model builder's fp32 graph with every weight put back on its GGUF grid.

Why: re-quantizing a GGUF-born baseline (the default recipe) rounds weights that were already
on a 4-bit grid onto another grid. Here the builder writes its fused fp32 graph (the same
GroupQueryAttention graph as every generation build) and each MatMul's weight is replaced by the
GGUF's own codes (optimize/export/gguf_grid.py): Q4_1 → 4-bit MatMulNBits + minimum term, the Q8_0 LM
head → 8-bit MatMulNBits, the Q8_0 embedding → GatherBlockQuantized. Before a weight is replaced,
its grid is checked to dequantize to the builder's fp32 initializer bit for bit. A model derived
from the GGUF's (pruned, recovered) keeps the GGUF's codes for every weight whose rows are still
the GGUF's; a weight that training moved off the grid is re-quantized to Q4_1 (counted, and the
graph then no longer promises exactness); a weight whose input width is not a multiple of 32 stays
an fp32 MatMul.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from optimize.export.gguf_grid import (
    BLOCK,
    GridWeight,
    concat_rows,
    matching_rows,
    matmul_nbits_nodes,
    quantize_q4_1,
    split_q8_0,
    to_matmul_nbits,
)

# the model builder's MatMul names → the transformers weights they carry, stacked along N
BUILDER_MATMULS = {
    r"/model/layers\.(\d+)/attn/qkv_proj/MatMul": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    r"/model/layers\.(\d+)/attn/(q_proj|k_proj|v_proj|o_proj)/MatMul": None,  # unfused: self_attn.<group 2>
    r"/model/layers\.(\d+)/mlp/(gate_proj|up_proj|down_proj)/MatMul": None,  # mlp.<group 2>
}
EMBEDDING = "model.embed_tokens.weight"


def gguf_file(preset, variant_name: str) -> Path:
    """The GGUF that `variant_name`'s source descends from (a pruned model's baseline's); only such
    variants get the recipe."""
    from models.errors import VariantUnavailable
    from models.sources import package_file

    variant = preset.variant(preset.variant(variant_name).built_from)
    while variant.source.kind == "built" and variant.built_from:
        variant = preset.variant(variant.built_from)
    source = variant.source
    if source.kind != "package" or not source.location.endswith(".gguf"):
        raise VariantUnavailable(f"{preset.name}/{variant_name}: the gguf-q4 recipe needs a variant built from a GGUF "
                                 f"(its source is {source.kind} '{source.location}').")
    return package_file(*source.location.split("/", 1))


def source_gguf(preset, variant_name: str) -> Path | None:
    """`gguf_file`, or None for a variant that does not descend from an installed GGUF."""
    from models.errors import VariantUnavailable

    try:
        return gguf_file(preset, variant_name)
    except VariantUnavailable:
        return None


def hf_weights(node_name: str) -> tuple[str, ...] | None:
    """transformers weight names behind one of the builder's MatMuls (None: not a grid weight)."""
    if node_name == "/lm_head/MatMul":
        return ("lm_head.weight",)
    for pattern, parts in BUILDER_MATMULS.items():
        match = re.fullmatch(pattern, node_name)
        if match:
            layer = match.group(1)
            parent = "mlp" if "/mlp/" in node_name else "self_attn"
            parts = parts or (f"{parent}.{match.group(2)}",)
            return tuple(f"model.layers.{layer}.{part}.weight" for part in parts)
    return None


def graft(model_path: Path, grid: dict[str, GridWeight], accuracy_level: int = 4,
          requantize: Callable[[tuple[str, ...], np.ndarray], GridWeight] | None = None,
          minimum_bits: int = 32, fold_minimums: bool = False) -> dict[str, int]:
    """Rewrite the builder's fp32 graph at `model_path` in place; returns how many weights of each
    kind were grafted ("re-quantized Q4_1" and "kept fp32" count those not on the GGUF's grid).
    `requantize(names, fp32)` puts a weight that is off the grid on a Q4_1 grid (default: llama.cpp's
    round-to-nearest; experiments/gguf-requantize/gptq.py: GPTQ). `minimum_bits`: the Q4_1 minimum
    term as fp32 (32, exact) or 8-bit (8, lossy: optimize/export/gguf_grid.py, minimums_8bit);
    `fold_minimums`: 8-bit and folded into each weight's one MatMulNBits (gguf_grid.folded_minimums)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(model_path))  # with its external data: the weights are rewritten
    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    counts = {"MatMulNBits 4-bit": 0, "MatMulNBits 8-bit": 0, "MatMulNBits 8-bit as two 4-bit halves": 0,
              "GatherBlockQuantized 8-bit": 0, "re-quantized Q4_1": 0, "kept fp32": 0}
    new_nodes, replaced = [], set()
    block_sums: dict[str, str] = {}  # input → its block sums, shared by the MatMuls that read it (gate and up)
    for node in graph.node:
        names = hf_weights(node.name) if node.op_type == "MatMul" else None
        fp32 = numpy_helper.to_array(initializers[node.input[1]]).T if names and node.input[1] in initializers else None
        if fp32 is not None and fp32.shape[1] % BLOCK:
            new_nodes.append(node)
            counts["kept fp32"] += 1
        elif fp32 is not None:
            weight = _on_grid(names, grid, fp32)
            if weight is None:
                weight = requantize(names, fp32) if requantize else quantize_q4_1("+".join(names), fp32)
                counts["re-quantized Q4_1"] += 1
            prefix = node.name.rsplit("/", 1)[0]
            halves = weight.bits == 8 and accuracy_level == 0  # two exact 4-bit halves: the fast fp32-compute kernel
            parts = zip(("low", "high"), split_q8_0(weight)) if halves else [("", weight)]
            for half, part in parts:
                output = f"{prefix}/{half}" if half else node.output[0]
                nodes, tensors = matmul_nbits_nodes(to_matmul_nbits(part), node.input[0], output, output if half else prefix,
                                                    accuracy_level, block_sums=block_sums.get(node.input[0]),
                                                    minimum_bits=minimum_bits, fold_minimums=fold_minimums)
                if part.minimums is not None:  # what a weight with the same input reads
                    block_sums.setdefault(node.input[0], f"{prefix}/{'folded_input' if fold_minimums else 'block_sums'}")
                new_nodes += nodes
                graph.initializer.extend(tensors)
            if halves:
                new_nodes.append(helper.make_node("Add", [f"{prefix}/low", f"{prefix}/high"], [node.output[0]],
                                                  name=f"{prefix}/AddHalves"))
            replaced.add(node.input[1])
            counts["MatMulNBits 8-bit as two 4-bit halves" if halves else f"MatMulNBits {weight.bits}-bit"] += 1
        elif (node.op_type == "Gather" and node.input[0] == EMBEDDING and EMBEDDING in grid
              and _same(grid[EMBEDDING], numpy_helper.to_array(initializers[EMBEDDING]))):
            weight = grid[EMBEDDING]
            new_nodes.append(_gather_block_quantized(weight, node, graph.initializer))
            replaced.add(EMBEDDING)
            counts["GatherBlockQuantized 8-bit"] += 1
        else:
            new_nodes.append(node)
    kept = [tensor for tensor in graph.initializer if tensor.name not in replaced]
    del graph.node[:], graph.initializer[:]
    graph.node.extend(new_nodes)
    graph.initializer.extend(kept)
    if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    data = model_path.with_name(model_path.name + ".data")
    data.unlink(missing_ok=True)
    onnx.save(model, str(model_path), save_as_external_data=True, all_tensors_to_one_file=True, location=data.name)
    return counts


def _on_grid(names: tuple[str, ...], grid: dict[str, GridWeight], fp32: np.ndarray) -> GridWeight | None:
    """The GGUF's codes for these stacked weights when they reproduce `fp32` bit for bit, as they are
    or with pruned rows / blocks removed; None when training moved them (or the GGUF lacks them)."""
    if not all(name in grid for name in names):
        return None
    return matching_rows(concat_rows([grid[name] for name in names], "+".join(names)), fp32)


def _same(weight: GridWeight, fp32: np.ndarray) -> bool:
    expected = np.ascontiguousarray(fp32, dtype=np.float32)
    return weight.shape == expected.shape and np.array_equal(weight.dequantize().view(np.uint32), expected.view(np.uint32))


def _gather_block_quantized(weight: GridWeight, gather, initializers) -> object:
    """The Q8_0 embedding as uint8 codes (zero point 128, the op's default for 8 bits) and fp32 scales."""
    from onnx import helper, numpy_helper

    if weight.bits != 8:
        raise ValueError(f"{weight.name}: only a Q8_0 embedding is grafted (found {weight.bits}-bit)")
    prefix = gather.name.rsplit("/", 1)[0]
    initializers.extend([numpy_helper.from_array(weight.codes, f"{prefix}/data"),
                         numpy_helper.from_array(weight.scales, f"{prefix}/scales")])
    return helper.make_node("GatherBlockQuantized", [f"{prefix}/data", gather.input[1], f"{prefix}/scales"],
                            list(gather.output), name=f"{prefix}/GatherBlockQuantized", domain="com.microsoft",
                            gather_axis=0, quantize_axis=1, block_size=BLOCK, bits=8)
