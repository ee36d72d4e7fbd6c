"""The showdown served by Ray Serve: model replicas on as many machines as the cluster has, the same
UI and API as `python app.py` in front of them.

Each replica holds every variant and keeps the app's rule: one computation at a time, timed inside
its turn. A response says which replica served it, its model time, and its queue time apart
(`latency_ms.queue`: from the ingress handing it over to the replica starting it; `latency_ms.wait`:
behind another request inside that replica); nothing is averaged across replicas.

    pip install -r requirements.txt -r requirements-ray.txt
    python ray_app.py --replicas 2                  # one machine: a local cluster, http://localhost:8000
    ray start --head; ray start --address HEAD:6379  # a cluster: then, on the head,
    python ray_app.py --address auto --replicas 4 --cpus-per-replica 2
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import gradio as gr
from fastapi import FastAPI
from ray import serve
from ray.serve._private.http_util import ASGIAppReplicaWrapper  # what serve.gradio_integrations.GradioIngress wraps

from models import settings
from models.catalog import REPO_ROOT, Preset, Task
from models.errors import ConfigError, InputError, VariantUnavailable
from models.generation import Update
from models.showdown import Showdown


@dataclass(frozen=True)
class ServeConfig:
    """Replicas and what each may use; every field is also a flag of `python ray_app.py`."""
    replicas: int = 2
    cpus_per_replica: float = 1.0  # Ray schedules a replica where this many CPUs are free
    threads_per_replica: int = 0  # model threads (SHOWDOWN_THREADS); 0: the replica's CPUs
    host: str = "0.0.0.0"
    port: int = 8000
    max_queued_per_replica: int = 8  # requests a replica holds at once (one computes, the others wait, timed)

    def __post_init__(self) -> None:
        if (self.replicas < 1 or not 0 < self.cpus_per_replica < math.inf or self.threads_per_replica < 0  # nan fails too
                or self.max_queued_per_replica < 1):
            raise ConfigError(f"replicas and max queued per replica must be ≥ 1, CPUs per replica > 0 and threads per replica "
                              f"≥ 0; got {self.replicas}, {self.max_queued_per_replica}, {self.cpus_per_replica} and "
                              f"{self.threads_per_replica}")
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"--port {self.port}: use a port from 1 to 65535")

    @property
    def threads(self) -> int:
        return self.threads_per_replica or max(1, int(self.cpus_per_replica))


class ModelReplica:
    """One replica: a Showdown with every variant loaded and warmed before it takes requests."""

    def __init__(self, presets: dict[Task, Preset] | None = None) -> None:
        from models import settings

        self.showdown = Showdown(presets=presets) if presets else Showdown.from_environment()
        self.showdown.serve_models_first(*settings.serving())
        for status in self.showdown.variants():
            if status["status"] == "ready":
                try:
                    self.showdown.runner(status["task"], status["variant"])
                except VariantUnavailable:  # shown unavailable with its reason, as app.py does; the others serve
                    continue
        self.name = serve.get_replica_context().replica_id.unique_id

    def _served(self, result: dict, queue_ms: float) -> dict:
        if "latency_ms" in result:
            result["latency_ms"]["queue"] = queue_ms
            result["replica"] = self.name
        return result

    def call(self, method: str, args: tuple, sent_at: float):
        """Any of the showdown's plain methods, with the time it queued before this replica started it
        (wall clocks: across machines, as close as their clocks are)."""
        queue_ms = 1e3 * max(time.time() - sent_at, 0.0)
        result = getattr(self.showdown, method)(*args)
        if method == "compare":
            return {variant: self._served(r, queue_ms) for variant, r in result.items()}
        return self._served(result, queue_ms) if isinstance(result, dict) else result

    def stream(self, prompt: str, variant: str, max_new_tokens: int, warm_up: bool, sent_at: float) -> Iterator[Update]:
        queue_ms = 1e3 * max(time.time() - sent_at, 0.0)
        for update in self.showdown.stream(prompt, variant, max_new_tokens, warm_up):
            if update.done:
                self._served(update.result, queue_ms)
            yield update

    def stream_each(self, prompt: str, variants: list[str], max_new_tokens: int, warm_up: bool, sent_at: float
                    ) -> Iterator[tuple[str, Update | Exception]]:
        """A whole generation click on this replica: its variants' speedups compare runs on one machine."""
        queue_ms = 1e3 * max(time.time() - sent_at, 0.0)
        for variant, update in self.showdown.stream_each(prompt, variants, max_new_tokens, warm_up):
            if isinstance(update, Update) and update.done:
                self._served(update.result, queue_ms)
            yield variant, update


@contextlib.contextmanager
def _causes() -> Iterator[None]:
    """A replica's error as the error it raised (an InputError the UI turns into its message), not Ray's
    wrapper, whose text carries the replica's traceback."""
    from ray.exceptions import RayTaskError

    try:
        yield
    except RayTaskError as error:
        cause = getattr(error, "cause", None)
        if isinstance(cause, Exception):
            raise cause from None
        raise


class RemoteShowdown:
    """What app.build_ui calls on a Showdown, answered by the replicas: the same UI and API, served
    by whichever replica Ray routes each request to."""

    def __init__(self, replicas, presets: dict[Task, Preset]) -> None:
        self.replicas, self.presets = replicas, presets
        self._calls, self._lock = itertools.count(), threading.Lock()  # what Showdown.run_order reads

    def _call(self, method: str, *args):
        response = self.replicas.call.remote(method, args, time.time())
        with _causes():
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # a gradio worker thread: wait here
                return response.result()
            with ThreadPoolExecutor(1) as waiter:  # the ingress's __init__ runs on an event loop, where Ray refuses to wait
                return waiter.submit(response.result).result()

    def variants(self) -> list[dict]:
        return self._call("variants")

    def variant_status(self, task: Task, variant: str) -> dict:
        return self._call("variant_status", task, variant)

    def preset(self, task: Task) -> Preset:  # the tabs name the model they ran (it had been missing: every click failed)
        return self.presets[task]

    def choices(self, task: Task) -> list[str]:
        return [self.presets[task].name]  # the replicas serve one preset per task

    def using(self, task: Task, name: str | None) -> RemoteShowdown:
        if name and name != self.presets[task].name:
            raise InputError(f"This cluster serves {self.presets[task].name} for {task}.")
        return self

    def run_order(self, variants: list[str]) -> list[str]:
        return Showdown.run_order(self, variants)  # the same rotation, counted at the ingress

    def answer(self, context: str, question: str, variant: str, handle_impossible_answer: bool = False,
               warm_up: bool = False) -> dict:
        return self._call("answer", context, question, variant, handle_impossible_answer, warm_up)

    def compare(self, context: str, question: str, variants: list[str], handle_impossible_answer: bool = False) -> dict:
        return self._call("compare", context, question, variants, handle_impossible_answer)

    def stream(self, prompt: str, variant: str, max_new_tokens: int, warm_up: bool = False) -> Iterator[Update]:
        with _causes():
            yield from self.replicas.options(stream=True).stream.remote(prompt, variant, max_new_tokens, warm_up, time.time())

    def stream_each(self, prompt: str, variants: list[str], max_new_tokens: int, warm_up: bool = False
                    ) -> Iterator[tuple[str, Update | Exception]]:
        with _causes():  # one request: the click's variants on one replica (they had been routed one by one)
            yield from self.replicas.options(stream=True).stream_each.remote(prompt, variants, max_new_tokens, warm_up,
                                                                              time.time())

    def generate(self, prompt: str, variant: str, max_new_tokens: int, warm_up: bool = False) -> dict:
        *_, last = self.stream(prompt, variant, max_new_tokens, warm_up)
        return last.result


class Ingress(ASGIAppReplicaWrapper):
    """The app's UI and API (app.build_ui) over the replicas."""

    def __init__(self, replicas, presets: dict[Task, Preset]) -> None:
        from app import CONCURRENCY, QUEUE_SIZE, build_ui
        from ui.page import PAGE_CSS, PAGE_HEAD, page_theme

        demo = build_ui(RemoteShowdown(replicas, presets))
        demo.queue(default_concurrency_limit=CONCURRENCY, max_size=QUEUE_SIZE)
        # show_error=False as app.py's launch: a user's gr.Error is shown, a fault's internals (actor ids, hosts) are not
        super().__init__(gr.mount_gradio_app(FastAPI(), demo, path="/", show_error=False, theme=page_theme(),
                                             css=PAGE_CSS, head=PAGE_HEAD))


def application(config: ServeConfig, presets: dict[Task, Preset] | None = None, env: dict[str, str] | None = None):
    """The Serve application: `config.replicas` model replicas behind one ingress. `env` reaches
    every replica's process (SHOWDOWN_ARTIFACTS, for example); the threads follow the config."""
    presets = presets or Showdown.from_environment().presets
    runtime_env = {"env_vars": {**(env or {}), "SHOWDOWN_THREADS": str(config.threads), "SHOWDOWN_BUILD": "0",
                                "PYTHONPATH": str(REPO_ROOT)}}  # every node has the checkout at this path
    replicas = serve.deployment(ModelReplica, name="ModelReplica", num_replicas=config.replicas,
                                max_ongoing_requests=config.max_queued_per_replica,
                                ray_actor_options={"num_cpus": config.cpus_per_replica, "runtime_env": runtime_env})
    # each open page or client holds a request (gradio's heartbeat stream): Serve's default of 5 froze the sixth
    ingress = serve.deployment(Ingress, name="Ingress", max_ongoing_requests=1000,
                               ray_actor_options={"num_cpus": 0, "runtime_env": runtime_env})
    return ingress.bind(replicas.bind(presets), presets)


def start(config: ServeConfig, presets=None, env=None, address: str | None = None) -> str:
    """Connect to (or start) a Ray cluster, run the application, return its URL."""
    import ray

    ray.init(address=address, include_dashboard=False, ignore_reinit_error=True)
    serve.start(http_options={"host": config.host, "port": config.port})
    serve.run(application(config, presets, env), name="showdown", route_prefix="/", blocking=False)
    return f"http://{'127.0.0.1' if config.host == '0.0.0.0' else config.host}:{config.port}/"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", help="a running cluster (`auto`, or HEAD:6379); default: start a local one")
    for name, default in ServeConfig.__dataclass_fields__.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default.default), default=default.default)
    args = vars(parser.parse_args())
    address = args.pop("address")
    try:
        config = ServeConfig(**args)
        settings.check_model_settings()  # the replicas get these: a typo had failed every replica at import
    except ConfigError as error:
        parser.error(str(error))
    url = start(config, address=address, env={k: v for k, v in os.environ.items() if k.startswith("SHOWDOWN_")})
    print(f"serving {args['replicas']} replicas at {url} (Ctrl+C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:  # on a cluster that outlives this process (--address), the app had kept serving
        serve.delete("showdown")
        print("stopped", flush=True)


if __name__ == "__main__":
    main()
