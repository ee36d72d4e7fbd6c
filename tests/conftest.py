"""Fixtures: tiny models built once per session, an isolated artifacts folder, a free port."""
from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

# No test reaches past localhost: gradio's version check and launch analytics, and the Hub client's telemetry, are off
# (set before gradio_client imports huggingface_hub, which reads it once; subprocesses inherit them).
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def _share_the_cores_between_workers() -> None:
    """pytest-xdist's workers each started models with a thread per core: four spinning threads on two cores made
    a tiny model's PyTorch forward ~50x slower (2.4 ms alone, 133 ms beside another busy process) and phase one of
    `.ci/run` minutes longer. Each worker, and the apps and commands it starts, gets its share of the cores."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "SHOWDOWN_THREADS" not in os.environ:
        from models.settings import usable_cpus

        os.environ["SHOWDOWN_THREADS"] = str(max(1, usable_cpus() // workers))


_share_the_cores_between_workers()

from gradio_client import Client  # noqa: E402

from models.catalog import REPO_ROOT
from tests.tiny import tiny_llama, tiny_preset, tiny_qa

SQUAD = REPO_ROOT.parent / "shared" / "data" / "squad-v2-dev" / "dev-v2.0.json"


def _shutdown_without_join(self) -> None:
    """gradio_client's `Client.__del__` joins its executor's threads. A finished test's client is
    collected by the garbage collector wherever a collection happens to run; once that was inside
    CPython's thread start-up, which holds `threading._shutdown_locks_lock`, and the join waited for
    that same lock: the next test's app call never returned (a clean-clone run hung in
    test_your_model.py). Collected clients now stop their executor without waiting; their threads
    end when the test's server closes."""
    if hasattr(self, "executor"):
        self.executor.shutdown(wait=False)


Client.__del__ = _shutdown_without_join


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test's report carries its pages' journals (tests/test_browser.py keep_journal) and the
    messages each page shows now."""
    report = (yield).get_result()
    if report.when != "call" or not report.failed:
        return
    shared = getattr(item, "funcargs", {}).get("page")
    pages = [page for page in (shared, *getattr(item, "journaled_pages", [])) if hasattr(page, "journal")]
    for number, page in enumerate(pages, 1):
        try:
            toasts = "(the page is closed)" if page.is_closed() else page.evaluate(
                "() => [...document.querySelectorAll('[data-testid=toast-body]')].map((t) => t.innerText)")
        except Exception as error:  # noqa: BLE001 - a page broken with the failure
            toasts = f"(unreadable: {error})"
        report.sections.append((f"page journal {number} of {len(pages)}",
                                "\n".join([*page.journal[-80:], f"messages shown now: {toasts}"])))


@pytest.fixture(scope="session", autouse=True)
def isolated_artifacts(tmp_path_factory) -> Path:
    """Tests never touch the repo's artifacts/ unless a test asks for the real defaults."""
    path = tmp_path_factory.mktemp("artifacts")
    previous = os.environ.get("SHOWDOWN_ARTIFACTS")
    os.environ["SHOWDOWN_ARTIFACTS"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("SHOWDOWN_ARTIFACTS", None)
    else:
        os.environ["SHOWDOWN_ARTIFACTS"] = previous


@pytest.fixture(scope="session")
def tiny_qa_dir(tmp_path_factory) -> Path:
    return tiny_qa(tmp_path_factory.mktemp("tiny-qa"))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    return tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def qa_preset(tiny_qa_dir):
    return tiny_preset("qa", tiny_qa_dir)


@pytest.fixture(scope="session")
def generation_preset(tiny_llama_dir):
    return tiny_preset("generation", tiny_llama_dir)


@pytest.fixture(scope="session")
def built_presets(qa_preset, generation_preset):
    """Both tiny presets with their optimized variants built (export, graph-opt, INT8)."""
    from optimize.build import build_onnx

    for preset in (qa_preset, generation_preset):
        build_onnx(preset, "optimized", evaluate=False)
    return {"qa": qa_preset, "generation": generation_preset}


@pytest.fixture()
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def requires_squad():
    return pytest.mark.skipif(not SQUAD.exists(), reason=f"SQuAD data not found at {SQUAD} (../shared is absent)")


@contextlib.contextmanager
def serve_app(showdown) -> Iterator[str]:
    """The real Gradio app (app.build_ui) on `showdown`, served on a free loopback port."""
    from app import serve

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    demo = serve(showdown, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@pytest.fixture(scope="module")
def app_url(built_presets):
    """The real app on the tiny built presets."""
    from models.showdown import Showdown

    with serve_app(Showdown(presets=dict(built_presets))) as url:
        yield url
