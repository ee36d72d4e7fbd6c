"""Timing-only variants of the shipped pruned-optimized QA graph (FastGelu, MultiHeadAttention with and without
its mask), written to /tmp/qa-profile/. Usage: python experiments/qa-pruned-optimized-profile/surgery.py gelu|mha|mhamask|gelu_mha"""
import onnx, sys
from onnx import helper, numpy_helper
src = "artifacts/qa-minilm-squad2/pruned-optimized/model.onnx"

def fastgelu(m):
    for n in m.graph.node:
        if n.op_type == "BiasGelu":
            n.op_type = "FastGelu"; n.domain = "com.microsoft"
    return m

def mha(m, keep_mask=False):
    g = m.graph
    new = []
    for n in g.node:
        if n.op_type != "QAttention":
            new.append(n); continue
        x, w, b, xs, ws, mask, xz, wz = list(n.input)[:8]
        heads = [a.i for a in n.attribute if a.name == "num_heads"][0]
        o = n.name
        new.append(helper.make_node("Mul", [xs, ws], [o+"_s"]))
        new.append(helper.make_node("MatMulInteger", [x, w, xz, wz], [o+"_i"]))
        new.append(helper.make_node("Cast", [o+"_i"], [o+"_f"], to=1))
        new.append(helper.make_node("Mul", [o+"_f", o+"_s"], [o+"_qkv"]))
        new.append(helper.make_node("Split", [o+"_qkv"], [o+"_q", o+"_k", o+"_v"], axis=2, num_outputs=3))
        ins = [o+"_q", o+"_k", o+"_v", b]
        if keep_mask: ins.append(mask)
        new.append(helper.make_node("MultiHeadAttention", ins, list(n.output), domain="com.microsoft", num_heads=heads))
    del g.node[:]; g.node.extend(new)
    return m

variant = sys.argv[1]
m = onnx.load(src)
if "gelu" in variant: fastgelu(m)
if "mha" in variant: mha(m, keep_mask="mask" in variant)
import os
os.makedirs("/tmp/qa-profile", exist_ok=True)
onnx.save(m, f"/tmp/qa-profile/{variant}.onnx")
