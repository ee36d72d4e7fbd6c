"""Runs a visitor keeps (issue 52): the session's runs as CSV, the last one as a Markdown table."""
import csv

from ui.runs import KEPT_RUNS, add_run, last_run_markdown, runs_csv

QA = {"baseline": {"answer": "The second little pig", "latency_ms": {"model": 70.0, "total": 72.0}, "device": "cpu",
                   "timing": "after one warm-up call", "tokens": 90},
      "pruned-optimized": {"answer": "The second | pig", "latency_ms": {"model": 11.0, "total": 12.0}, "device": "cpu",
                           "timing": "after one warm-up call", "tokens": 90}}


def test_each_click_adds_one_run_with_speedups_against_that_click_s_baseline(tmp_path):
    runs = add_run([], "qa-minilm-squad2", "Who worked a little bit harder?", QA, "qa")
    runs = add_run(runs, "qa-minilm-squad2", "Again?", {"optimized": {"answer": "", "latency_ms": {"model": 20.0, "total": 21.0}}}, "qa")
    assert [row["run"] for row in runs] == [1, 1, 2]
    assert runs[1]["speedup"] == 6.0 and runs[2]["speedup"] is None  # no baseline in run 2: no made-up ratio
    with open(runs_csv(runs, "qa"), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["variant"] for r in rows] == ["baseline", "pruned-optimized", "optimized"]
    assert rows[1]["output"] == "The second | pig" and rows[1]["model_ms"] == "11.0"


def test_the_last_run_reads_as_a_markdown_table_with_pipes_escaped():
    runs = add_run([], "qa-minilm-squad2", "Who worked a little bit harder?", QA, "qa")
    table = last_run_markdown(runs, "qa")
    assert "| variant | answer | total (ms) | model (ms) | speedup | runs on |" in table
    assert "| pruned-optimized | The second \\| pig | 12.0 | 11.0 | 6.00x | cpu |" in table
    assert last_run_markdown([], "qa") == "" and runs_csv([], "qa") is None
    # the table's speedup is the column's: 1.09549x read 1.10x in the column and 1.09x here (rounded twice)
    close = {"baseline": {**QA["baseline"], "latency_ms": {"model": 105.0, "total": 109.549}},
             "pruned": {**QA["baseline"], "latency_ms": {"model": 95.0, "total": 100.0}}}
    from ui.columns import speedup

    shown = f"{speedup(close['pruned'], close['baseline'], 'qa'):.2f}x"
    assert shown == "1.10x" and f"| {shown} |" in last_run_markdown(add_run([], "p", "q", close, "qa"), "qa")


def test_the_session_keeps_its_last_runs_only():
    runs: list[dict] = []
    for _ in range(KEPT_RUNS + 5):
        runs = add_run(runs, "p", "q", {"baseline": QA["baseline"]}, "qa")
    assert len(runs) == KEPT_RUNS and runs[0]["run"] == 6


def _generated(text: str, new_tokens: int, total_ms: float, decode_tokens_per_s: float | None) -> dict:
    return {"text": text, "new_tokens": new_tokens, "latency_ms": {"model": total_ms - 1, "total": total_ms},
            "ttft_ms": 20.0, "decode_tokens_per_s": decode_tokens_per_s, "tokens_per_s": new_tokens / total_ms * 1e3}


def test_a_generation_run_compares_decoding_speed_as_the_columns_do_in_the_catalog_s_order():
    """Issue 49: texts of different lengths do not compare by total time. pruned-optimized stopped after 8
    tokens and baseline wrote 64: the total times' ratio (20x) is not the decoding speedup (4x)."""
    results = {"pruned-optimized": _generated("Paris.", 8, 50.0, 100.0),  # in the run's rotating order
               "baseline": _generated("The capital of France is Paris, " * 8, 64, 1000.0, 25.0),
               "optimized": _generated("x", 1, 15.0, None)}  # one token: decoding not timed
    runs = add_run([], "generation-smollm2", "What is the capital of France?", results, "generation")
    assert [row["variant"] for row in runs] == ["baseline", "optimized", "pruned-optimized"]
    assert [row["speedup"] for row in runs] == [1.0, None, 4.0]
    table = last_run_markdown(runs, "generation")
    assert "| variant | text | tokens written | first token (ms) | decode tokens/s | decoding speedup | runs on |" in table
    assert "| pruned-optimized | Paris. | 8 | 20.0 | 100.0 | 4.00x | cpu |" in table
    assert "| optimized | x | 1 | 20.0 | — | — | cpu |" in table


def test_a_variant_that_failed_stays_in_the_pasted_table_and_the_csv_with_its_message():
    """A table pasted elsewhere must not read as if only three variants were asked: the failed one keeps its row,
    its column's message and no numbers."""
    message = "⚠️ this variant failed (RuntimeError; the server's log has the details)"
    runs = add_run([], "qa-minilm-squad2", "Who worked a little bit harder?", QA, "qa", {"optimized": message})
    assert [row["variant"] for row in runs] == ["baseline", "optimized", "pruned-optimized"]
    assert runs[1]["timing"] == "failed" and runs[1]["total_ms"] is None and runs[1]["speedup"] is None
    table = last_run_markdown(runs, "qa")
    assert f"| optimized | {message[:60]} | — | — | — | — |" in table
    generated = add_run([], "generation-smollm2", "Hi", {}, "generation", {"pruned": message})
    assert f"| pruned | {message[:60]} | — | — | — | — | — |" in last_run_markdown(generated, "generation")


def test_a_visitors_text_in_a_csv_is_never_a_formula():
    """A spreadsheet runs a cell starting with = + - @ as a formula: the question and the answers are the visitor's."""
    attack = {"baseline": {**QA["baseline"], "answer": "@SUM(A1)"}, "optimized": {**QA["baseline"], "answer": "-2+3"}}
    runs = add_run([], "p", '=HYPERLINK("http://x","click")', attack, "qa")
    with open(runs_csv(runs, "qa"), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["input"][:2], r["output"]) for r in rows] == [("'=", "'@SUM(A1)"), ("'=", "'-2+3")]
    assert rows[0]["total_ms"] == "72.0"  # numbers stay numbers


def test_a_one_token_generation_reads_not_timed_not_zero():
    runs = add_run([], "p", "q", {"optimized": _generated("x", 1, 15.0, 0.0)}, "generation")
    assert runs[0]["decode_tokens_per_s"] is None


def test_the_charts_and_the_table_number_a_run_alike_even_when_it_timed_nothing(built_presets):
    """A click whose variants all failed added no chart rows, so "This run" kept the previous click's bars and
    the chart's run numbers fell behind the table's."""
    from models.showdown import Showdown
    from ui.columns import empty_history, latest_run, record
    from ui.runs import next_run

    showdown = Showdown(presets=dict(built_presets))
    results = showdown.compare("The second pig worked harder.", "Who worked harder?", ["baseline", "optimized"])
    runs = add_run([], "p", "q", results, "qa")
    history, _, _ = record(showdown, "qa", results, {}, empty_history(), next_run([]))
    runs = add_run(runs, "p", "q", {}, "qa", {"baseline": "⚠️ failed"})
    history, bars, _ = record(showdown, "qa", {}, {}, history, next_run(runs[:-1]))
    assert int(history["run"].max()) == runs[-1]["run"] == 2
    assert not (bars["latency_ms"] > 0).any()  # this run's bars are empty, not run 1's
    # every variant on the axis at 0 and the axis 0-100: a NaN baseline bar had left it out and the axis "0.000000"
    from models.catalog import VARIANTS
    from ui.columns import chart_tops

    assert list(bars["variant"]) == list(VARIANTS) and (bars["latency_ms"] == 0).all()
    only_nothing = history[history["run"] == 2]
    assert [update["y_lim"] for update in chart_tops(only_nothing)] == [[0, 100.0], [0, 100.0]]
