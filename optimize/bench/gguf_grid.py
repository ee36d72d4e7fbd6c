"""`python -m optimize gguf-grid-bench`: which MatMulNBits form should carry a Q4_1 weight.

Why: a Q4_1 weight (w = d·q + m per block of 32) fits MatMulNBits in more than one way, and they
differ in exactness and speed: float zero points (zp = −m/d, exact up to rounding, but a slow
kernel), rounded uint8 zero points (fast, not exact), or zero point 0 plus the minimum term as a
small fp32 product (block sums of x times m: exact weights). Each is timed on one real SmolLM2
weight in a one-node graph against fp32 MatMul, for one row (decoding) and 128 (a prompt), on 1
and 2 threads, with its error against the exact product.
"""
from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.reports import REPORTS_DIR
from optimize.export import gguf_grid
from optimize.export.gguf_grid import GridWeight, NBitsInitializers


@dataclass(frozen=True)
class GridBenchConfig:
    weights: tuple[str, ...] = ("model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight")
    rows: tuple[int, ...] = (1, 128)  # M: one decode step, a 128-token prompt
    threads: tuple[int, ...] = (1, 2)
    rounds: int = 200  # timed calls per variant, variants shuffled every round
    warmup: int = 20
    output: Path = REPORTS_DIR / "gguf-grid-kernels.md"  # the checkout's reports/, wherever it is run from


def variants(weight: GridWeight) -> dict[str, bytes]:
    """Serialized one-node graphs (input x [M, K], output y [M, N]) for each way to run `weight`."""
    init = gguf_grid.to_matmul_nbits(weight)
    float_zp = np.where(weight.scales == 0, 0, -weight.minimums / np.where(weight.scales == 0, 1, weight.scales))
    uint8_zp = np.clip(np.rint(float_zp), 0, 15).astype(np.uint8)
    packed_uint8_zp = uint8_zp[:, 0::2] | (_pad_even(uint8_zp)[:, 1::2] << 4)
    graphs = {"fp32 MatMul": _fp32_graph(weight.dequantize())}
    for level in (0, 4):
        graphs[f"float zp (−m/d), acc {level}"] = _nbits_graph(
            _with_zero_points(init, float_zp.astype(np.float32)), level, min_term=False)
        graphs[f"uint8 zp round(−m/d), acc {level}"] = _nbits_graph(
            _with_zero_points(init, packed_uint8_zp), level, min_term=False)
        graphs[f"zp 0 + min term, acc {level}"] = _nbits_graph(init, level, min_term=True)
    fp32 = graphs["fp32 MatMul"]
    graphs["re-quantized int8 block 16, acc 4 (today's default)"] = _requantized(fp32, bits=8, block_size=16)
    graphs["re-quantized int4 block 32, acc 4"] = _requantized(fp32, bits=4, block_size=32)
    return graphs


def _requantized(fp32_graph: bytes, bits: int, block_size: int) -> bytes:
    """The fp32 weight re-quantized by ONNX Runtime's own quantizer (symmetric), as the default recipe does."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(onnx.load_from_string(fp32_graph), bits=bits, block_size=block_size,
                                     is_symmetric=True, accuracy_level=4)
    quantizer.process()
    return quantizer.model.model.SerializeToString()


def _pad_even(zero_points: np.ndarray) -> np.ndarray:
    return np.pad(zero_points, ((0, 0), (0, zero_points.shape[1] % 2)))


def _with_zero_points(init: NBitsInitializers, zero_points: np.ndarray) -> NBitsInitializers:
    return NBitsInitializers(init.packed, init.scales, zero_points, None, init.bits, init.K, init.N)


def _nbits_graph(init: NBitsInitializers, accuracy_level: int, min_term: bool) -> bytes:
    nodes, initializers = gguf_grid.matmul_nbits_nodes(init, "x", "y", "w", accuracy_level, rank=2, min_term=min_term)
    return _model(nodes, initializers, init.K, init.N)


def _fp32_graph(weight: np.ndarray) -> bytes:
    from onnx import helper, numpy_helper

    node = helper.make_node("MatMul", ["x", "w/T"], ["y"], name="w/MatMul")
    return _model([node], [numpy_helper.from_array(np.ascontiguousarray(weight.T), "w/T")], *weight.shape[::-1])


def _model(nodes: list, initializers: list, K: int, N: int) -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "gguf-grid", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", N])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model.SerializeToString()


def session(graph: bytes, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.spin_duration_us", "100")  # as models/runners.py serves
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def measure(weight: GridWeight, config: GridBenchConfig) -> list[dict]:
    """One row per (variant, M, threads): latency percentiles in µs and max |error| vs x @ W.T in float64."""
    from optimize.publish.report import percentile, timed_rounds

    exact = weight.dequantize().astype(np.float64)
    graphs = variants(weight)
    rows = []
    for M in config.rows:
        x = np.random.default_rng(M).standard_normal((M, weight.shape[1])).astype(np.float32)
        reference = x.astype(np.float64) @ exact.T
        for threads in config.threads:
            sessions = {name: session(graph, threads) for name, graph in graphs.items()}
            errors = {name: float(np.abs(s.run(None, {"x": x})[0] - reference).max()) for name, s in sessions.items()}
            calls = {name: functools.partial(_run, s, x) for name, s in sessions.items()}
            timings = timed_rounds(calls, config.rounds, config.warmup)
            for name, runs in timings.items():
                micros = [1e6 * seconds for seconds, _ in runs]
                rows.append({"weight": weight.name, "shape": weight.shape, "M": M, "threads": threads, "variant": name,
                             "p10": percentile(micros, 10), "p50": percentile(micros, 50), "p90": percentile(micros, 90),
                             "max_error": errors[name], "max_reference": float(np.abs(reference).max())})
    return rows


def _run(session, x: np.ndarray) -> None:
    session.run(None, {"x": x})  # the output is dropped: timed_rounds keeps what a call returns


def markdown(rows: list[dict], config: GridBenchConfig) -> str:
    import onnxruntime

    lines = ["# GGUF grid: MatMulNBits forms of a Q4_1 weight", "",
             f"`python -m optimize gguf-grid-bench` (onnxruntime {onnxruntime.__version__}, {platform.processor() or platform.machine()}).",
             f"One-node graphs on real SmolLM2 weights from the Q4_1 GGUF; {config.rounds} calls per variant after "
             f"{config.warmup} warm-up calls, variants shuffled every round; latency of `session.run` in µs (p50 and the "
             "p10–p90 spread), including ~10 µs of Python call overhead. Error: max |y − x·Wᵀ| against the exact "
             "product in float64 (W = the baseline's fp32 weight), x ~ N(0, 1).", "",
             "Other work on the machine moves these timings (see the spread): compare within a table, not across runs.", ""]
    for key in dict.fromkeys((r["weight"], r["shape"], r["M"]) for r in rows):
        group = [r for r in rows if (r["weight"], r["shape"], r["M"]) == key]
        fp32 = {r["threads"]: r["p50"] for r in group if r["variant"] == "fp32 MatMul"}
        lines += [f"## {key[0]} [N={key[1][0]}, K={key[1][1]}], M={key[2]} (max |x·Wᵀ| = {group[0]['max_reference']:.1f})", "",
                  "| variant | " + " | ".join(f"{t} thread{'s' * (t > 1)}: p50 (p10–p90) µs | vs fp32" for t in sorted(fp32))
                  + " | max abs error |", "|---|" + "---|---|" * len(fp32) + "---|"]
        for name in dict.fromkeys(r["variant"] for r in group):
            cells = []
            for threads in sorted(fp32):
                r = next(r for r in group if r["variant"] == name and r["threads"] == threads)
                cells.append(f"{r['p50']:.0f} ({r['p10']:.0f}–{r['p90']:.0f}) | {fp32[threads] / r['p50']:.2f}x")
            error = next(r["max_error"] for r in group if r["variant"] == name)
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {error:.2e} |")
        lines.append("")
    return "\n".join(lines)


def run(config: GridBenchConfig = GridBenchConfig()) -> list[dict]:
    from models.sources import smollm2_gguf

    grid = gguf_grid.read_grid(smollm2_gguf())
    rows = [row for name in config.weights for row in measure(grid[name], config)]
    config.output.parent.mkdir(parents=True, exist_ok=True)
    config.output.write_text(markdown(rows, config))
    print(config.output.read_text())
    return rows

