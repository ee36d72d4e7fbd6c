"""Load: 8 gradio_client users at once on the tiny presets, both tasks and both variants, for a
bounded time (SHOWDOWN_LOAD_SECONDS, 12 s by default, up to 30) and a bounded number of calls.
Every response must be the one a lone client gets for the same input (the models are
deterministic; every user's inputs carry a token of their own, so a crossed response differs),
with no errors and the process's memory growing by less than 300 MB after warm-up."""
import os
import random
import string
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gradio_client import Client

USERS = 8
SECONDS = min(float(os.environ.get("SHOWDOWN_LOAD_SECONDS", "12")), 30.0)
MAX_CALLS_PER_USER = 100
VARIANTS = ("baseline", "optimized")
RSS_GROWTH_MB = 300


def rss_mb() -> float:
    """This process's resident memory: the app is served from it (the app_url fixture)."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


def user_inputs(user: int) -> list[tuple[str, tuple]]:
    """Both tasks, each with a token only this user's inputs contain."""
    token = "".join(random.Random(user).choices(string.ascii_lowercase, k=8))
    context = " ".join(f"{token}{i} went home." for i in range(12))
    return [("/qa", (context, f"Where did {token}3 go?", variant)) for variant in VARIANTS] + [
        ("/generate", (f"Say hello to {token}.", variant, 4)) for variant in VARIANTS]


def comparable(api: str, response: dict) -> tuple:
    return ((response["answer"], response["start"], response["end"]) if api == "/qa"
            else (response["text"], response["new_tokens"]))


def test_eight_concurrent_users_get_their_own_answers_without_errors_or_leaks(app_url):
    clients = [Client(app_url, verbose=False) for _ in range(USERS)]
    inputs = [user_inputs(user) for user in range(USERS)]
    expected = {(api, args): comparable(api, clients[0].predict(*args, api_name=api))  # one client alone
                for calls in inputs for api, args in calls}
    for api in ("/qa", "/generate"):  # an answer delivered to another user would show
        answers = [answer for (called, _), answer in expected.items() if called == api]
        assert len(set(answers)) > 1, (api, answers)
    rss_before = rss_mb()
    deadline = time.monotonic() + SECONDS

    waits: list[float] = []

    def user(index: int) -> list[str]:
        problems, calls = [], 0
        while time.monotonic() < deadline and calls < MAX_CALLS_PER_USER:
            api, args = inputs[index][calls % len(inputs[index])]
            calls += 1
            try:
                response = clients[index].predict(*args, api_name=api)
            except Exception as error:  # noqa: BLE001 - every error is a failure, collected
                problems.append(f"user {index} {api} {args[-2:]}: {error}")
                continue
            if comparable(api, response) != expected[(api, args)]:
                problems.append(f"user {index} {api}: {comparable(api, response)} != {expected[(api, args)]}")
            waits.append(response["latency_ms"]["wait"])
            if response["latency_ms"]["wait"] < 0 or response["latency_ms"]["total"] <= 0:
                problems.append(f"user {index} {api}: timings {response['latency_ms']}")
        return problems if calls else [f"user {index} made no call"]

    with ThreadPoolExecutor(USERS) as pool:
        problems = [p for found in pool.map(user, range(USERS)) for p in found]
    assert problems == []
    assert max(waits) > 1.0  # 8 users, one model at a time: some waited, and said so apart from their compute
    assert rss_mb() - rss_before < RSS_GROWTH_MB
