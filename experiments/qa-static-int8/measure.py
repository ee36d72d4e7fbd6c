"""Does static INT8 (activation scales calibrated once, on training windows) beat the dynamic INT8
the QA ladder ships, in speed at 384 tokens and in held-out F1? (issue 26: "try static INT8 with
calibration on training articles too").

For a QA model folder: optimum export -> ONNX Runtime's static quantizer (QDQ, per-channel s8
weights, u8 activations; MatMuls only; calibrated on windows of the SQuAD 2.0 training-head
articles, never the held-out ones) beside the build's dynamic recipe on the same export; held-out
SQuAD 2.0 F1 and forced-span F1 through the project's measure, and model time at 1x384 tokens,
rounds interleaved.

    python experiments/qa-static-int8/measure.py weights/qa-minilm-squad2-pruned --method minmax
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def calibration_windows(tokenizer, config, count: int) -> list[dict]:
    import numpy as np

    from models.qa import preprocess
    from optimize.evaluate import squad

    examples = squad.all_examples(squad.TRAIN_HEAD_PATH)[::7][:count]
    windows = []
    for example in examples:
        inputs = preprocess(tokenizer, example.question, example.context, config).inputs
        padded = {}
        for name, values in inputs.items():  # one shape for every window: the histogram calibrators stack them
            row = np.zeros((1, config.max_length), dtype=values.dtype)
            row[0, :values.shape[1]] = values[0]
            padded[name] = row
        windows.append(padded)
    return windows


def quantize_static(source_onnx: Path, output: Path, windows: list[dict], method: str, per_channel: bool) -> Path:
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as ort_quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter(windows)

        def get_next(self):
            return next(self.items, None)

    output.mkdir(parents=True, exist_ok=True)
    method = method.removesuffix("-qop") if False else method
    methods = {"minmax-qop": CalibrationMethod.MinMax, "minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
               "entropy": CalibrationMethod.Entropy}
    extra = {"DefaultTensorType": onnx.TensorProto.FLOAT}
    if method == "percentile":
        extra["CalibPercentile"] = 99.99
    ort_quantize_static(str(source_onnx), str(output / "model.onnx"), Reader(), quant_format=QuantFormat.QOperator if method.endswith("-qop") else QuantFormat.QDQ,
                        per_channel=per_channel, reduce_range=False, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
                        calibrate_method=methods[method], extra_options=extra)
    return output / "model.onnx"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--method", default="minmax", choices=("minmax", "minmax-qop", "percentile", "entropy"))
    parser.add_argument("--calibration", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--no-accuracy", action="store_true")
    args = parser.parse_args()

    import shutil

    import numpy as np
    import onnxruntime

    from models.runners import load_runner, session_options
    from models.timing import percentile, timed_rounds
    from optimize.evaluate.accuracy import qa_accuracy, qa_against
    from optimize.evaluate.squad_metrics import HeldOut
    from optimize.export.onnx import KEEP_FILES, export
    from optimize.quantize.ort import quantize_dynamic
    from optimize.quantize.recipes import OnnxRecipe

    work = Path(tempfile.mkdtemp(prefix="static-int8-"))
    exported = export(args.model, work / "export", "qa", None)
    reference = load_runner("qa", "baseline", "torch", args.model)
    windows = calibration_windows(reference.tokenizer, reference.qa_config, args.calibration)
    started = time.perf_counter()
    static = quantize_static(exported, work / "static", windows, args.method, per_channel=True)
    calibrate_s = time.perf_counter() - started
    dynamic = quantize_dynamic(exported.parent, work / "dynamic", OnnxRecipe(per_channel=True))
    for folder in (static.parent, dynamic.parent):
        for name in KEEP_FILES:
            if (args.model / name).exists():
                shutil.copy(args.model / name, folder / name)

    sessions = {name: onnxruntime.InferenceSession(str(path), session_options(), providers=["CPUExecutionProvider"])
                for name, path in (("fp32", exported), ("dynamic", dynamic), ("static", static))}
    ids = np.random.default_rng(0).integers(1000, 2000, (1, 384), dtype=np.int64)
    values = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    calls = {name: (lambda s=s: s.run(None, {i.name: values[i.name] for i in s.get_inputs()})) for name, s in sessions.items()}
    timings = {name: round(percentile([1e3 * s for s, _ in runs], 50), 2)
               for name, runs in timed_rounds(calls, args.rounds, warmup=3).items()}
    result = {"model": str(args.model), "method": args.method, "calibration_windows": len(windows),
              "calibrate_s": round(calibrate_s, 1), "p50_ms_1x384": timings}
    print(json.dumps(result))
    if not args.no_accuracy:
        held_out = HeldOut.load()
        source = qa_accuracy(reference, held_out)
        for name, path in (("dynamic", dynamic), ("static", static)):
            runner = load_runner("qa", name, "onnxruntime", path.parent)
            measured = qa_against(qa_accuracy(runner, held_out), source)
            result[name] = {k: measured[k] for k in ("overall_f1", "forced_f1", "agreement_pct", "overall_f1_delta",
                                                     "forced_f1_delta") if k in measured}
            print(name, json.dumps(result[name]))
    out = Path(__file__).with_name(f"result-{args.model.name}-{args.method}.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
