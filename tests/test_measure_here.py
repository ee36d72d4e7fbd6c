"""The Benchmarks tab's "Measure on this machine", through the served app on the tiny presets:
progress while it runs, a second request refused, then the result labelled with machine and date."""
import threading
import time

import pytest
from gradio_client import Client

from models.reports import MeasureHere, machine_label

RELEASE = threading.Event()  # the tiny measurement holds its result until the test has asked twice


@pytest.fixture(scope="module")
def client(built_presets):
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
    yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    demo.close()


def _until(condition, deadline_s: float = 120.0):
    deadline = time.monotonic() + deadline_s
    while not (value := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)  # polling a condition with a deadline, not waiting for a guess
    return value


def test_measure_on_this_machine_shows_progress_refuses_a_second_run_then_a_labelled_result(client):
    first = client.submit(api_name="/measure_here")
    _until(lambda: any("timed; finishing" in output for output in first.outputs()))
    assert any(output.startswith("⏳ Measuring on this machine") for output in first.outputs())

    second = client.predict(api_name="/measure_here")
    assert "already running" in second

    RELEASE.set()
    result = first.result(timeout=120)
    assert result.startswith("**") and " cores, " in result and "; measured 20" in result  # machine and date
    assert "| baseline |" in result and "| optimized |" in result  # the tiny presets' own rows


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
