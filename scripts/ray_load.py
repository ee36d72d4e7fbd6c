"""Load test of the showdown on Ray Serve (issue 54): 16 concurrent clients for 60 s against 1 and
then 2 replicas on this machine, through the app's HTTP API; requests/s, round-trip p50/p95, the
replicas' own model and queue times (per replica, never averaged across them unnamed), errors and
each replica's resident memory. Writes reports/ray-load.md and .json.

    python scripts/ray_load.py [--clients 16] [--seconds 60] [--replicas 1 --replicas 2]

Run it on a quiet machine with the default variants built. The clients run at the lowest priority
(optimize.bench.app_timing.off_the_apps_cores), beside the replicas on the same cores.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.machine import describe  # noqa: E402
from models.reports import REPORTS_DIR  # noqa: E402
from optimize.bench.app_timing import free_port, http_api_call, off_the_apps_cores  # noqa: E402
from optimize.publish.report import QA_QUESTION  # noqa: E402

VARIANTS = ("baseline", "optimized", "pruned", "pruned-optimized")
CONTEXT = ("The first little pig was very lazy. He didn't want to work at all and he built his house out of straw. "
           "The second little pig worked a little bit harder but he was somewhat lazy too and he built his house out of "
           "sticks. The third little pig worked very hard all day and built his house with bricks.")


def replica_memory_mb() -> dict[str, float]:
    """Resident memory of each model replica's process (Ray names them ServeReplica:showdown:ModelReplica)."""
    out = {}
    for proc in Path("/proc").iterdir():
        try:
            title = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "ServeReplica:showdown:ModelReplica" in title:
                pages = int((proc / "statm").read_text().split()[1])
                out[proc.name] = round(pages * 4096 / 1e6, 1)
        except (OSError, ValueError, IndexError):
            continue
    return out


def load(url: str, clients: int, seconds: float) -> dict:
    import httpx

    records, errors, lock = [], Counter(), threading.Lock()
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            call = 0
            while time.monotonic() < deadline:
                variant = VARIANTS[(index + call) % len(VARIANTS)]
                call += 1
                started = time.perf_counter()
                try:
                    result = http_api_call(http, "qa", [CONTEXT, QA_QUESTION, variant, False])
                except Exception as error:  # noqa: BLE001 - counted, the load goes on
                    with lock:
                        errors[type(error).__name__] += 1
                    continue
                with lock:
                    records.append({"trip_ms": 1e3 * (time.perf_counter() - started), "replica": result["replica"],
                                    "model_ms": result["latency_ms"]["model"], "queue_ms": result["latency_ms"]["queue"],
                                    "wait_ms": result["latency_ms"]["wait"]})

    threads = [threading.Thread(target=off_the_apps_cores, args=(lambda i=i: client(i),)) for i in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    trips = [r["trip_ms"] for r in records]
    per_replica = {}
    for name in sorted({r["replica"] for r in records}):
        mine = [r for r in records if r["replica"] == name]
        per_replica[name] = {"requests": len(mine), "model_p50_ms": round(statistics.median(r["model_ms"] for r in mine), 1),
                             "queue_p50_ms": round(statistics.median(r["queue_ms"] for r in mine), 1),
                             "wait_p50_ms": round(statistics.median(r["wait_ms"] for r in mine), 1)}
    quantiles = statistics.quantiles(trips, n=20) if len(trips) > 1 else [float("nan")] * 19
    return {"requests": len(records), "errors": dict(errors), "seconds": round(elapsed, 1),
            "requests_per_s": round(len(records) / elapsed, 2), "trip_p50_ms": round(statistics.median(trips), 1) if trips else None,
            "trip_p95_ms": round(quantiles[18], 1), "replicas": per_replica, "memory_mb": replica_memory_mb()}


def markdown(runs: dict[int, dict], clients: int, seconds: float) -> str:
    machine = describe(0)
    lines = [f"### Ray Serve load test — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"{machine['cpu']} ({machine['isa']}), {machine['cores']} cores; {clients} concurrent clients for {seconds:.0f} s "
             "each run, QA on the seed story through the app's HTTP API (`/qa`, the four variants in turn); clients "
             "at nice 19 on the same cores (`python scripts/ray_load.py`).", "",
             "| replicas | requests/s | round trip p50 / p95 (ms) | errors | per replica: requests, model p50, queue p50, wait p50 (ms) | memory per replica (MB) |",
             "|---|---|---|---|---|---|"]
    for count, run in runs.items():
        replicas = "; ".join(f"`{name}`: {r['requests']}, {r['model_p50_ms']}, {r['queue_p50_ms']}, {r['wait_p50_ms']}"
                             for name, r in run["replicas"].items())
        memory = ", ".join(f"{mb:,.0f}" for mb in run["memory_mb"].values()) or "—"
        errors = sum(run["errors"].values())
        lines.append(f"| {count} | {run['requests_per_s']} | {run['trip_p50_ms']} / {run['trip_p95_ms']} | "
                     f"{errors}{' ' + json.dumps(run['errors']) if errors else ''} | {replicas} | {memory} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    import ray
    from ray import serve

    from ray_app import ServeConfig, start

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--replicas", type=int, action="append")
    args = parser.parse_args()
    runs = {}
    for count in args.replicas or [1, 2]:
        cpus = 2 / count  # the machine's 2 cores shared out
        url = start(ServeConfig(replicas=count, cpus_per_replica=cpus, host="127.0.0.1", port=free_port()))
        http_warm = load(url, 4, 10)  # every replica loaded and warm before the timed run
        print(f"{count} replica(s) warm: {http_warm['requests']} requests", flush=True)
        runs[count] = load(url, args.clients, args.seconds)
        print(json.dumps(runs[count]), flush=True)
        serve.shutdown()
        ray.shutdown()
    REPORTS_DIR.mkdir(exist_ok=True)
    (REPORTS_DIR / "ray-load.json").write_text(json.dumps(runs, indent=1) + "\n")
    (REPORTS_DIR / "ray-load.md").write_text(markdown(runs, args.clients, args.seconds))
    print(markdown(runs, args.clients, args.seconds))


if __name__ == "__main__":
    sys.exit(main())
