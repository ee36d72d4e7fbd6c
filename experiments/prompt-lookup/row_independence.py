"""Issue 53: why prompt lookup changes the texts of the ONNX decoders. A lookup pass computes several
positions at once (M rows); plain decoding computes one. Greedy text is unchanged only if each row's
result is bitwise the same either way. Each probe below compares M rows computed together with the
same rows computed one at a time, on ONNX Runtime's CPU provider, 2 threads.

    python experiments/prompt-lookup/row_independence.py
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper

RNG = np.random.default_rng(0)


def session(nodes, inputs, outputs, initializers=()) -> ort.InferenceSession:
    graph = helper.make_graph(nodes, "probe", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def rows_match(run, a: np.ndarray) -> bool:
    single = np.concatenate([run(a[i:i + 1]) for i in range(len(a))])
    return all(np.array_equal(run(a[:m]), single[:m]) for m in range(2, len(a) + 1))


def weight_matmul(bits: int | None, k: int = 576, n: int = 1536, block: int | None = None) -> bool:
    """A weight MatMul: fp32 (bits None, its weights prepacked) or MatMulNBits with int8 compute."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    weights = onnx.numpy_helper.from_array((RNG.standard_normal((k, n)) * 0.05).astype(np.float32), "W")
    io = [helper.make_tensor_value_info("A", T.FLOAT, ["M", k])], [helper.make_tensor_value_info("Y", T.FLOAT, ["M", n])]
    model = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["Y"])], "g", *io, [weights]),
                              opset_imports=[helper.make_opsetid("", 17)])
    if bits:
        quantizer = MatMulNBitsQuantizer(model, block_size=block or (32 if bits == 4 else 16), is_symmetric=False,
                                         accuracy_level=4, bits=bits)
        quantizer.process()
        model = quantizer.model.model
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    probe = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return rows_match(lambda a: probe.run(None, {"A": a})[0], RNG.standard_normal((16, k)).astype(np.float32))


def activation_matmul(k: int = 64, n: int = 41) -> bool:
    """A MatMul of two activations (attention's Q·Kᵀ): nothing to prepack."""
    probe = session([helper.make_node("Transpose", ["B"], ["Bt"], perm=[1, 0]), helper.make_node("MatMul", ["A", "Bt"], ["Y"])],
                    [helper.make_tensor_value_info("A", T.FLOAT, ["M", k]), helper.make_tensor_value_info("B", T.FLOAT, [n, k])],
                    [helper.make_tensor_value_info("Y", T.FLOAT, ["M", n])])
    b = RNG.standard_normal((n, k)).astype(np.float32)
    return rows_match(lambda a: probe.run(None, {"A": a, "B": b})[0], RNG.standard_normal((8, k)).astype(np.float32))


def group_query_attention(past: int = 40, new: int = 6, heads: int = 9, kv_heads: int = 3, head_size: int = 64,
                          filler: bool = False) -> bool:
    """SmolLM2's attention op as the GenAI builder emits it (packed QKV, rotary inside): `new` positions
    in one pass against the same positions one at a time, after the same `past`; with `filler`, each of
    them as the first of a two-position pass (models/decoding.py `wide_steps`)."""
    cos = RNG.uniform(-1, 1, (8192, head_size // 2)).astype(np.float32)
    node = helper.make_node("GroupQueryAttention", ["qkv", "", "", "pk", "pv", "seqlens_k", "total", "cos", "sin"],
                            ["out", "present_k", "present_v"], domain="com.microsoft", num_heads=heads,
                            kv_num_heads=kv_heads, scale=0.125, do_rotary=1, rotary_interleaved=0, local_window_size=-1)
    cache = [1, kv_heads, "P", head_size]
    probe = session([node], [helper.make_tensor_value_info("qkv", T.FLOAT, [1, "S", (heads + 2 * kv_heads) * head_size]),
                             helper.make_tensor_value_info("pk", T.FLOAT, cache), helper.make_tensor_value_info("pv", T.FLOAT, cache),
                             helper.make_tensor_value_info("seqlens_k", T.INT32, [1]), helper.make_tensor_value_info("total", T.INT32, [])],
                    [helper.make_tensor_value_info(name, T.FLOAT, None) for name in ("out", "present_k", "present_v")],
                    [onnx.numpy_helper.from_array(cos, "cos"), onnx.numpy_helper.from_array(np.sqrt(1 - cos ** 2).astype(np.float32), "sin")])

    def run(qkv, keys, values, before):
        total = before + qkv.shape[1]
        return probe.run(None, {"qkv": qkv, "pk": keys, "pv": values, "seqlens_k": np.array([total - 1], np.int32),
                                "total": np.array(total, np.int32)})

    qkv = RNG.standard_normal((1, past + new, (heads + 2 * kv_heads) * head_size)).astype(np.float32)
    empty = np.zeros((1, kv_heads, 0, head_size), np.float32)
    _, keys, values = run(qkv[:, :past], empty, empty, 0)
    one_at_a_time, k, v = [], keys, values
    for i in range(new):
        position = qkv[:, past + i: past + i + 1]
        if filler:  # a second, random position after it, whose output and cache entry are dropped
            position = np.concatenate([position, RNG.standard_normal(position.shape).astype(np.float32)], 1)
        out, k, v = run(position, k, v, past + i)
        one_at_a_time.append(out[:, :1])
        k, v = k[:, :, :past + i + 1], v[:, :, :past + i + 1]
    together = run(qkv[:, past:], keys, values, past)[0]
    return np.array_equal(np.concatenate(one_at_a_time, 1), together)


if __name__ == "__main__":
    for label, same in (("fp32 MatMul, constant weights", weight_matmul(None)),
                        ("MatMulNBits 4-bit blocks of 32, int8 compute", weight_matmul(4)),
                        ("MatMulNBits 8-bit blocks of 16, int8 compute", weight_matmul(8)),
                        ("MatMulNBits 8-bit blocks of 64, int8 compute", weight_matmul(8, block=64)),
                        ("MatMulNBits 8-bit blocks of 128, int8 compute", weight_matmul(8, block=128)),
                        ("fp32 MatMul of two activations (Q·Kᵀ)", activation_matmul()),
                        ("GroupQueryAttention, 6 new positions after 40", group_query_attention()),
                        ("GroupQueryAttention, the same, each first of a two-position pass", group_query_attention(filler=True))):
        print(f"{label}: {'rows bitwise the same' if same else 'rows differ'}")
