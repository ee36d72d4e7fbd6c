"""The app itself as a contender: a real server in its own process, called through gradio_client,
so the bench sees the overhead a visitor's call pays over the model time.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from models.catalog import REPO_ROOT
from models.timing import percentile, timed_rounds
from optimize.bench.tables import BenchConfig, Result
from optimize.publish.report import QA_QUESTION

log = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def app_process() -> Iterator[tuple[str, subprocess.Popen]]:
    """`python app.py` with no background builds on a free loopback port, for the block: the
    bench's round trips and the scripts that time or photograph the real app share this one."""
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1", "SHOWDOWN_BUILD": "0"}
    server = subprocess.Popen([sys.executable, "app.py"], cwd=REPO_ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}/", server
    finally:
        server.terminate()
        server.wait(timeout=30)


FLOOR = "app (gradio_client), /variants"
CLIENT_NICE = 19  # a client timing the app on the app's own 2 cores runs at the lowest priority
T = TypeVar("T")


def off_the_apps_cores(call: Callable[[], T], nice: int = CLIENT_NICE) -> T:
    """`call` on a thread at the lowest priority, its result or its error back here. A client beside
    the server on 2 cores takes their cycles while the server computes (the app's model times rose
    by more than half with the client at normal priority); Linux nice is per thread and the threads a client
    starts (gradio_client's) inherit it, so they stay low too."""
    out: list = []

    def run() -> None:
        try:
            if nice and hasattr(os, "setpriority"):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
            out.append((True, call()))
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            out.append((False, error))

    thread = threading.Thread(target=run, name="app-client")
    thread.start()
    thread.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value


@dataclass(frozen=True)
class SideBySideConfig:
    rounds: int = 9
    gap_ms: float = 70.0  # idle before every call, on both sides alike: idle time alone slows the next call
    seed: int = 0


@dataclass
class SideBySide:
    """One variant's times in-process and through the app, paired call by call."""
    in_process_ms: list[float] = field(default_factory=list)
    app_ms: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """The median of each pair's app / in-process: a pair runs back to back, so load from
        elsewhere on the machine falls on both of its calls alike."""
        return percentile([app / local for app, local in zip(self.app_ms, self.in_process_ms)], 50)


def app_against_in_process(calls: dict[str, tuple[Callable[[], dict], Callable[[], dict]]],
                           measure: Callable[[dict], float], config: SideBySideConfig = SideBySideConfig()
                           ) -> dict[str, SideBySide]:
    """Per variant, (in-process call, app call) → their `measure`d times. Every call follows the same
    idle gap; variants run in a shuffled order each round and the two sides of a pair in a random
    order; the app's client runs off the app's cores (`off_the_apps_cores`)."""
    shuffler = random.Random(config.seed)
    out = {variant: SideBySide() for variant in calls}
    for _ in range(config.rounds):
        for variant in shuffler.sample(list(calls), len(calls)):
            local, app = calls[variant]
            sides = [("in", local), ("app", lambda app=app: off_the_apps_cores(app))]
            for side, call in shuffler.sample(sides, 2):
                time.sleep(config.gap_ms / 1e3)
                value = measure(call())
                (out[variant].app_ms if side == "app" else out[variant].in_process_ms).append(value)
    return out


def bench_app(variant: str, context: str, config: BenchConfig) -> tuple[list[Result], dict[str, float]]:
    """QA through the running app, two ways: gradio_client (the target's definition) and the app's
    HTTP API on one keep-alive connection (what an embedding service would use). Overhead = round
    trip − the app's own reported total. gradio_client polls its message queue every 50 ms
    (gradio_client/utils.py, `time.sleep(0.05)` in get_pred_from_sse_v1plus), which quantises its
    round trip; the HTTP API shows what the server itself adds, and gradio_client calling `/variants`
    (no model) shows the client's own floor."""
    import httpx

    with app_process() as (base, server), connect(base, server) as client:
        with httpx.Client(base_url=base, timeout=60) as http:
            callers = {"app (gradio_client)": lambda: off_the_apps_cores(
                           lambda: client.predict(context, QA_QUESTION, variant, api_name="/qa")),
                       "app (HTTP API, keep-alive)": lambda: off_the_apps_cores(
                           lambda: http_api_call(http, "qa", [context, QA_QUESTION, variant, False])),
                       FLOOR: lambda: off_the_apps_cores(lambda: client.predict(api_name="/variants"))}
            runs = timed_rounds(callers, config.app_rounds, config.warmup)
            floor = [1000 * seconds for seconds, _ in runs.pop(FLOOR)]
            overheads = {FLOOR: percentile(floor, 50)}
            results = [Result("app round trip, no model (/variants)", FLOOR, percentile(floor, 50), percentile(floor, 95),
                              notes="gradio_client's own floor: the same client and server, nothing to compute")]
            for contender, calls in runs.items():
                trips = [1000 * seconds for seconds, _ in calls]
                extra = [trip - answer["latency_ms"]["total"] for trip, (_, answer) in zip(trips, calls)]
                overheads[contender] = percentile(extra, 50)
                results.append(Result(f"app round trip, QA ~384 tokens, {variant}", contender,
                                      percentile(trips, 50), percentile(trips, 95), answer=calls[-1][1]["answer"],
                                      notes=f"overhead p50 {overheads[contender]:.1f} ms, p95 {percentile(extra, 95):.1f} ms"))
        return results, overheads


def http_api_call(http, api_name: str, data: list) -> dict:
    """Gradio's documented HTTP API: POST /gradio_api/call/<name> → event id, then read the
    server-sent events of GET /gradio_api/call/<name>/<event id> until `complete`."""
    event_id = http.post(f"gradio_api/call/{api_name}", json={"data": data}).raise_for_status().json()["event_id"]
    event = None
    with http.stream("GET", f"gradio_api/call/{api_name}/{event_id}") as response:
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                if event == "error":
                    raise RuntimeError(f"the app answered with an error: {line[5:].strip()}")
                return json.loads(line[5:])[0]
    raise RuntimeError("the app closed the event stream without a result")


@contextlib.contextmanager
def connect(url: str, server: subprocess.Popen, timeout_s: float = 120):
    """A gradio_client Client once the app answers (it fails fast if the server exited), closed
    and its threads joined at the end of the block. Why join here: the client's `__del__` joins
    them too, and a garbage collection that runs it inside CPython's thread start-up waits for a
    lock that start-up holds (a test run hung that way; tests/conftest.py). Joined threads make
    that later join a no-op."""
    from gradio_client import Client

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client = off_the_apps_cores(lambda: Client(url, verbose=False, download_files=False))  # its threads too
            break
        except Exception:  # noqa: BLE001 - not listening yet
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the app did not start at {url}") from None
            time.sleep(0.5)
    try:
        yield client
    finally:
        client.close()
        client.executor.shutdown(wait=True)


# --- the physical limit for decoding --------------------------------------------------------------


def qa_against_the_app(url: str, tokens: int, rounds: int = 21, only: list[str] | None = None) -> dict[str, float]:
    """Each QA variant's app / in-process model-time ratio at ~`tokens` tokens (`only` these variants
    when given), the in-process side in this process: run it in a fresh one
    (`python -m optimize.bench.app_timing URL TOKENS [VARIANT ...]`), as a test process's own threads and
    settings would time its models, not the app's. 21 rounds: the median of 9 pairs wandered too much
    for the shortest model (docs/measurements.md)."""
    import httpx

    from models.catalog import default_preset
    from models.showdown import Showdown
    from optimize.publish.report import QA_QUESTION, qa_context

    showdown = Showdown(presets={task: default_preset(task) for task in ("qa", "generation")})
    variants = [s["variant"] for s in showdown.variants() if s["task"] == "qa" and s["status"] == "ready"
                and (not only or s["variant"] in only)]
    context = qa_context(showdown.runner("qa", "baseline").tokenizer, tokens)
    with httpx.Client(base_url=url, timeout=120) as http:
        calls = {v: (lambda v=v: showdown.answer(context, QA_QUESTION, v),
                     lambda v=v: http_api_call(http, "qa", [context, QA_QUESTION, v, False])) for v in variants}
        for local, app in calls.values():  # both sides warm at this length
            local(), off_the_apps_cores(app)
        sides = app_against_in_process(calls, lambda result: result["latency_ms"]["model"], SideBySideConfig(rounds=rounds))
    return {variant: round(side.ratio, 3) for variant, side in sides.items()}


if __name__ == "__main__":
    import models  # noqa: F401 - bounds thread spinning before torch loads

    print(json.dumps(qa_against_the_app(sys.argv[1], int(sys.argv[2]), only=sys.argv[3:])))
