"""Issue 53: a filler row inside attention only (models/attention_filler.py, what `wide_steps` runs). The first
version of this script (fifteenth session, results.md) built the filled graph itself and compared it with the
filler *token* that `wide_steps` then sent through every weight: the same tokens on 9 of 9 prompts. `wide_steps`
now is the filled graph, so this script measures it through the product's decoder.

On a built ONNX generation variant: texts of plain decoding and of lookup, both with `wide_steps`, compared (the
chat prompt and 8 reading prompts), then decode rates, interleaved rounds, 64 tokens, end-of-sequence ignored:
plain on the shipped graph, and plain and lookup with `wide_steps`, for chat, reading and rewrite prompts.

    python experiments/prompt-lookup/attention_filler.py [rounds] [variant]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from models import generation
from models.catalog import default_preset
from models.decoding import GreedyDecoder, PromptLookup
from models.runners import load_runner
from optimize.bench.run import generation_prompt
from optimize.evaluate import reading

sys.path.insert(0, str(Path(__file__).parent))
from measure import prompts as lookup_prompts  # noqa: E402


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


def main(rounds: int, variant: str) -> None:
    runner = load_runner("generation", variant, "onnxruntime", default_preset("generation").built_dir(variant))
    decoder = runner.model.decoder
    encode = lambda prompt: generation.preprocess(runner.tokenizer, prompt)  # noqa: E731

    checked = [generation_prompt(runner.tokenizer, 128)] + [
        reading.PROMPT.format(context=q.context, question=q.question) for q in reading.questions()[:8]]
    same_lookup = same_plain = 0
    for prompt in checked:
        wide = decode_rate(decoder, encode(prompt), wide=True)[1]
        same_lookup += wide == decode_rate(decoder, encode(prompt), PromptLookup(), wide=True)[1]
        same_plain += wide == decode_rate(decoder, encode(prompt))[1]
    print(f"{variant}, filled graph: lookup text == its plain text: {same_lookup}/{len(checked)}; "
          f"== the one-row plain text: {same_plain}/{len(checked)}")

    contenders = {"shipped, plain": lambda ids: decode_rate(decoder, ids)[0],
                  "filled, plain": lambda ids: decode_rate(decoder, ids, wide=True)[0],
                  "filled, lookup": lambda ids: decode_rate(decoder, ids, PromptLookup(), wide=True)[0]}
    timed = lookup_prompts()
    for kind in ("chat", "reading", "rewrite"):
        for prompt in timed[kind][:2]:
            ids = encode(prompt)
            rates = {name: [] for name in contenders}
            for index in range(rounds):
                order = list(contenders)[index % 3:] + list(contenders)[:index % 3]
                for name in order:
                    rates[name].append(contenders[name](ids))
            base = np.median(rates["shipped, plain"])
            print(f"{kind} ({ids.shape[1]} tokens): " + ", ".join(
                f"{name} {np.median(v):.1f} tok/s ({np.median(v) / base:.2f}x)" for name, v in rates.items()), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2] if len(sys.argv) > 2 else "optimized")
