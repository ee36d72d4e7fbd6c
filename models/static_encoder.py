"""A QA encoder replayed as a CUDA graph: one fixed [1, width] shape, every node on the GPU.

Why: at batch 1 a small encoder on a GPU is launch-bound: on an H100 the pruned encoder ran exactly as
fast as the full one (docs/gpu-runs.md), the time going to the host dispatching its kernels one by one.
A CUDA graph replays all of them with one launch, but only for a graph whose shapes never change and
whose nodes all run on the GPU. With dynamic axes ONNX Runtime computes the reshape targets on the CPU
(Memcpy nodes in every graph), which rules graphs out; with fixed input shapes that arithmetic folds
away (`fold_constants`).

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
    """The ONNX model at `path` with every dynamic axis of its inputs and outputs fixed to [1, width],
    and the arithmetic that only depends on shapes and constants folded away. Done here, not by ONNX
    Runtime: its own folding cannot evaluate FP16 nodes without FP16 CPU kernels (the attention scale
    1/√d stayed, computed half on the CPU: 6 Memcpy nodes), and a model it saves after optimizing on one
    provider is that provider's (casts and copies inserted), not the graph the GPU should run."""
    import onnx
    from onnxruntime.tools.onnx_model_utils import make_dim_param_fixed

    model = onnx.load(str(path))
    dynamic = {dim.dim_param for value in [*model.graph.input, *model.graph.output]
               for dim in value.type.tensor_type.shape.dim if dim.dim_param}
    for name in dynamic:
        make_dim_param_fixed(model.graph, name, 1 if "batch" in name else width)
    return fold_constants(model).SerializeToString()


def _static_shapes(model) -> dict[str, tuple[int, ...]]:
    """Every value's shape where it is fully known (ONNX Runtime's symbolic inference knows its contrib ops)."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    shapes = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    return shapes


def fold_constants(model):
    """Replace each standard-domain node whose inputs are all constants (and each Shape of a static
    shape) by its outputs, computed by ONNX's reference evaluator (any dtype, FP16 included), in
    graph order so that chains fold whole."""
    from onnx import defs, numpy_helper
    from onnx.reference import ReferenceEvaluator

    shapes = _static_shapes(model)
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    kept = []
    for node in model.graph.node:
        inputs = [name for name in node.input if name]
        values = None
        if node.op_type == "Shape" and node.domain in ("", "ai.onnx") and inputs[0] in shapes:
            attributes = {a.name: a.i for a in node.attribute}
            shape = np.array(shapes[inputs[0]], dtype=np.int64)
            values = [shape[attributes.get("start", 0):attributes.get("end", len(shape))]]
        elif (node.domain in ("", "ai.onnx") and defs.has(node.op_type) and all(n in constants for n in inputs)
              and (inputs or node.op_type == "Constant")):
            values = ReferenceEvaluator(node).run(None, {name: constants[name] for name in inputs})
        if values is None:
            kept.append(node)
            continue
        for name, value in zip(node.output, values):
            constants[name] = np.asarray(value)
            model.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    del model.graph.node[:]
    model.graph.node.extend(kept)
    used = {name for node in kept for name in node.input} | {o.name for o in model.graph.output}
    for initializer in [i for i in model.graph.initializer if i.name not in used]:
        model.graph.initializer.remove(initializer)
    return model


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
        self.outputs = []  # bound once, kept alive here; copy_outputs_to_cpu answers in this (bound) order
        for output in self.session.get_outputs():
            if output.name in self.output_names:
                dtype = np.float16 if output.type == "tensor(float16)" else np.float32
                self.outputs.append(onnxruntime.OrtValue.ortvalue_from_shape_and_type([1, width], dtype, self.device, 0))
                self.binding.bind_ortvalue_output(output.name, self.outputs[-1])
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
