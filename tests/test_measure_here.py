"""The Benchmarks tab's "Measure on this machine", through the served app on the tiny presets:
progress while it runs, a second request refused, then the result labelled with machine and date."""
import threading
import time

import pytest
from gradio_client import Client

from models.measure_here import MeasureHere
from models.reports import machine_label
from tests.test_browser import ARGS, CHROMIUM, journaled

RELEASE = threading.Event()  # the tiny measurement holds its result until the test has asked twice


@pytest.fixture(scope="module")
def served(built_presets):
    import socket

    from app import serve
    from models.showdown import Showdown
    from optimize.publish.report import ReportConfig, measure_task

    showdown = Showdown(presets=dict(built_presets))

    def tiny_bench(progress) -> str:
        progress("timing tiny-qa")
        report = measure_task(showdown, "qa", ReportConfig(qa_tokens=64, qa_rounds=3, warmup=1))
        progress("timed; finishing")
        RELEASE.wait(timeout=120)
        return f"**{machine_label(report.machine, report.created)}**\n\n{report.markdown()}"

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    demo = serve(showdown, MeasureHere(measure=tiny_bench), server_name="127.0.0.1", server_port=port,
                 prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.fixture(scope="module")
def client(served):
    return Client(served, verbose=False)


def _until(condition, deadline_s: float = 120.0):
    deadline = time.monotonic() + deadline_s
    while not (value := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)  # polling a condition with a deadline, not waiting for a guess
    return value


def test_measure_on_this_machine_shows_progress_lets_a_second_visitor_follow_then_a_labelled_result(client, served, request):
    first = client.submit(api_name="/measure_here")
    _until(lambda: any("timed; finishing" in output for output in first.outputs()))
    assert any(output.startswith("⏳ Measuring on this machine") for output in first.outputs())

    second = client.submit(api_name="/measure_here")  # not a second run: it follows the first (it had frozen)
    _until(lambda: any("already running" in output for output in second.outputs()))

    RELEASE.set()
    result = first.result(timeout=120)
    assert result.startswith("**") and " cores, " in result and "; measured 20" in result  # machine and date
    assert "| baseline |" in result and "| optimized |" in result  # the tiny presets' own rows
    assert second.result(timeout=120).endswith(result)  # the same result reached the one who joined

    if CHROMIUM is None:
        pytest.skip("Debian chromium is not installed: a fresh page's status was not checked")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:  # a page opened after the run shows its result (it said "not measured yet")
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = journaled(request, browser.new_page(viewport={"width": 1400, "height": 1000}))
        page.goto(served)
        page.get_by_role("tab", name="Benchmarks").click()
        page.get_by_role("button", name="Against alternatives").click()
        shown = page.wait_for_function("() => document.querySelector('#measured-here')?.textContent.includes('baseline')",
                                       timeout=30_000)
        assert shown and "Not measured on this machine yet" not in page.locator("#measured-here").inner_text()
        browser.close()


def test_the_bench_s_progress_is_its_own_steps_and_a_stop_says_how_it_ended():
    """Raw output had been the progress (tokenizer warnings, llama.cpp's absence for a minute), and a killed bench
    was blamed on its last warning."""
    from models.measure_here import step, stopped

    assert step("2026-11-29 16:35:35,232 optimize.bench.run QA ~128 tokens done") == "QA ~128 tokens done"
    assert step("Token indices sequence length is longer than the specified maximum (540 > 512)") is None
    assert step("2026-11-29 16:35:36,000 optimize.bench.contenders llama.cpp not benchmarked: not installed") is None
    assert stopped(-9, ["a", "b", "Token indices …"]).startswith("the bench stopped (killed by signal 9)")
    assert stopped(2, ["error: --output …"]) == "the bench stopped (exit status 2); its last lines: error: --output …"


def test_a_bench_that_runs_too_long_is_said_to_and_leaves_no_process(monkeypatch):
    """A bench stopped at the time limit read "killed by signal 9"; and a bench whose output could not be read was
    left running beside the next one."""
    from models import measure_here

    started = []
    real_popen = measure_here.subprocess.Popen
    monkeypatch.setattr(measure_here, "TIMEOUT_S", 0.5)
    monkeypatch.setattr(measure_here.subprocess, "Popen", lambda *args, **kwargs: started.append(real_popen(*args, **kwargs)) or started[-1])
    with pytest.raises(RuntimeError, match="the bench took longer than"):
        measure_here.quick_bench(lambda _step: None)
    assert started and started[0].poll() is not None

    def unreadable(_progress):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    started.clear()
    monkeypatch.setattr(measure_here, "TIMEOUT_S", 60)
    monkeypatch.setattr(measure_here, "step", unreadable)  # a failure while its output is read
    with pytest.raises(UnicodeDecodeError):
        measure_here.quick_bench(lambda _step: None)
    assert started and started[0].poll() is not None


def test_a_bench_started_for_the_app_stops_when_the_app_does(tmp_path):
    """`--parent-pid`: the bench the app starts ends with the app (it had run on under PID 1 for minutes)."""
    import subprocess
    import sys

    from models.catalog import REPO_ROOT

    # a parent that starts the watchdog's bench with its own pid, then exits at once; the orphan must follow it
    parent = ("import subprocess, sys, os\n"
              "child = subprocess.Popen([sys.executable, '-c', 'from optimize.commands.bench import stop_with_parent;'"
              " 'import os, time; stop_with_parent(os.getppid()); print(os.getpid(), flush=True); time.sleep(60)'],"
              " stdout=subprocess.PIPE, text=True)\n"
              "print(child.stdout.readline().strip(), flush=True)\n")
    done = subprocess.run([sys.executable, "-c", parent], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    pid = int(done.stdout.strip())
    _until(lambda: not _alive(pid), deadline_s=20)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie (exited, not yet reaped by init) counts as ended
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_a_record_written_after_a_long_measure_keeps_what_another_build_added_meanwhile(tmp_path, monkeypatch):
    """Two builds measure for minutes and then write the same record file: the second kept only its own entry."""
    import json

    from optimize.evaluate import records

    path = tmp_path / "record.json"
    monkeypatch.setattr(records, "record_path", lambda *args: path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")

    def measure():  # while this one measures, another build adds its entry
        path.write_text(json.dumps({"other-build": {"model": "p/other", "measured": "today", "score": 1}}))
        return {"score": 2}

    records.model_record("p", model, path, "user.json", "set", measure, lambda r: r, lambda e: e)
    entries = json.loads(path.read_text())
    assert "other-build" in entries and any(key.endswith("-set") for key in entries), entries


def test_a_trained_models_scores_say_when_and_where_they_were_measured(tmp_path):
    """The app shows a committed QA model's held-out scores as read from its training record: with the date of their
    last measure and the machine, not only "by its training run"."""
    import json

    from models.catalog import default_preset
    from models.recorded import recorded_accuracy

    training = {"held_out": {"overall_f1": 60.0}, "device": "cpu", "test_looks": [{"date": "2026-11-26"}]}
    (tmp_path / "training.json").write_text(json.dumps(training))
    shown = recorded_accuracy(default_preset("qa"), "baseline", tmp_path, lambda name: None)
    assert shown["recorded"] == "by its training run, 2026-11-26, cpu" and shown["overall_f1"] == 60.0
    (tmp_path / "training.json").write_text(json.dumps({**training, "held_out_measured": "2026-11-28, AMD EPYC (avx512-vnni)"}))
    assert recorded_accuracy(default_preset("qa"), "baseline", tmp_path, lambda name: None)["recorded"] == \
        "by its training run, 2026-11-28, AMD EPYC (avx512-vnni)"


def test_a_source_side_read_from_a_committed_record_is_shown_as_recorded(tmp_path):
    """Issue 49: the generation baseline's perplexity and every variant's comparison with its source come from the
    source's committed reference record on a fresh machine; the column says so, with the record's date and CPU."""
    import json

    from models.catalog import default_preset
    from models.recorded import recorded_accuracy
    from ui.columns import accuracy_text

    stamp = "2026-11-27, AMD EPYC (avx512-vnni)"
    optimized = {"agreement_pct": 96.8, "perplexity": 26.1, "reference_perplexity": 25.97, "promise": "lossy",
                 "reference_recorded": stamp}
    (tmp_path / "optimized").mkdir()
    (tmp_path / "optimized" / "manifest.json").write_text(json.dumps({"metrics": optimized}))
    locate = {"optimized": tmp_path / "optimized"}.get
    baseline = recorded_accuracy(default_preset("generation"), "baseline", tmp_path / "none", locate)
    assert accuracy_text(baseline).startswith(f"perplexity 25.97, read from a record measured {stamp}")
    assert accuracy_text(optimized).endswith(f"its source's side read from a record measured {stamp}")
    assert "read from a record" not in accuracy_text({**optimized, "reference_recorded": None})
