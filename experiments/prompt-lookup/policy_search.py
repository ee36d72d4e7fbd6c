"""Issue 53: choose a drafting policy by replaying each validation prompt's exact text under every candidate, priced at
pass prices measured at the start of the run (oracle.py says why a replay is exact). The rule, fixed before the run:
RULE-policy-search.md.

    PYTHONPATH=. python experiments/prompt-lookup/policy_search.py > experiments/prompt-lookup/policy-search.json
"""
from __future__ import annotations

import itertools
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from models import generation  # noqa: E402
from models.catalog import default_preset  # noqa: E402
from models.decoding import PromptLookup  # noqa: E402
from models.runners import load_runner  # noqa: E402
from optimize.bench.run import REWRITE_PROMPT  # noqa: E402
from optimize.evaluate import reading, squad  # noqa: E402
from optimize.prompts import TEMPLATES  # noqa: E402
from measure import CHAT  # noqa: E402
from oracle import replay  # noqa: E402
from pass_width import pass_prices  # noqa: E402

VARIANTS = ("pruned-optimized", "optimized")
WIDTHS = tuple(range(1, 14))  # draft_tokens up to 12, plus the model's own next token
TOPICS = ("a lighthouse", "winter gardening", "the bicycle", "a city library", "learning to swim")
GRID = dict(max_ngram=(3, 4), min_ngram=(1, 2), draft_tokens=(4, 8, 12), start_tokens=(1, 2, 3, 4),
            backoff=(0, 2, 4, 8), max_backoff=(8, 32))


def validation_prompts() -> dict[str, list[str]]:
    examples, seen = [], set()
    for example in [e for e in squad.examples(squad.load_articles(), tuple(range(9))) if e.answers][::40]:
        if example.context not in seen:
            seen.add(example.context)
            examples.append(example)
    examples = examples[:24]
    return {"reading": [reading.PROMPT.format(context=e.context, question=e.question) for e in examples],
            "rewrite": [REWRITE_PROMPT.format(context=e.context) for e in examples[:8]],
            "chat": [CHAT] + [template.format(topic=topic) for template, topic in zip(TEMPLATES[4:9], TOPICS)]}


def texts(runner, prompts: dict[str, list[str]]) -> dict[str, list[tuple[list[int], list[int]]]]:
    decoder = runner.model.decoder
    decoder.lookup, decoder.wide_steps = None, True  # the filled graph's text: the one lookup keeps exactly
    out = {}
    for kind, kind_prompts in prompts.items():
        out[kind] = []
        for prompt in kind_prompts:
            ids = generation.preprocess(runner.tokenizer, prompt)
            tokens = decoder.generate(ids, 64, ignore_eos=True)[0].tolist()
            out[kind].append((tokens[: ids.shape[1]], tokens[ids.shape[1]:]))
    return out


def cost(schedule: list[int], prices: dict[int, float]) -> float:
    return sum(prices[width] for width in schedule)


def main() -> None:
    prompts = validation_prompts()
    measured = {}
    for variant in VARIANTS:
        runner = load_runner("generation", variant, "onnxruntime", default_preset("generation").built_dir(variant))
        measured[variant] = {"prices": pass_prices(runner.model.decoder, WIDTHS, filled=True), "texts": texts(runner, prompts)}
        print(variant, measured[variant]["prices"], file=sys.stderr, flush=True)
    candidates = [PromptLookup(**dict(zip(GRID, values))) for values in itertools.product(*GRID.values())]

    def costs(policy: PromptLookup, variant: str) -> dict[str, list[float]]:
        prices = measured[variant]["prices"]
        return {kind: [cost(replay(p, w, policy, oracle=False), prices) for p, w in pairs]
                for kind, pairs in measured[variant]["texts"].items()}

    default = {variant: costs(PromptLookup(), variant) for variant in VARIANTS}
    rows = []
    for policy in candidates:
        speedups = {}
        for variant in VARIANTS:
            mine = costs(policy, variant)
            speedups[variant] = {kind: [d / m for d, m in zip(default[variant][kind], mine[kind])] for kind in mine}
        pruned, optimized = speedups["pruned-optimized"], speedups["optimized"]
        rows.append({"policy": asdict(policy),
                     "pruned_copying_median": round(float(np.median(pruned["reading"] + pruned["rewrite"])), 4),
                     "pruned_chat_min": round(min(pruned["chat"]), 4),
                     "optimized_copying_median": round(float(np.median(optimized["reading"] + optimized["rewrite"])), 4),
                     "optimized_chat_min": round(min(optimized["chat"]), 4)})
    eligible = [r for r in rows if r["pruned_chat_min"] >= 1 / 1.01 and r["optimized_copying_median"] >= 1.0]
    chosen = max(eligible, key=lambda r: r["pruned_copying_median"]) if eligible else None  # max keeps the first of ties
    oracle = {variant: {kind: round(float(np.median([d / cost(replay(p, w, PromptLookup(), oracle=True), measured[variant]["prices"])
                                                      for d, (p, w) in zip(default[variant][kind], pairs)])), 4)
                        for kind, pairs in measured[variant]["texts"].items()} for variant in VARIANTS}
    print(json.dumps({"prices": {v: measured[v]["prices"] for v in VARIANTS},
                      "prompts": {kind: len(texts_) for kind, texts_ in prompts.items()},
                      "oracle_over_default_median": oracle, "chosen": chosen,
                      "passes_rule": bool(chosen and chosen["pruned_copying_median"] >= 1.05),
                      "top10": sorted(rows, key=lambda r: -r["pruned_copying_median"])[:10]}, indent=1))


if __name__ == "__main__":
    main()
