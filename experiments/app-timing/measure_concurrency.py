"""Do concurrent visitors distort each other's timings? The running app's own compute time
(`latency_ms.total`) and wait (`latency_ms.wait`) for one QA variant, first with one client, then
with N clients at once (each its own gradio_client), on the same ~384-token input.

The clients stand in for visitors, whose browsers are not on the server: after the app has
started they run at `--client-nice` (default 10) so that their own polling and parsing on these
2 cores does not count as the server's; `--client-nice 0` measures them as equals.

    python experiments/app-timing/measure_concurrency.py --variant pruned-optimized --clients 4 --calls 10
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))


def _calls(url: str, context: str, question: str, variant: str, calls: int, out: list, client_kind: str) -> None:
    if client_kind == "gradio_client":
        from gradio_client import Client

        client = Client(url, verbose=False, download_files=False)
        call = lambda: client.predict(context, question, variant, api_name="/qa")  # noqa: E731
    else:  # the HTTP API on one keep-alive connection: a light client, no 50 ms polling
        import httpx

        from optimize.bench.app_timing import http_api_call

        http = httpx.Client(base_url=url, timeout=120)
        call = lambda: http_api_call(http, "qa", [context, question, variant, False])  # noqa: E731
    call()  # warm-up, not counted
    for _ in range(calls):
        latency = call()["latency_ms"]
        out.append((latency["total"], latency.get("wait", 0.0)))


def main() -> None:
    from models.showdown import Showdown
    from optimize.bench.app_timing import app_process, connect
    from optimize.publish.report import QA_QUESTION, qa_context

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", default="pruned-optimized")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--calls", type=int, default=10, help="per client")
    parser.add_argument("--client-nice", type=int, default=10, help="the clients' priority below the app's")
    parser.add_argument("--client", choices=("gradio_client", "http"), default="gradio_client",
                        help="gradio_client (polls every 50 ms) or the HTTP API (keep-alive, server-sent events)")
    args = parser.parse_args()
    context = qa_context(Showdown.from_environment().runner("qa", "baseline").tokenizer, 384)
    with app_process() as (url, server):
        with connect(url, server):  # listening
            pass
        os.nice(args.client_nice)  # this process only: the app started at the usual priority
        rows = []
        for clients in (1, args.clients):
            results: list[tuple[float, float]] = []
            threads = [threading.Thread(target=_calls, args=(url, context, QA_QUESTION, args.variant, args.calls, results, args.client))
                       for _ in range(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            totals, waits = [r[0] for r in results], [r[1] for r in results]
            rows.append((clients, statistics.median(totals), statistics.median(waits), max(waits), len(results)))
        base = rows[0][1]
        print(f"**QA {args.variant}, ~384 tokens, {args.calls} calls per client ({args.client}), clients at nice {args.client_nice}** "
              f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
        print("| clients | compute p50 (ms) | vs 1 client | wait p50 (ms) | wait max (ms) | calls |\n|---|---|---|---|---|---|")
        for clients, total, wait, wait_max, n in rows:
            print(f"| {clients} | {total:.1f} | {total / base:.2f}x | {wait:.1f} | {wait_max:.1f} | {n} |")


if __name__ == "__main__":
    main()
