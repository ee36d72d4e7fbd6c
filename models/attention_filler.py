"""A decoder graph whose GroupQueryAttention always sees one more row than the pass has.

Why: ONNX Runtime's GroupQueryAttention computes a one-position pass another way than a wider one (its
GEMMs of two activations take a one-row path), while every weight kernel gives each row the same bits
at any width. With a zero row padded onto attention's inputs and sliced off its output, every attention
pass is ≥ 2 rows wide, so prompt lookup's checking passes and its plain steps compute each position alike
and lookup keeps the text exactly (experiments/prompt-lookup/results.md). The filler's key/value lands after
the real positions in the shared buffer, where the next pass overwrites it; the decoder binds an attention
mask one position longer so that the kernel's sequence lengths count it (`FILLER_ROWS`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

FILLER_ROWS = 1


def filled_model(model_path: Path) -> bytes:
    """The graph at `model_path` with each GroupQueryAttention's query/key/value padded by a zero row and
    its output's last row dropped; weights stay in the original external data file."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(model_path), load_external_data=False)
    graph = model.graph
    graph.initializer.extend([
        numpy_helper.from_array(np.array([0, 0, 0, 0, FILLER_ROWS, 0], dtype=np.int64), "filler/pads"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "filler/starts"),
        numpy_helper.from_array(np.array([-FILLER_ROWS], dtype=np.int64), "filler/ends"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "filler/axes")])
    nodes = []
    for node in graph.node:
        if node.op_type != "GroupQueryAttention":
            nodes.append(node)
            continue
        for index in (0, 1, 2):  # query (packed QKV in the model builder's graphs), key, value
            if node.input[index]:
                padded = f"{node.name}/filled_input_{index}"
                nodes.append(helper.make_node("Pad", [node.input[index], "filler/pads"], [padded],
                                              name=f"{node.name}/FillerPad{index}"))
                node.input[index] = padded
        output = node.output[0]
        node.output[0] = f"{node.name}/filled_output"
        nodes += [node, helper.make_node("Slice", [node.output[0], "filler/starts", "filler/ends", "filler/axes"],
                                         [output], name=f"{node.name}/FillerSlice")]
    del graph.node[:]
    graph.node.extend(nodes)
    return model.SerializeToString()


def filled_session(model_path: Path, session_options, provider: str):
    """An ONNX Runtime session of `filled_model`, built in memory (nothing is written beside the model).
    `session_options` must be a fresh SessionOptions: it is told where the weights file lies."""
    import onnxruntime

    session_options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                             str(model_path.parent))
    return onnxruntime.InferenceSession(filled_model(model_path), session_options, providers=[provider])
