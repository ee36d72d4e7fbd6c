"""DynamicQuantizeMatMul (what the QA ladder ships) against MatMulNBits (8-bit weights, int8 compute) and fp32 MatMul,
one node at a time, 384 rows (a 384-token window), 2 threads: experiments/qa-pruned-optimized-profile/results.md."""
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

ROWS = 384


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def median_ms(sess: ort.InferenceSession, x: np.ndarray, calls: int = 300) -> float:
    """The median of `calls` calls after 30 warm-up calls, in one warm loop (every kernel timed in the same state)."""
    for _ in range(30):
        sess.run(None, {"x": x})
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        sess.run(None, {"x": x})
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def one_node_model(node: onnx.NodeProto, initializers: list, k: int, n: int) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ROWS, n])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    return model


def main() -> None:
    rng = np.random.default_rng(0)
    for k, n in ((384, 384), (384, 512), (512, 384), (384, 1536)):
        weight = rng.standard_normal((k, n)).astype(np.float32) * 0.05
        x = rng.standard_normal((ROWS, k)).astype(np.float32)
        fp32 = one_node_model(helper.make_node("MatMul", ["x", "W"], ["y"]), [numpy_helper.from_array(weight, "W")], k, n)
        scale = np.abs(weight).max(0) / 127  # int8 weights per column, as the ladder's dynamic INT8
        quantized = np.round(weight / scale).astype(np.int8)
        dynamic = one_node_model(
            helper.make_node("DynamicQuantizeMatMul", ["x", "Wq", "s", "", ""], ["y"], domain="com.microsoft"),
            [numpy_helper.from_array(quantized, "Wq"), numpy_helper.from_array(scale.astype(np.float32), "s")], k, n)
        times = {"fp32": median_ms(session(fp32), x), "DQMatMul": median_ms(session(dynamic), x)}
        for block in (32, 128):
            try:
                nbits = MatMulNBitsQuantizer(onnx.load_from_string(fp32.SerializeToString()), block_size=block,
                                             is_symmetric=True, accuracy_level=4, bits=8)
                nbits.process()
                times[f"NBits8 b{block}"] = median_ms(session(nbits.model.model), x)
            except Exception as error:  # noqa: BLE001 - an ORT without 8-bit MatMulNBits: say so in the row
                times[f"NBits8 b{block}"] = repr(error)[:80]
        print(k, n, {name: round(v, 3) if isinstance(v, float) else v for name, v in times.items()}, flush=True)


if __name__ == "__main__":
    main()
