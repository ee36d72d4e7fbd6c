"""Issue 53: which ONNX generation variants decode with exact prompt lookup by default. The rule is in
results.md ("the rule"), fixed before its runs: filled graph + lookup against the shipped one-row plain
decoding, interleaved rounds on the validation prompts of measure.py.

    python experiments/prompt-lookup/default_rule.py [rounds] [variant ...]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).parent)]
from models import generation  # noqa: E402
from models.catalog import default_preset  # noqa: E402
from models.decoding import PromptLookup  # noqa: E402
from models.runners import load_runner  # noqa: E402
from attention_filler import decode_rate  # noqa: E402
from measure import prompts as validation_prompts  # noqa: E402

READING_FLOOR, CHAT_FLOOR = 1.15, 0.95


def ratios(variant: str, rounds: int) -> dict[str, list[float]]:
    runner = load_runner("generation", variant, "onnxruntime", default_preset("generation").built_dir(variant))
    decoder = runner.model.decoder
    out: dict[str, list[float]] = {}
    for kind, texts in validation_prompts().items():
        for prompt in texts:
            ids = generation.preprocess(runner.tokenizer, prompt)
            plain, lookup = [], []
            for index in range(rounds):
                first_plain = index % 2 == 0
                for is_plain in (first_plain, not first_plain):
                    if is_plain:
                        plain.append(decode_rate(decoder, ids)[0])
                    else:
                        lookup.append(decode_rate(decoder, ids, PromptLookup(), wide=True)[0])
            out.setdefault(kind, []).append(round(float(np.median(lookup) / np.median(plain)), 3))
            print(variant, kind, ids.shape[1], "tokens:", out[kind][-1], flush=True)
    return out


def main(rounds: int, variants: list[str]) -> None:
    for variant in variants:
        measured = ratios(variant, rounds)
        reading, chat = float(np.median(measured["reading"])), measured["chat"][0]
        on = reading >= READING_FLOOR and chat >= CHAT_FLOOR
        print(json.dumps({"variant": variant, "ratios": measured, "reading_median": round(reading, 3), "chat": chat,
                          "lookup_by_default": on}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7, sys.argv[2:] or ["optimized", "pruned-optimized"])
