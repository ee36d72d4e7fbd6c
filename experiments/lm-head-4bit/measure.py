"""Would a 4-bit LM head make `pruned-optimized` decode ≥ 1.2x `optimized` (issue 49)? A speed probe, not a build:
the built graph's 8-bit LM head (blocks of 128) re-quantized to 4 bits (blocks of 32, zero points), everything else
the same, timed plain (no lookup) beside the built graph and `optimized` in interleaved rounds on the bench's chat
prompt. Greedy agreement with the built graph is printed too; a shipped rung would need the lossy gates.

    PYTHONPATH=. python experiments/lm-head-4bit/measure.py [ROUNDS]
"""
from __future__ import annotations

import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from models.catalog import artifacts_root
from models.decoding import OnnxCausalLM
from models.runners import session_options
from optimize.export.gguf_grid import pack_nibbles
from optimize.bench.run import generation_prompt
from transformers import AutoTokenizer

BUILT = artifacts_root() / "generation-smollm2" / "pruned-optimized"
OPTIMIZED = artifacts_root() / "generation-smollm2" / "optimized"
PROBE = artifacts_root() / "bench" / "pruned-optimized-lm-head-4bit"


def four_bit(weight: np.ndarray, block: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[N, K] float → MatMulNBits 4-bit (packed codes [N, K/block, block/2], scales [N, K/block], zero points packed)."""
    n, k = weight.shape
    blocks = weight.reshape(n, k // block, block)
    low, high = np.minimum(blocks.min(-1), 0), np.maximum(blocks.max(-1), 0)
    scale = np.where(high > low, (high - low) / 15, 1.0).astype(np.float32)
    zero = np.clip(np.round(-low / scale), 0, 15).astype(np.uint8)
    codes = np.clip(np.round(blocks / scale[..., None]) + zero[..., None], 0, 15).astype(np.uint8)
    zero_padded = np.concatenate([zero, np.zeros((n, zero.shape[1] % 2), np.uint8)], axis=1)
    return pack_nibbles(codes), scale, pack_nibbles(zero_padded)


def build_probe() -> Path:
    if (PROBE / "model.onnx").exists():
        return PROBE
    model = onnx.load(str(BUILT / "model.onnx"))
    inits = {i.name: i for i in model.graph.initializer}
    node = next(n for n in model.graph.node if n.op_type == "MatMulNBits" and "lm_head" in n.name)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    q8 = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)  # [N, blocks, block]
    scales = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32)
    weight = ((q8 - 128) * scales[..., None]).reshape(attrs["N"], -1)[:, : attrs["K"]]
    packed, scale, zero = four_bit(weight)
    names = ["lm_head.MatMul.weight_Q4", "lm_head.MatMul.weight_Q4_scales", "lm_head.MatMul.weight_Q4_zp"]
    for name, array in zip(names, (packed, scale, zero)):
        model.graph.initializer.append(numpy_helper.from_array(array, name))
    del node.input[1:]
    node.input.extend(names)
    del node.attribute[:]
    node.attribute.extend([onnx.helper.make_attribute(k, v) for k, v in
                           (("K", attrs["K"]), ("N", attrs["N"]), ("accuracy_level", 4), ("bits", 4), ("block_size", 32))])
    PROBE.mkdir(parents=True, exist_ok=True)
    for f in BUILT.iterdir():
        if not f.name.startswith("model.onnx"):
            shutil.copy(f, PROBE / f.name)
    onnx.save(model, str(PROBE / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    return PROBE


def main(rounds: int) -> None:
    graphs = {"optimized": OPTIMIZED, "pruned-optimized (built)": BUILT, "pruned-optimized, 4-bit LM head": build_probe()}
    models = {name: OnnxCausalLM(path, session_options, "CPUExecutionProvider") for name, path in graphs.items()}
    # as shipped: lookup loads only the filled graph (models/decoding.py); its plain steps are what the bench's plain row times
    models["pruned-optimized (built), filled graph, lookup off"] = OnnxCausalLM(BUILT, session_options, "CPUExecutionProvider", filled=True)
    models["pruned-optimized (built), filled graph, lookup off"].decoder.use_lookup(False)
    tokenizer = AutoTokenizer.from_pretrained(BUILT)
    ids = tokenizer(generation_prompt(tokenizer, 128), return_tensors="pt").input_ids
    texts, rates = {}, {name: [] for name in models}
    for name, model in models.items():
        texts[name] = model.decoder.generate(ids, 64, ignore_eos=True)[0, ids.shape[1]:].tolist()
    for _ in range(rounds):
        for name, model in models.items():
            started = time.perf_counter(); model.decoder.generate(ids, 1, ignore_eos=True); first = time.perf_counter() - started
            started = time.perf_counter(); model.decoder.generate(ids, 65, ignore_eos=True); total = time.perf_counter() - started
            rates[name].append(64 / (total - first))
    base = statistics.median(rates["optimized"])
    for name, values in rates.items():
        print(f"{name}: decode {statistics.median(values):.1f} tok/s (range {min(values):.1f}-{max(values):.1f}), "
              f"{statistics.median(values) / base:.2f}x optimized")
    built, probe = texts["pruned-optimized (built)"], texts["pruned-optimized, 4-bit LM head"]
    same = next((i for i, (a, b) in enumerate(zip(built, probe)) if a != b), len(built))
    print(f"4-bit LM head: the built graph's first {same} of 64 greedy tokens")
    per_round = [p / o for p, o in zip(rates["pruned-optimized, 4-bit LM head"], rates["optimized"])]
    print("per-round ratio, 4-bit head vs optimized:", " ".join(f"{r:.2f}" for r in per_round))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
