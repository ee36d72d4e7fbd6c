"""Fewer nodes around each folded MatMulNBits: today's [x, s, s] input takes Reshape + ReduceSum + Pad +
Concat per distinct input (4 of every 7 nodes of `optimized`'s step). Graph surgery on the built graph:

- `matmul-sums`: MatMul(x, S) + Concat([x, s', s']), S a K × 32·⌈K/1024⌉ 0/1 matrix whose padding
  columns are zero (2 nodes; S is one constant per K, read from cache);
- `gate-up`: each layer's gate and up MatMulNBits (same input) as one call over both weights, then a
  Split: the profile puts ~10 µs of fixed cost on every MatMulNBits call at one row;
- `matmul-sums+gate-up`: both.

Each is written beside the built files (a copy of its files) and decoded in one process with the
built graph, interleaved rounds, the bench's chat prompt, 64 new tokens (end-of-sequence ignored).
Texts are compared with the built graph's (lossy either way: the sums' rounding order moves).

    PYTHONPATH=. python experiments/decode-step-profile/fewer_nodes.py [ROUNDS]
"""
from __future__ import annotations

import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

BUILT = Path("artifacts/generation-smollm2/optimized")
BLOCK = 32


def rewrite(form: str) -> Path:
    import onnx
    from onnx import helper, numpy_helper

    out = BUILT.parent / f"fewer-nodes-{form}"  # beside the build: ONNX Runtime refuses weights outside the model folder
    out.mkdir(exist_ok=True)
    for item in BUILT.iterdir():
        if item.name != "model.onnx" and not (out / item.name).exists():
            shutil.copy(item, out / item.name)  # copies: onnx refuses hard-linked weights
    fuse = "gate-up" in form
    model = onnx.load(str(BUILT / "model.onnx"), load_external_data=fuse)
    graph = model.graph
    if fuse:
        fuse_gate_up(graph)
        if form == "gate-up":
            return save(model, out, fuse)
    producer = {output: node for node in graph.node for output in node.output}
    sum_matrices = {}  # one 0/1 matrix per K, shared by every input of that width
    removed, inserts = set(), {}
    for node in graph.node:
        if node.op_type != "Concat" or not node.name.endswith("/Concat"):
            continue
        x, padded, _ = node.input
        pad = producer[padded]
        reduce = producer[pad.input[0]]
        reshape = producer[reduce.input[0]]
        pads = numpy_helper.to_array(next(t for t in graph.initializer if t.name == pad.input[1]))
        blocks = numpy_helper.to_array(next(t for t in graph.initializer if t.name == reshape.input[1]))
        sums, width = int(blocks[-2]), int(blocks[-2] + pads[-1])
        K = sums * BLOCK
        matrix = f"/fewer/block_sums_{K}"  # (a Concat with constant zeros for the Pad does not work: no broadcasting)
        if matrix not in sum_matrices:
            S = np.zeros([K, width], np.float32)
            S[np.arange(K), np.arange(K) // BLOCK] = 1
            sum_matrices[matrix] = numpy_helper.from_array(S, matrix)
        inserts[node.name] = helper.make_node("MatMul", [x, matrix], [padded], name=node.name.replace("/Concat", "/SumsMatMul"))
        removed.update([pad.name, reduce.name, reshape.name])
    kept = []
    for node in graph.node:
        if node.name in removed:
            continue
        if node.name in inserts:
            kept.append(inserts[node.name])
        kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    graph.initializer.extend(sum_matrices.values())
    print(f"{form}: {len(kept)} nodes")
    return save(model, out, fuse)


def save(model, out: Path, with_weights: bool) -> Path:
    import onnx

    if with_weights:  # weights rewritten: a data file of its own
        (out / "model.onnx.data").unlink(missing_ok=True)
        onnx.save(model, str(out / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model.onnx.data")
    else:
        onnx.save(model, str(out / "model.onnx"))
    return out


def fuse_gate_up(graph, suffix: str = "/MatMulNBits") -> None:
    """gate_proj and up_proj of each layer as one MatMulNBits over their stacked rows, then a Split (`suffix`: how
    the graph names its MatMulNBits nodes; `pruned-optimized`'s are `/MatMul_Q8`)."""
    from onnx import helper, numpy_helper

    initializers = {tensor.name: tensor for tensor in graph.initializer}
    nodes = list(graph.node)
    by_name = {node.name: node for node in nodes}
    replaced, dropped = {}, set()
    for node in nodes:
        if not node.name.endswith(f"/mlp/gate_proj{suffix}"):
            continue
        up = by_name[node.name.replace("gate_proj", "up_proj")]
        prefix = node.name.replace(f"/gate_proj{suffix}", "/gate_up_proj")
        stacked = []
        for index, key in list(((1, "B"), (2, "scales"), (3, "zero_points")))[:len(node.input) - 1]:
            arrays = [numpy_helper.to_array(initializers[n.input[index]]) for n in (node, up)]
            stacked.append(numpy_helper.from_array(np.concatenate(arrays, axis=0), f"{prefix}/{key}"))
            dropped.update(n.input[index] for n in (node, up))
        graph.initializer.extend(stacked)
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        attributes["N"] *= 2
        fused = helper.make_node("MatMulNBits", [node.input[0], *(t.name for t in stacked)], [f"{prefix}/output"],
                                 name=f"{prefix}/MatMulNBits", domain="com.microsoft", **attributes)
        split = helper.make_node("Split", [f"{prefix}/output"], [node.output[0], up.output[0]], name=f"{prefix}/Split",
                                 axis=-1, num_outputs=2)
        replaced[node.name], replaced[up.name] = [fused, split], []
    kept = [tensor for tensor in graph.initializer if tensor.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    rebuilt = [new for node in nodes for new in replaced.get(node.name, [node])]
    del graph.node[:]
    graph.node.extend(rebuilt)


def main() -> None:
    from transformers import AutoTokenizer

    from models.decoding import OnnxCausalLM
    from models.runners import session_options
    from optimize.bench.run import generation_prompt

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    tokenizer = AutoTokenizer.from_pretrained(BUILT)
    ids = torch.tensor([tokenizer.apply_chat_template([{"role": "user", "content": generation_prompt(tokenizer, 128)}],
                                                      add_generation_prompt=True)])
    contenders = {"built": BUILT, **{form: rewrite(form) for form in ("matmul-sums", "gate-up", "matmul-sums+gate-up")}}
    models = {name: OnnxCausalLM(path, session_options, "CPUExecutionProvider") for name, path in contenders.items()}
    texts, rates = timed_rounds(models, ids, rounds)
    print("| graph | decode tok/s (median) | vs built (median of per-round ratios) | per-round range | same 64 tokens as built |")
    print("|---|---|---|---|---|")
    print_rows(texts, rates, "built", "built")


def timed_rounds(models: dict, ids: torch.Tensor, rounds: int) -> tuple[dict, dict]:
    """(each decoder's 64 greedy tokens, its decode tokens/s per round): the decoders in one process, each round
    in a rotated order, decoding timed as 64 tokens minus a one-token prefill."""
    texts, rates = {}, {name: [] for name in models}
    for name, model in models.items():  # warm
        texts[name] = model.decoder.generate(ids, 64, ignore_eos=True)[0, ids.shape[1]:].tolist()
    for round_ in range(rounds):
        order = list(models)[round_ % len(models):] + list(models)[:round_ % len(models)]
        for name in order:
            decoder = models[name].decoder
            start = time.perf_counter()
            decoder.generate(ids, 1, ignore_eos=True)
            prefill = time.perf_counter() - start
            start = time.perf_counter()
            decoder.generate(ids, 64, ignore_eos=True)
            rates[name].append(63 / (time.perf_counter() - start - prefill))
    return texts, rates


def print_rows(texts: dict, rates: dict, reference: str, same_as: str) -> None:
    """One Markdown row per decoder: median tokens/s, its per-round ratio to `reference`, tokens equal to `same_as`'s."""
    for name, values in rates.items():
        ratios = [v / r for v, r in zip(values, rates[reference])]
        same = sum(a == b for a, b in zip(texts[name], texts[same_as]))
        print(f"| {name} | {statistics.median(values):.1f} | {statistics.median(ratios):.3f}x | "
              f"{min(ratios):.3f}-{max(ratios):.3f} | {same}/64 |")


if __name__ == "__main__":
    main()
