"""Issue 53: how long lookup's drafts should be. On the filled graph lookup keeps the text whatever it drafts, so the
drafting policy changes speed only, never a gate. The pass prices (pass_width.py) are uneven: 2 positions cost
1.16x a one-position step on `optimized`, 3 cost 1.50x, 4 cost 1.58x, so a first draft of 2 tokens (3 positions,
the default) may be the dearest choice. The rule is in results.md ("drafting policy"), fixed before its runs.

    python experiments/prompt-lookup/draft_policy.py [rounds] [variant ...]
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

POLICIES = {"default": PromptLookup(), "start 1": PromptLookup(start_tokens=1), "start 3": PromptLookup(start_tokens=3),
            "at most 4": PromptLookup(draft_tokens=4)}


def main(rounds: int, variants: list[str]) -> None:
    for variant in variants:
        runner = load_runner("generation", variant, "onnxruntime", default_preset("generation").built_dir(variant))
        decoder = runner.model.decoder
        ratios: dict[str, dict[str, list[float]]] = {name: {} for name in POLICIES if name != "default"}
        for kind, texts in validation_prompts().items():
            for prompt in texts:
                ids = generation.preprocess(runner.tokenizer, prompt)
                rates = {name: [] for name in POLICIES}
                for index in range(rounds):
                    names = list(POLICIES)[index % len(POLICIES):] + list(POLICIES)[:index % len(POLICIES)]
                    for name in names:
                        rates[name].append(decode_rate(decoder, ids, POLICIES[name], wide=True)[0])
                default = np.median(rates["default"])
                for name in ratios:
                    ratios[name].setdefault(kind, []).append(round(float(np.median(rates[name]) / default), 3))
                print(variant, kind, ids.shape[1], {name: ratios[name][kind][-1] for name in ratios}, flush=True)
        for name, measured in ratios.items():
            copying = measured["reading"] + measured["rewrite"]
            print(json.dumps({"variant": variant, "policy": name, "copying_median": round(float(np.median(copying)), 3),
                              "chat": measured["chat"][0], "ratios": measured}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2:] or ["pruned-optimized", "optimized"])
