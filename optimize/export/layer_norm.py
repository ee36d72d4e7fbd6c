"""Which layer norm kernel an encoder's residual adds run on, measured on this CPU.

ONNX Runtime fuses each residual Add and the LayerNormalization after it into one SkipLayerNormalization, at load
time and in its offline optimizer. On some CPUs that fused kernel is several times slower than the two it replaces,
and an INT8 encoder spent much of its time in it (docs/measurements.md, "layer_norm.py"). The build times the two
kernels at the model's width and, where the fused one is clearly slower, keeps them apart: the offline optimizer is
told not to fuse them, and the variant's `session.json` (models/runners.py) tells every session not to either.
"""
from __future__ import annotations

from pathlib import Path

from models.runners import session_options
from models.timing import percentile, timed_rounds

RUNTIME_FUSION = "SkipLayerNormFusion"  # ONNX Runtime's name for the load-time fusion
KEPT_APART = {"config_entries": {"optimization.disable_specified_optimizers": RUNTIME_FUSION}}  # a session.json
# a kernel choice, not a graph race: kept apart only when the fused kernel is this many times slower, so noise
# cannot flip it (the two compute the same sums in a different order, which moves INT8 answers a little)
SLOWER = 1.5
ROWS = 384  # one full window


def kernel_ms(hidden: int, rows: int = ROWS, rounds: int = 40) -> dict[str, float]:
    """Median milliseconds of SkipLayerNormalization and of Add + LayerNormalization on (1, rows, hidden), each in
    a session with the serving options, rounds interleaved."""
    import numpy as np
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    def graph(nodes) -> bytes:
        tensors = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, rows, hidden]) for name in "xsy"]
        weights = [numpy_helper.from_array(np.ones(hidden, np.float32), "gamma"),
                   numpy_helper.from_array(np.zeros(hidden, np.float32), "beta")]
        model = helper.make_model(helper.make_graph(nodes, "layer_norm", tensors[:2], tensors[2:], weights),
                                  opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
        model.ir_version = 8
        return model.SerializeToString()

    fused = graph([helper.make_node("SkipLayerNormalization", ["x", "s", "gamma", "beta"], ["y"], domain="com.microsoft",
                                    epsilon=1e-12)])
    split = graph([helper.make_node("Add", ["x", "s"], ["sum"]),
                   helper.make_node("LayerNormalization", ["sum", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-12)])
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, rows, hidden), np.float32), "s": rng.standard_normal((1, rows, hidden), np.float32)}
    sessions = {"SkipLayerNormalization": onnxruntime.InferenceSession(fused, session_options(), providers=["CPUExecutionProvider"]),
                "Add + LayerNormalization": onnxruntime.InferenceSession(split, session_options(KEPT_APART),
                                                                         providers=["CPUExecutionProvider"])}
    runs = timed_rounds({name: lambda session=session: session.run(None, feeds) for name, session in sessions.items()},
                        rounds, warmup=5)
    return {name: percentile([1e3 * seconds for seconds, _ in timed], 50) for name, timed in runs.items()}


def choose(model_dir: Path) -> tuple[dict, str]:
    """The session settings for the encoder in `model_dir` on this CPU, and the manifest's line saying why."""
    from transformers import AutoConfig

    hidden = AutoConfig.from_pretrained(model_dir).hidden_size  # DistilBERT's `dim` too
    return decision(kernel_ms(hidden), hidden)


def decision(timings: dict[str, float], hidden: int) -> tuple[dict, str]:
    """Apart (ONNX Runtime's fusion off) only when the fused kernel is over SLOWER times the two kernels."""
    apart = timings["SkipLayerNormalization"] > SLOWER * timings["Add + LayerNormalization"]
    measured = ", ".join(f"{name} {ms:.3f} ms" for name, ms in timings.items())
    line = (f"residual layer norms {'kept apart from' if apart else 'fused into'} SkipLayerNormalization "
            f"(1x{ROWS}x{hidden}: {measured}; apart only when the fused kernel is over {SLOWER}x slower)")
    return (KEPT_APART if apart else {}), line
