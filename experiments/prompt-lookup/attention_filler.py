"""Issue 53: a filler row inside attention only. `wide_steps` makes lookup exact by sending a filler token
through the whole network (every MatMulNBits two rows wide). GroupQueryAttention is the only op whose rows
depend on a pass's width, so here each layer pads GroupQueryAttention's packed QKV input with one zero row
(Pad) and drops that row from its output (Slice); the decoder binds an attention mask one position longer,
so the kernel's sequence lengths count the filler and its key/value lands after the real positions (the
shared buffer has room; the next pass overwrites it). Every attention pass is then ≥ 2 rows wide.

On the built `optimized`, a graph copy beside it (`model-filled.onnx`, the same weights file; removed at the end): texts of
plain decoding and of lookup on the filled graph compared (the chat prompt and reading prompts), then decode
rates, interleaved rounds, 64 tokens, end-of-sequence ignored: plain on the shipped graph, `wide_steps` on
the shipped graph, plain and lookup on the filled graph, for chat, reading and rewrite prompts.

    python experiments/prompt-lookup/attention_filler.py [rounds]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper

from models import generation
from models.catalog import default_preset
from models.decoding import GreedyDecoder, PromptLookup
from models.runners import load_runner
from optimize.bench.run import generation_prompt
from optimize.evaluate import reading

sys.path.insert(0, str(Path(__file__).parent))
from measure import prompts as lookup_prompts  # noqa: E402


def filled_graph(source: Path) -> Path:
    """A copy of `source` whose every GroupQueryAttention sees one more (zero) row than the pass has. Saved
    beside it: ONNX Runtime reads external data only from the model's own folder."""
    model = onnx.load(source, load_external_data=False)
    graph = model.graph
    graph.initializer.extend([
        numpy_helper.from_array(np.array([0, 0, 0, 0, 1, 0], dtype=np.int64), "filler/pads"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "filler/starts"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "filler/ends"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "filler/axes")])
    nodes = []
    for node in graph.node:
        if node.op_type != "GroupQueryAttention":
            nodes.append(node)
            continue
        query, output = node.input[0], node.output[0]
        node.input[0], node.output[0] = f"{node.name}/filled_query", f"{node.name}/filled_output"
        nodes += [helper.make_node("Pad", [query, "filler/pads"], [node.input[0]], name=f"{node.name}/FillerPad"),
                  node,
                  helper.make_node("Slice", [node.output[0], "filler/starts", "filler/ends", "filler/axes"], [output],
                                   name=f"{node.name}/FillerSlice")]
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, source.with_name("model-filled.onnx"))
    return source.with_name("model-filled.onnx")


class FilledDecoder(GreedyDecoder):
    """The project's decoder on a filled graph: the mask counts the filler, the buffers leave it room."""

    def _bind_step_inputs(self, binding, ids: np.ndarray, past_length: int) -> None:
        binding.bind_cpu_input("input_ids", ids)
        binding.bind_cpu_input("attention_mask", np.ones((1, past_length + ids.shape[1] + 1), dtype=np.int64))

    def _shared_steps(self, max_length: int, prefix_kv=None):
        return super()._shared_steps(max_length + 1, prefix_kv)


def decode_rate(decoder: GreedyDecoder, ids, lookup: PromptLookup | None = None, wide: bool = False) -> tuple[float, list[int]]:
    decoder.lookup, decoder.wide_steps = lookup, wide
    stamps = []

    class Stamps:
        def put(self, value):
            if value.ndim == 1:
                stamps.append((time.perf_counter(), len(value)))

        def end(self):
            pass

    tokens = decoder.generate(ids, 64, streamer=Stamps(), ignore_eos=True)[0].tolist()
    decoder.lookup, decoder.wide_steps = None, False
    return sum(n for _, n in stamps[1:]) / (stamps[-1][0] - stamps[0][0]), tokens


def main(rounds: int) -> None:
    runner = load_runner("generation", "optimized", "onnxruntime", default_preset("generation").built_dir("optimized"))
    shipped = runner.model.decoder
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    path = filled_graph(runner.path / "model.onnx")
    try:
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        _, heads, _, dim = shipped.empty_past.shape
        filled = FilledDecoder(session, shipped.eos_token_ids, heads, dim, shares_kv_buffer=True)
        encode = lambda prompt: generation.preprocess(runner.tokenizer, prompt)  # noqa: E731

        checked = [generation_prompt(runner.tokenizer, 128)] + [
            reading.PROMPT.format(context=q.context, question=q.question) for q in reading.questions()[:8]]
        same_lookup = same_shipped = same_wide = 0
        for prompt in checked:
            plain = decode_rate(filled, encode(prompt))[1]
            same_lookup += plain == decode_rate(filled, encode(prompt), PromptLookup())[1]
            same_shipped += plain == decode_rate(shipped, encode(prompt))[1]
            same_wide += plain == decode_rate(shipped, encode(prompt), wide=True)[1]
        print(f"filled graph, lookup text == plain text: {same_lookup}/{len(checked)}; filled plain == shipped plain: "
              f"{same_shipped}/{len(checked)}; == shipped with wide steps: {same_wide}/{len(checked)}")

        contenders = {"shipped, plain": lambda ids: decode_rate(shipped, ids)[0],
                      "shipped, wide steps": lambda ids: decode_rate(shipped, ids, wide=True)[0],
                      "filled, plain": lambda ids: decode_rate(filled, ids)[0],
                      "filled, lookup": lambda ids: decode_rate(filled, ids, PromptLookup())[0]}
        timed = lookup_prompts()
        for kind in ("chat", "reading", "rewrite"):
            for prompt in timed[kind][:2]:
                ids = encode(prompt)
                rates = {name: [] for name in contenders}
                for index in range(rounds):
                    order = list(contenders)[index % 4:] + list(contenders)[:index % 4]
                    for name in order:
                        rates[name].append(contenders[name](ids))
                base = np.median(rates["shipped, plain"])
                print(f"{kind} ({ids.shape[1]} tokens): " + ", ".join(
                    f"{name} {np.median(v):.1f} tok/s ({np.median(v) / base:.2f}x)" for name, v in rates.items()), flush=True)
    finally:
        path.unlink()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
