"""Does ONNX Runtime's CUDA execution provider load here? A one-node graph on it, and if it falls back
to the CPU, the libraries its provider library cannot find (ldd) and ONNX Runtime's own words."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import torch  # loads the image's CUDA 13 libraries (cuBLAS, cuDNN) into the process first, as the app does
from onnx import TensorProto, helper

import onnxruntime

print("onnxruntime", onnxruntime.__version__, "from", Path(onnxruntime.__file__).parent)
print("available providers:", onnxruntime.get_available_providers())
print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU:", torch.cuda.is_available() and torch.cuda.get_device_name(0))
graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "check",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
onnxruntime.set_default_logger_severity(1)
session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CUDAExecutionProvider"])
print("session providers:", session.get_providers())
print("2 + 2 on it:", session.run(None, {"x": np.array([2.0, 2.0], dtype=np.float32)})[0])
if "CUDAExecutionProvider" not in session.get_providers():
    library = Path(onnxruntime.__file__).parent / "capi" / "libonnxruntime_providers_cuda.so"
    missing = [line.strip() for line in subprocess.run(["ldd", str(library)], capture_output=True, text=True).stdout.splitlines()
               if "not found" in line]
    print("CUDA provider NOT loaded; libraries not found:", missing or "none (see ONNX Runtime's log above)")
    raise SystemExit(1)
print("CUDA execution provider: loaded")
