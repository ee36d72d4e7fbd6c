"""DynamicQuantizeMatMul (what the QA ladder ships) against MatMulNBits (8-bit weights, int8 compute) and fp32 MatMul,
one node at a time, 384 rows (a 384-token window), 2 threads: experiments/qa-pruned-optimized-profile/results.md."""
import time, numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
def session(model):
    so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
def timeit(sess, x, n=300):
    for _ in range(30): sess.run(None, {"x": x})
    ts = []
    for _ in range(n):
        t = time.perf_counter(); sess.run(None, {"x": x}); ts.append(time.perf_counter() - t)
    return np.median(ts) * 1e3
def graph(node, inits, K, N):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [384, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [384, N])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]); m.ir_version = 9; return m
for K, N in ((384, 384), (384, 512), (512, 384), (384, 1536)):
    W = rng.standard_normal((K, N)).astype(np.float32) * 0.05
    x = rng.standard_normal((384, K)).astype(np.float32)
    fp32 = graph(helper.make_node("MatMul", ["x", "W"], ["y"]), [numpy_helper.from_array(W, "W")], K, N)
    # DynamicQuantizeMatMul: int8 weights per column
    scale = np.abs(W).max(0) / 127; Wq = np.round(W / scale).astype(np.int8)
    dq = graph(helper.make_node("DynamicQuantizeMatMul", ["x", "Wq", "s", "", ""], ["y"], domain="com.microsoft"),
               [numpy_helper.from_array(Wq, "Wq"), numpy_helper.from_array(scale.astype(np.float32), "s")], K, N)
    res = {"fp32": timeit(session(fp32), x), "DQMatMul": timeit(session(dq), x)}
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer, DefaultWeightOnlyQuantConfig
    for block in (32, 128):
        try:
            m = onnx.load_from_string(fp32.SerializeToString())
            q = MatMulNBitsQuantizer(m, block_size=block, is_symmetric=True, accuracy_level=4, bits=8)
            q.process(); res[f"NBits8 b{block}"] = timeit(session(q.model.model), x)
        except Exception as e:
            res[f"NBits8 b{block}"] = repr(e)[:80]
    print(K, N, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items()}, flush=True)
