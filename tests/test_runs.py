"""Runs a visitor keeps (issue 52): the session's runs as CSV, the last one as a Markdown table."""
import csv

from ui.runs import KEPT_RUNS, add_run, last_run_markdown, runs_csv

QA = {"baseline": {"answer": "The second little pig", "latency_ms": {"model": 70.0, "total": 72.0}, "device": "cpu",
                   "timing": "after one warm-up call", "tokens": 90},
      "pruned-optimized": {"answer": "The second | pig", "latency_ms": {"model": 11.0, "total": 12.0}, "device": "cpu",
                           "timing": "after one warm-up call", "tokens": 90}}


def test_each_click_adds_one_run_with_speedups_against_that_click_s_baseline(tmp_path):
    runs = add_run([], "qa-minilm-squad2", "Who worked a little bit harder?", QA)
    runs = add_run(runs, "qa-minilm-squad2", "Again?", {"optimized": {"answer": "", "latency_ms": {"model": 20.0, "total": 21.0}}})
    assert [row["run"] for row in runs] == [1, 1, 2]
    assert runs[1]["speedup"] == 6.0 and runs[2]["speedup"] is None  # no baseline in run 2: no made-up ratio
    with open(runs_csv(runs, "qa"), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["variant"] for r in rows] == ["baseline", "pruned-optimized", "optimized"]
    assert rows[1]["output"] == "The second | pig" and rows[1]["model_ms"] == "11.0"


def test_the_last_run_reads_as_a_markdown_table_with_pipes_escaped():
    runs = add_run([], "qa-minilm-squad2", "Who worked a little bit harder?", QA)
    table = last_run_markdown(runs, "qa")
    assert "| variant | answer | total (ms) | model (ms) | speedup | runs on |" in table
    assert "| pruned-optimized | The second \\| pig | 12.0 | 11.0 | 6.00x | cpu |" in table
    assert last_run_markdown([], "qa") == "" and runs_csv([], "qa") is None


def test_the_session_keeps_its_last_runs_only():
    runs: list[dict] = []
    for _ in range(KEPT_RUNS + 5):
        runs = add_run(runs, "p", "q", {"baseline": QA["baseline"]})
    assert len(runs) == KEPT_RUNS and runs[0]["run"] == 6
