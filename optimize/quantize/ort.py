"""ONNX Runtime's quantizers: dynamic INT8 (W8A8) for encoders, weight-only MatMulNBits for decoders.
"""
from __future__ import annotations

import logging
from pathlib import Path

from models.runners import ONNX_FILE
from optimize.progress import quiet_quantizer
from optimize.prune.encoder_layout import UnsupportedArchitecture
from optimize.quantize.recipes import OnnxRecipe

log = logging.getLogger(__name__)


def quantize_dynamic(onnx_dir: Path, output: Path, recipe: OnnxRecipe) -> Path:
    """ONNX Runtime's dynamic quantizer (u8 activations, s8 weights). Called directly rather than
    through optimum's ORTQuantizer because after fusion the graph holds com.microsoft ops
    (Attention, SkipLayerNormalization) whose output types shape inference cannot name; the
    `DefaultTensorType` option tells the quantizer they are float."""
    import onnx
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic

    output.mkdir(parents=True, exist_ok=True)
    graph = onnx.load(str(onnx_dir / ONNX_FILE), load_external_data=False).graph
    excluded = []
    if "ffn_output" in recipe.keep_fp32:  # BERT's FFN down-projection: its GELU input quantizes worst
        excluded += [node.name for node in graph.node if node.op_type == "MatMul"
                     and "/output/dense/" in node.name and "/attention/" not in node.name]
    if "ffn_input" in recipe.keep_fp32:  # the up-projection: with both fp32, only attention's projections are INT8
        excluded += [node.name for node in graph.node if node.op_type == "MatMul" and "/intermediate/dense/" in node.name]
    if recipe.keep_fp32 and not excluded:  # not BERT's names (DistilBERT, ALBERT): the rung would quantize it all
        raise UnsupportedArchitecture(f"keeping {' and '.join(recipe.keep_fp32)} in fp32 applies to BERT's layer "
                                      "names, which this graph does not have: the rung does not apply")
    with quiet_quantizer():
        ort_quantize_dynamic(
            onnx_dir / ONNX_FILE, output / ONNX_FILE, weight_type=QuantType.QInt8, per_channel=recipe.per_channel,
            reduce_range=recipe.reduce_range, nodes_to_exclude=excluded,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    return output / ONNX_FILE


def quantize_weight_only(onnx_dir: Path, output: Path, bits: int, block_size: int = 32) -> Path:
    """Weight-only quantization (MatMulNBits): weights in `bits` bits with a scale per block,
    activations quantized per block at run time (accuracy level 4) instead of per tensor."""
    import onnx

    output.mkdir(parents=True, exist_ok=True)
    with quiet_quantizer():  # its import calls logging.basicConfig(level=INFO) when nothing configured logging
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        # measured on SmolLM2: 97.8% greedy agreement; keeping the LM head fp32 did not help (97.5%)
        quantizer = MatMulNBitsQuantizer(onnx.load(onnx_dir / ONNX_FILE), bits=bits, block_size=block_size,
                                         is_symmetric=True, accuracy_level=4)
        quantizer.process()
    quantizer.model.save_model_to_file(str(output / ONNX_FILE), use_external_data_format=False)
    return output / ONNX_FILE
