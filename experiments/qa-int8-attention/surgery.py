"""Timing probes of the shipped pruned-optimized QA graph with its attention written out: `fp32` (QKV projection in
int8 as shipped, the two attention products in fp32) and `int8` (both attention products as MatMulInteger over
per-tensor dynamically quantized uint8 operands). Batch 1 windows carry no padding (the app runs each window at its
own length), but the key mask is applied anyway as an additive bias. Written to /tmp/qa-int8-attention/<kind>.onnx.
Usage: python experiments/qa-int8-attention/surgery.py fp32|int8 [SOURCE.onnx]"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

SOURCE = "artifacts/qa-minilm-squad2/pruned-optimized/model.onnx"


def const(graph, name, value):
    graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return name


def attention(nodes, graph, node, int8: bool, mask_bias: str):
    x, w, b, xs, ws, _mask, xz, wz = list(node.input)[:8]
    heads = [a.i for a in node.attribute if a.name == "num_heads"][0]
    o = node.name
    width = [i for i in graph.initializer if i.name == w][0].dims[1] // 3
    head = width // heads
    nodes += [helper.make_node("Mul", [xs, ws], [o + "_s"]),
              helper.make_node("MatMulInteger", [x, w, xz, wz], [o + "_i"]),
              helper.make_node("Cast", [o + "_i"], [o + "_f"], to=1),
              helper.make_node("Mul", [o + "_f", o + "_s"], [o + "_p"]),
              helper.make_node("Add", [o + "_p", b], [o + "_qkv"]),
              helper.make_node("Split", [o + "_qkv"], [o + "_q", o + "_k", o + "_v"], axis=2, num_outputs=3)]
    shape = const(graph, o + "_shape", np.array([0, 0, heads, head], np.int64))
    for part, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [helper.make_node("Reshape", [o + "_" + part, shape], [o + "_" + part + "4"]),
                  helper.make_node("Transpose", [o + "_" + part + "4"], [o + "_" + part + "t"], perm=perm)]
    inv = const(graph, o + "_inv", np.array(1 / math.sqrt(head), np.float32))
    if int8:
        for part in "qkv":
            nodes.append(helper.make_node("DynamicQuantizeLinear", [o + "_" + part + "t"],
                                          [o + "_" + part + "8", o + "_" + part + "s", o + "_" + part + "z"]))
        nodes += [helper.make_node("MatMulInteger", [o + "_q8", o + "_k8", o + "_qz", o + "_kz"], [o + "_si"]),
                  helper.make_node("Cast", [o + "_si"], [o + "_sf"], to=1),
                  helper.make_node("Mul", [o + "_qs", o + "_ks"], [o + "_qks"]),
                  helper.make_node("Mul", [o + "_qks", inv], [o + "_sc"]),
                  helper.make_node("Mul", [o + "_sf", o + "_sc"], [o + "_scores0"])]
    else:
        nodes += [helper.make_node("MatMul", [o + "_qt", o + "_kt"], [o + "_raw"]),
                  helper.make_node("Mul", [o + "_raw", inv], [o + "_scores0"])]
    nodes += [helper.make_node("Add", [o + "_scores0", mask_bias], [o + "_scores"]),
              helper.make_node("Softmax", [o + "_scores"], [o + "_probs"], axis=-1)]
    if int8:
        nodes += [helper.make_node("DynamicQuantizeLinear", [o + "_probs"], [o + "_p8", o + "_ps", o + "_pz"]),
                  helper.make_node("MatMulInteger", [o + "_p8", o + "_v8", o + "_pz", o + "_vz"], [o + "_ci"]),
                  helper.make_node("Cast", [o + "_ci"], [o + "_cf"], to=1),
                  helper.make_node("Mul", [o + "_ps", o + "_vs"], [o + "_pvs"]),
                  helper.make_node("Mul", [o + "_cf", o + "_pvs"], [o + "_ctx4"])]
    else:
        nodes.append(helper.make_node("MatMul", [o + "_probs", o + "_vt"], [o + "_ctx4"]))
    flat = const(graph, o + "_flat", np.array([0, 0, width], np.int64))
    nodes += [helper.make_node("Transpose", [o + "_ctx4"], [o + "_ctxt"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", [o + "_ctxt", flat], list(node.output))]


def rewrite(model, int8: bool):
    graph = model.graph
    nodes = []
    # the key mask as an additive bias, (batch, 1, 1, keys): 0 where attended, -10000 where padded
    one = const(graph, "mask_one", np.array(1.0, np.float32))
    low = const(graph, "mask_low", np.array(-10000.0, np.float32))
    axes = const(graph, "mask_axes", np.array([1, 2], np.int64))
    nodes += [helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=1),
              helper.make_node("Sub", [one, "mask_f"], ["mask_inv"]),
              helper.make_node("Mul", ["mask_inv", low], ["mask_b2"]),
              helper.make_node("Unsqueeze", ["mask_b2", axes], ["mask_bias"])]
    for node in graph.node:
        if node.op_type == "QAttention":
            attention(nodes, graph, node, int8, "mask_bias")
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


if __name__ == "__main__":
    kind = sys.argv[1]
    source = sys.argv[2] if len(sys.argv) > 2 else SOURCE
    model = rewrite(onnx.load(source), int8=kind == "int8")
    os.makedirs("/tmp/qa-int8-attention", exist_ok=True)
    onnx.save(model, f"/tmp/qa-int8-attention/{kind}.onnx")
    print(f"/tmp/qa-int8-attention/{kind}.onnx")
