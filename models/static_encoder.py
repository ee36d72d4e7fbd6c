"""A QA encoder replayed as a CUDA graph: one fixed [1, width] shape, every node on the GPU.

Why: at batch 1 a small encoder on a GPU is launch-bound. ONNX Runtime's CUDA provider spent 1.6 ms
per 384-token window on an H100 whatever the model's size (the pruned encoder exactly as slow as the
full one, docs/gpu-runs.md), most of it the host dispatching ~100 kernels one by one. A CUDA graph
replays all of them with one launch, but only for a graph whose shapes never change and whose nodes
all run on the GPU. With dynamic axes, ONNX Runtime computes the reshape targets on the CPU (12 Memcpy
nodes per graph), which rules graphs out; fixed input shapes let its constant folding (which runs
before the graph is split between providers) fold that shape arithmetic away.

So: the axes are fixed to one window ([1, max_length]), each window is padded to it (padding is
masked, so the real positions' logits stay the same up to rounding), the inputs and outputs live in
buffers bound once (a graph replays on the same addresses), and each call copies the window in and
the two logit rows out. Any provider runs the same code (the tests run it on the CPU, without a graph).
"""
from __future__ import annotations

import threading

import numpy as np

PAD_VALUE = 0  # [PAD] is id 0 in BERT-style vocabularies; masked positions' ids do not reach real positions


def fixed_shape_model(path, width: int) -> bytes:
    """The ONNX model at `path` with every dynamic axis of its inputs and outputs fixed to [1, width]."""
    import onnx
    from onnxruntime.tools.onnx_model_utils import make_dim_param_fixed

    model = onnx.load(str(path))
    dynamic = {dim.dim_param for value in [*model.graph.input, *model.graph.output]
               for dim in value.type.tensor_type.shape.dim if dim.dim_param}
    for name in dynamic:
        make_dim_param_fixed(model.graph, name, 1 if "batch" in name else width)
    return model.SerializeToString()


class StaticEncoder:
    """Start and end logits of one window at a time on a fixed-shape session (see module doc)."""

    def __init__(self, path, width: int, options, provider: str, cuda_graph: bool):
        import onnxruntime

        provider_entry = (provider, {"enable_cuda_graph": "1"}) if cuda_graph else provider
        self.session = onnxruntime.InferenceSession(fixed_shape_model(path, width), options, providers=[provider_entry])
        self.width = width
        self.device = "cuda" if provider == "CUDAExecutionProvider" else "cpu"
        self.cuda_graph = cuda_graph
        self.binding = self.session.io_binding()
        self.host, self.buffers = {}, {}  # each input's padded window here, and its bound copy on the device
        for value in self.session.get_inputs():
            self.host[value.name] = np.full((1, width), PAD_VALUE, np.int64 if value.type == "tensor(int64)" else np.int32)
            self.buffers[value.name] = onnxruntime.OrtValue.ortvalue_from_numpy(self.host[value.name], self.device, 0)
            self.binding.bind_ortvalue_input(value.name, self.buffers[value.name])
        self.output_names = [o.name for o in self.session.get_outputs() if o.name in ("start_logits", "end_logits")]
        for output in self.session.get_outputs():
            if output.name in self.output_names:  # copy_outputs_to_cpu answers in this (bound) order
                dtype = np.float16 if output.type == "tensor(float16)" else np.float32
                buffer = onnxruntime.OrtValue.ortvalue_from_shape_and_type([1, width], dtype, self.device, 0)
                self.binding.bind_ortvalue_output(output.name, buffer)
        self.session.run_with_iobinding(self.binding)  # the first runs: ONNX Runtime captures the graph on them
        self.lock = threading.Lock()  # one set of bound buffers: concurrent calls (the app's threads) take turns

    def __call__(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """inputs: [windows, tokens] with tokens ≤ width; logits float32 [windows, tokens]."""
        windows, tokens = next(iter(inputs.values())).shape
        if tokens > self.width:
            raise ValueError(f"a window of {tokens} tokens does not fit this {self.width}-token graph")
        start = np.empty((windows, tokens), np.float32)
        end = np.empty((windows, tokens), np.float32)
        with self.lock:
            self._run(inputs, windows, tokens, start, end)
        return start, end

    def _run(self, inputs: dict[str, np.ndarray], windows: int, tokens: int, start: np.ndarray, end: np.ndarray) -> None:
        for row in range(windows):
            for name, host in self.host.items():
                host[0, :tokens] = inputs[name][row]
                host[0, tokens:] = PAD_VALUE
                self.buffers[name].update_inplace(host)
            self.session.run_with_iobinding(self.binding)
            logits = dict(zip(self.output_names, self.binding.copy_outputs_to_cpu()))
            start[row], end[row] = logits["start_logits"][0, :tokens], logits["end_logits"][0, :tokens]
