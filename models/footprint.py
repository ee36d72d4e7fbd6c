"""A variant's memory footprint: the resident memory its load and warm-up add to the process. Measured
naively, the first variant loaded also paid the process's one-time costs (the runtimes' imports and
thread pools, the model library's code) and later ones reused memory freed before them, so the same
model read about three times as much loaded first as loaded last (docs/history.md, 2026-12-07). Those
costs are paid once before the first measure, and freed memory is handed back before each reading."""
from __future__ import annotations

import ctypes
import logging
from pathlib import Path

from models.catalog import Task
from models.machine import resident_bytes

log = logging.getLogger(__name__)
_warmed: set[Task] = set()


def release_free_memory() -> None:
    """glibc keeps freed heap pages for reuse: handed back, a reading counts what is live (no-op elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (or jemalloc preloaded): nothing to trim here
        pass


def resident_after_release() -> int | None:
    release_free_memory()
    return resident_bytes()


def warm_runtimes(task: Task, path: Path) -> None:
    """Pay once per task what any first load would: PyTorch's and ONNX Runtime's setup and thread pools, and a
    forward pass of a one-layer model of the task's architecture (`path`'s config) for its library code. On the
    thread that loads the models (their thread pools are its). Best effort: what fails here is left to the first load."""
    if task in _warmed:
        return
    first = not _warmed
    _warmed.add(task)
    try:
        if first:  # the runtimes are the process's, once
            _runtimes()
        _one_layer_forward(task, path)
    except Exception as error:  # noqa: BLE001 - a warm-up, not a load: the variant's own load reports its faults
        log.debug("warm-up for %s incomplete (%s: %s)", path, type(error).__name__, error)


def _runtimes() -> None:
    import numpy as np
    import onnxruntime
    import torch
    from onnx import TensorProto, helper

    from models.runners import cpu_threads, session_options

    torch.set_num_threads(cpu_threads())
    square = torch.ones(256, 256)
    (square @ square).sum().item()
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "warm-up",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor("w", TensorProto.FLOAT, [64, 64], [1.0] * 4096)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = onnxruntime.InferenceSession(model.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.ones((1, 64), np.float32)})


def _one_layer_forward(task: Task, path: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForQuestionAnswering

    config = AutoConfig.from_pretrained(path)
    config.num_hidden_layers, config.vocab_size = 1, 128
    family = AutoModelForCausalLM if task == "generation" else AutoModelForQuestionAnswering
    model = family.from_config(config).eval()
    with torch.inference_mode():
        model(input_ids=torch.ones(1, 16, dtype=torch.long), attention_mask=torch.ones(1, 16, dtype=torch.long))
