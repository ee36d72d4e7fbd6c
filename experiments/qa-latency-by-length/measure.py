"""Issue 31: is a QA variant's model time through the app the same as in-process, once a pasted
paragraph spans two windows? Every variant, held-out Wikipedia paragraphs (SQuAD test articles)
joined and cut to ~N context tokens, timed in one process three ways, shuffled every round, 50 ms
idle before each call: `in-process` (qa.answer on this thread), `showdown` (its model thread and
turn) and `app` (the app's /qa over HTTP, served as `python app.py` serves). Prints
`latency_ms.model` p50 per variant and way, and pruned-optimized's speedup over the baseline.

    python experiments/qa-latency-by-length/measure.py --tokens 420 --tokens 550
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import models  # noqa: F401,E402 - bounds thread spinning before torch loads
from models import qa  # noqa: E402
from models.catalog import VARIANTS, default_preset  # noqa: E402
from models.showdown import Showdown  # noqa: E402

QUESTION = "What did the army do?"


def wikipedia_context(tokenizer, tokens: int) -> str:
    """Held-out paragraphs joined, cut at the word that reaches ~`tokens` context tokens."""
    from optimize.evaluate import squad

    articles = squad.load_articles()
    words = " ".join(p["context"] for i in squad.ArticleSplit().test for p in articles[i]["paragraphs"]).split()
    low, high = 1, len(words)
    while low < high:
        middle = (low + high) // 2
        if len(tokenizer(" ".join(words[:middle]), add_special_tokens=False)["input_ids"]) < tokens:
            low = middle + 1
        else:
            high = middle
    return " ".join(words[:low])


def main() -> None:
    import httpx

    from app import serve, serving_settings
    from optimize.bench.app_timing import free_port, http_api_call

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, action="append", help="context tokens, repeatable (default 420, 550)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--ways", default="in-process,showdown,app")
    args = parser.parse_args()
    showdown = Showdown(presets={"qa": default_preset("qa")})
    showdown.serve_models_first(*serving_settings())
    runners = {v: showdown.runner("qa", v) for v in VARIANTS}
    tokenizer = runners["baseline"].tokenizer
    port = free_port()
    demo = serve(showdown, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    ways = args.ways.split(",")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}/", timeout=120) as http:
        for tokens in args.tokens or [420, 550]:
            context = wikipedia_context(tokenizer, tokens)
            calls = {}
            for v in VARIANTS:
                calls[(v, "in-process")] = lambda v=v: qa.answer(runners[v], QUESTION, context)
                calls[(v, "showdown")] = lambda v=v: showdown.answer(context, QUESTION, v)
                calls[(v, "app")] = lambda v=v: http_api_call(http, "qa", [context, QUESTION, v, False])
            calls = {key: call for key, call in calls.items() if key[1] in ways}
            windows = calls[next(iter(calls))]()["windows"]  # and a warm-up for each below
            for call in calls.values():
                call()
            times: dict[tuple[str, str], list[float]] = {key: [] for key in calls}
            shuffler = random.Random(0)
            for _ in range(args.rounds):
                for key in shuffler.sample(list(calls), len(calls)):
                    time.sleep(0.05)
                    times[key].append(calls[key]()["latency_ms"]["model"])
            p50 = {key: statistics.median(values) for key, values in times.items()}
            print(f"\n~{tokens} context tokens, {windows} windows; model time p50 (ms), {args.rounds} rounds\n")
            print("| variant | " + " | ".join(ways) + " | app / in-process |" if "app" in ways and "in-process" in ways
                  else "| variant | " + " | ".join(ways) + " |")
            print("|---" * (len(ways) + 1 + ("app" in ways and "in-process" in ways)) + "|")
            for v in VARIANTS:
                row = [f"{p50[(v, way)]:.1f}" for way in ways]
                if "app" in ways and "in-process" in ways:
                    row.append(f"{p50[(v, 'app')] / p50[(v, 'in-process')]:.2f}")
                print(f"| {v} | " + " | ".join(row) + " |")
            for way in ways:
                print(f"pruned-optimized vs baseline, {way}: {p50[('baseline', way)] / p50[('pruned-optimized', way)]:.2f}x")
    demo.close()


if __name__ == "__main__":
    main()
