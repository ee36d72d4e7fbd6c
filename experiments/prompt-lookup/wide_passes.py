"""Issue 53: does prompt lookup keep the text exactly when no pass is one position wide, and what does
that cost? On the built `optimized`: plain decoding (one position per pass), plain with a filler position
(`GreedyDecoder.wide_steps`: every pass ≥ 2 wide) and lookup with wide steps, on the bench's chat prompt and
a reading-comprehension prompt; texts compared, decode rates over interleaved rounds (64 tokens, end of
sequence ignored). Its results (results.md) were measured with the filler *token* that `wide_steps` then sent
through the whole network; `wide_steps` now runs the filled graph instead (attention_filler.py: the same
tokens, 9 of 9 prompts, at less cost), so a run of this script today measures that.

    python experiments/prompt-lookup/wide_passes.py [rounds]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from models import generation
from models.catalog import default_preset
from models.decoding import PromptLookup
from models.runners import load_runner
from optimize.bench.run import generation_prompt
from optimize.evaluate import reading

MODES = {"plain": (False, None), "plain, wide steps": (True, None), "lookup, wide steps": (True, PromptLookup())}


def main(rounds: int) -> None:
    runner = load_runner("generation", "optimized", "onnxruntime", default_preset("generation").built_dir("optimized"))
    decoder = runner.model.decoder
    question = reading.questions()[3]
    prompts = {"chat (the bench's)": generation_prompt(runner.tokenizer, 128),
               "reading comprehension": reading.PROMPT.format(context=question.context, question=question.question)}

    def run(mode: str, ids) -> tuple[list[int], float]:
        decoder.wide_steps, decoder.lookup = MODES[mode]
        stamps = []

        class Stamps:
            def put(self, value):
                if value.ndim == 1:
                    stamps.append(time.perf_counter())

            def end(self):
                pass

        out = decoder.generate(ids, 64, streamer=Stamps(), ignore_eos=True)
        return out[0].tolist(), 63 / (stamps[-1] - stamps[0])

    for name, prompt in prompts.items():
        ids = generation.preprocess(runner.tokenizer, prompt)
        texts = {mode: run(mode, ids)[0] for mode in MODES}
        rates = {mode: [] for mode in MODES}
        for index in range(rounds):
            order = list(MODES)[index % 3:] + list(MODES)[:index % 3]
            for mode in order:
                rates[mode].append(run(mode, ids)[1])
        plain = np.median(rates["plain"])
        print(f"{name}: lookup text == wide plain text: {texts['lookup, wide steps'] == texts['plain, wide steps']}; "
              f"wide plain == plain: {texts['plain, wide steps'] == texts['plain']}; lookup drafts {decoder.last_lookup}")
        print("  " + ", ".join(f"{mode} {np.median(v):.1f} tokens/s ({np.median(v) / plain:.2f}x)" for mode, v in rates.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
