"""Issue 47's measurement: through `python app.py`, each variant's time against the same call in this
process under the same idle gap (the product's own side-by-side timing,
optimize.bench.app_timing.app_against_in_process: paired calls, the client off the app's cores), and
the speedups a click shows (`/compare_qa`, each variant's median of three calls, a visitor's
pause before each click) against `python -m optimize report`'s, read from reports/qa.json.

    python experiments/app-timing/measure_app_vs_in_process.py [--rounds 9] [--clicks 9]

Run it on a quiet machine, right after `python -m optimize report --task qa` for the last comparison.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import models  # noqa: F401,E402 - bounds thread spinning before torch loads
from models.catalog import default_preset  # noqa: E402
from models.reports import REPORTS_DIR  # noqa: E402
from models.showdown import Showdown  # noqa: E402
from optimize.bench.app_timing import (SideBySideConfig, app_against_in_process, app_process, http_api_call,  # noqa: E402
                                       off_the_apps_cores)
from optimize.publish.report import QA_QUESTION, qa_context  # noqa: E402

VARIANTS = ("baseline", "optimized", "pruned", "pruned-optimized")
PROMPT = "Explain in a few sentences why the sky is blue."


def wait_until_up(http, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if http.get("").status_code == 200:
                return
        except Exception:  # noqa: BLE001 - not listening yet
            pass
        time.sleep(0.5)
    raise RuntimeError("the app did not start")


def main() -> None:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--clicks", type=int, default=9)
    parser.add_argument("--pause-s", type=float, default=1.0, help="a visitor's pause before each click")
    args = parser.parse_args()
    showdown = Showdown(presets={task: default_preset(task) for task in ("qa", "generation")})
    context = {tokens: qa_context(showdown.runner("qa", "baseline").tokenizer, tokens) for tokens in (420, 550)}
    lines = [f"# App against in-process ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", ""]
    with app_process() as (base, _), httpx.Client(base_url=base, timeout=180) as http:
        wait_until_up(http)
        for tokens, text in context.items():
            calls = {v: (lambda v=v, text=text: showdown.answer(text, QA_QUESTION, v),
                         lambda v=v, text=text: http_api_call(http, "qa", [text, QA_QUESTION, v, False])) for v in VARIANTS}
            for local, app in calls.values():
                local(), off_the_apps_cores(app)
            sides = app_against_in_process(calls, lambda r: r["latency_ms"]["model"], SideBySideConfig(rounds=args.rounds))
            lines += [f"QA ~{tokens} tokens, `latency_ms.model`, {args.rounds} pairs, 70 ms idle before each call:", "",
                      "| variant | in-process p50 (ms) | app p50 (ms) | app / in-process (median of pairs) |", "|---|---|---|---|"]
            lines += [f"| {v} | {statistics.median(s.in_process_ms):.1f} | {statistics.median(s.app_ms):.1f} | {s.ratio:.3f} |"
                      for v, s in sides.items()]
            lines.append("")
        print("\n".join(lines), flush=True)
        lines = [""]
        ready = [s["variant"] for s in showdown.variants() if s["task"] == "generation" and s["status"] == "ready"]
        calls = {v: (lambda v=v: showdown.generate(PROMPT, v, 32),
                     lambda v=v: http_api_call(http, "generate", [PROMPT, v, 32])) for v in ready}
        sides = app_against_in_process(calls, lambda r: 1e3 / r["decode_tokens_per_s"], SideBySideConfig(rounds=5))
        lines += ["Generation, decoding (ms per token after the first, 32 tokens), 5 pairs:", "",
                  "| variant | in-process decode tok/s | app decode tok/s | app / in-process, time per token |",
                  "|---|---|---|---|"]
        lines += [f"| {v} | {1e3 / statistics.median(s.in_process_ms):.1f} | {1e3 / statistics.median(s.app_ms):.1f} | "
                  f"{s.ratio:.3f} |" for v, s in sides.items()]
        report = json.loads((REPORTS_DIR / "qa.json").read_text())
        shown = {row["variant"]: row["speedup_p50"] for row in report["rows"]}
        text = qa_context(showdown.runner("qa", "baseline").tokenizer, 384)
        clicks: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(args.clicks):
            time.sleep(args.pause_s)
            result = off_the_apps_cores(lambda: http_api_call(http, "compare_qa", [text, QA_QUESTION, list(VARIANTS), False]))
            for v in VARIANTS:
                clicks[v].append(result[v]["speedup"])
        lines += ["", f"Speedup over the baseline a click shows (`/compare_qa`, ~384 tokens, median of {args.clicks} clicks "
                  f"after {args.pause_s:.0f} s pauses) against `optimize report`'s ({report['created']}):", "",
                  "| variant | click (min-max) | report | click / report |", "|---|---|---|---|"]
        for v in VARIANTS:
            median = statistics.median(clicks[v])
            lines.append(f"| {v} | {median:.2f}x ({min(clicks[v]):.2f}-{max(clicks[v]):.2f}) | {shown[v]:.2f}x | "
                         f"{median / shown[v]:.3f} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
