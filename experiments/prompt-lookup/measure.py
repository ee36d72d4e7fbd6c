"""Issue 53: prompt lookup against plain greedy decoding, the same ONNX variant, side by side.

For each prompt kind (chat; reading comprehension; rewrite), each variant decodes with lookup off
and on in alternating order, `rounds` times; reported: decode tokens/s p50 each way, their ratio,
the acceptance rate, and whether the texts are identical (stopping at end-of-sequence, as the app).

    python experiments/prompt-lookup/measure.py [--rounds 5] [--variants optimized pruned-optimized]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from models import generation  # noqa: E402
from models.catalog import default_preset  # noqa: E402
from models.decoding import PromptLookup  # noqa: E402
from models.runners import load_runner  # noqa: E402
from optimize.evaluate import squad  # noqa: E402
from optimize.evaluate.reading import PROMPT  # noqa: E402

CHAT = "Write a short story about a robot who learns to bake bread."


def prompts() -> dict[str, list[str]]:
    """Reading paragraphs from the QA dev file's training articles (0-8): never the reading gate's set."""
    articles = squad.load_articles()
    examples = [e for e in squad.examples(articles, tuple(range(9))) if e.answers][::150][:4]
    reading = [PROMPT.format(context=e.context, question=e.question) for e in examples]
    rewrite = [f"Rewrite the following paragraph in plain words, keeping every fact:\n\n{e.context}" for e in examples[:2]]
    return {"chat": [CHAT], "reading": reading, "rewrite": rewrite}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", nargs="+", default=["optimized", "pruned-optimized"])
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    preset, out = default_preset("generation"), {}
    for variant in args.variants:
        runner = load_runner("generation", variant, "onnxruntime", preset.built_dir(variant))
        decoder = runner.model.decoder
        for kind, texts in prompts().items():
            speeds, identical, acceptance = {"plain": [], "lookup": []}, [], []
            for prompt in texts:
                results = {}
                for mode in ("plain", "lookup"):  # identity: stops at end-of-sequence, as the app does
                    decoder.lookup = PromptLookup() if mode == "lookup" else None
                    results[mode] = generation.generate(runner, prompt, args.tokens)
                identical.append(results["plain"]["text"] == results["lookup"]["text"])
                for round_index in range(args.rounds):  # timing: exactly `tokens` new tokens, order alternating
                    for mode in (("plain", "lookup") if round_index % 2 == 0 else ("lookup", "plain")):
                        decoder.lookup = PromptLookup() if mode == "lookup" else None
                        timed = generation.generate(runner, prompt, args.tokens, ignore_eos=True)
                        speeds[mode].append(timed["decode_tokens_per_s"])
                        if mode == "lookup":
                            acceptance.append(timed["draft"]["acceptance"])
            plain, lookup = statistics.median(speeds["plain"]), statistics.median(speeds["lookup"])
            out[f"{variant}/{kind}"] = {"plain_decode_tok_s": round(plain, 1), "lookup_decode_tok_s": round(lookup, 1),
                                        "ratio": round(lookup / plain, 3), "acceptance": round(statistics.median(acceptance), 3),
                                        "identical_texts": f"{sum(identical)}/{len(identical)}"}
            print(variant, kind, json.dumps(out[f"{variant}/{kind}"]), flush=True)
    Path(__file__).with_name("last-run.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
