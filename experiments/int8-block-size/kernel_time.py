"""What `pruned-optimized`'s weights cost per decoding step at each 8-bit MatMulNBits block size (issue 49:
it reads 144 MB per token in blocks of 16, where an fp32 scale per 16 weights is a fifth of the bytes).

One graph per block size holding the pruned SmolLM2's per-step weight work at one row: 24 layers of qkv
(960 × 576), o (576 × 576), gate and up (1,536 × 576), down (576 × 1,536) and the LM head (49,152 × 576),
random symmetric 8-bit codes, int8 compute (accuracy level 4), every node reading one shared input row.
The graphs run interleaved in one process, 2 threads.

    python experiments/int8-block-size/kernel_time.py [ROUNDS]
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

HIDDEN, FFN, VOCAB, LAYERS = 576, 1536, 49152, 24
WEIGHTS = [(960, HIDDEN), (HIDDEN, HIDDEN), (FFN, HIDDEN), (FFN, HIDDEN), (HIDDEN, FFN)] * LAYERS + [(VOCAB, HIDDEN)]


def step_graph(block: int, bits: int = 8, seed: int = 0) -> tuple[bytes, int]:
    rng = np.random.default_rng(seed)
    nodes, initializers, outputs, total = [], [], [], 0
    for index, (n, k) in enumerate(WEIGHTS):
        blocks = -(-k // block)
        codes = rng.integers(0, 256, size=(n, blocks, block * bits // 8), dtype=np.uint8)
        scales = rng.random((n, blocks), dtype=np.float32) / 64
        initializers += [numpy_helper.from_array(codes, f"B{index}"), numpy_helper.from_array(scales, f"S{index}")]
        total += codes.nbytes + scales.nbytes
        nodes.append(helper.make_node("MatMulNBits", [f"x{k}", f"B{index}", f"S{index}"], [f"y{index}"], domain="com.microsoft",
                                      K=k, N=n, bits=bits, block_size=block, accuracy_level=4))
        outputs.append(helper.make_tensor_value_info(f"y{index}", TensorProto.FLOAT, [1, n]))
    inputs = [helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, [1, k]) for k in (HIDDEN, FFN)]
    graph = helper.make_graph(nodes, f"block{block}", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)
    return model.SerializeToString(), total


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    options.add_session_config_entry("session.intra_op.spin_duration_us", "100")
    forms = {f"8-bit, block {block}": (8, block) for block in (16, 32, 64, 128)} | {"4-bit, block 32 (reference)": (4, 32)}
    sessions, sizes = {}, {}
    for name, (bits, block) in forms.items():
        model, sizes[name] = step_graph(block, bits)
        sessions[name] = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feed = {f"x{k}": np.random.default_rng(1).standard_normal((1, k), dtype=np.float32) for k in (HIDDEN, FFN)}
    times = {name: [] for name in sessions}
    for session in sessions.values():
        for _ in range(5):
            session.run(None, feed)
    for round_ in range(rounds):
        names = list(sessions)
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            start = time.perf_counter()
            for _ in range(5):
                sessions[name].run(None, feed)
            times[name].append((time.perf_counter() - start) / 5 * 1e3)
    base = statistics.median(times["8-bit, block 16"])
    print("| weights | MB read per step | ms per step (median) | vs block 16 | GB/s |\n|---|---|---|---|---|")
    for name, values in times.items():
        ms = statistics.median(values)
        print(f"| {name} | {sizes[name] / 1e6:.0f} | {ms:.2f} | {base / ms:.2f}x | {sizes[name] / ms / 1e6:.1f} |")


if __name__ == "__main__":
    main()
