"""The one report type: measured side by side, saved as JSON/CSV/Markdown/PNG, read back by the app."""
import re

from PIL import Image, ImageColor

from models.catalog import REPO_ROOT, VARIANT_COLORS
from models.reports import Report, Row, load_length_table, load_report_table, report_chart
from models.showdown import Showdown
from optimize.publish.report import ReportConfig, measure_task, qa_context


def test_report_measures_ready_variants_side_by_side_and_round_trips(built_presets, tmp_path):
    showdown = Showdown(presets=dict(built_presets))
    config = ReportConfig(qa_tokens=128, qa_longer_tokens=(550,), qa_rounds=3, qa_longer_rounds=2,
                          generation_rounds=1, new_tokens=4, warmup=1)
    for task in ("qa", "generation"):
        report = measure_task(showdown, task, config)
        assert [row.variant for row in report.rows] == ["baseline", "optimized"]
        baseline = report.rows[0]
        assert baseline.speedup_p50 == 1.0 and baseline.latency_p95_ms >= baseline.latency_p50_ms > 0
        assert all(row.parameters > 0 and row.size_mb > 0 for row in report.rows)
        assert report.rows[1].parameters == baseline.parameters  # an export counts its source's weights, not its bytes
        report.save(tmp_path)
        for suffix in ("json", "csv", "md", "png"):
            assert (tmp_path / f"{task}.{suffix}").stat().st_size > 0
        assert Report.load(tmp_path / f"{task}.json") == report
        table, caption = load_report_table(task, tmp_path)
        assert list(table["variant"]) == ["baseline", "optimized"] and report.preset in caption
        # the tab's table had them past the accuracy columns, out of view (generation's even at 1,400 px)
        assert list(table.columns)[:3] == ["variant", "speedup", "p50 (ms)"], list(table.columns)
        chart, description = report_chart(task, tmp_path)
        assert chart.endswith(f"{task}.png") and "no variant has a measured accuracy" in description, description
        (tmp_path / f"{task}.json").unlink()  # a chart whose report is gone is still shown, in general words
        assert report_chart(task, tmp_path)[1].startswith(f"{task} report: accuracy against latency")
    text = (tmp_path / "generation.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| variant"))  # prompt and decoding apart (issue 52)
    import onnxruntime
    assert f"onnxruntime {onnxruntime.__version__}" in text.split(header)[0]  # the runtimes named above the table
    assert [c.strip() for c in header.split("|") if "tokens" in c] == [
        "tokens written", "tokens/s", "prompt tokens/s", "decode tokens/s"], header
    assert "memory (MB)" in header and all(row.memory_mb is not None and row.memory_mb >= 0 for row in report.rows)
    assert all(row.new_tokens == report.rows[0].new_tokens for row in report.rows)  # equal work (issue 49)
    assert not load_length_table("generation", tmp_path).size
    assert re.search(r"\d+-token chat prompt", report.workload), report.workload  # TTFT depends on the prompt's length


def test_qa_report_gives_latency_by_context_length_beside_the_one_window_headline(built_presets, tmp_path):
    """Issue 31: a speedup measured on one window said nothing about the two-window paragraphs
    visitors paste; the report (and the Benchmarks tab, which reads it) gives both."""
    showdown = Showdown(presets={"qa": built_presets["qa"]})
    config = ReportConfig(qa_tokens=128, qa_longer_tokens=(550,), qa_rounds=2, qa_longer_rounds=2, warmup=1)
    report = measure_task(showdown, "qa", config)
    for row in report.rows:
        (entry,) = row.latency_by_length
        assert entry["tokens"] == 550 and entry["windows"] == 2 and entry["p50_ms"] > 0, entry
    assert report.rows[0].latency_by_length[0]["speedup"] == 1.0
    report.save(tmp_path)
    lengths = load_length_table("qa", tmp_path)
    assert list(lengths["variant"]) == ["baseline", "optimized"]
    assert list(lengths.columns)[1:] == ["~128 tokens (1 window)", "~550 tokens (2 windows)"]
    assert "Latency by context length" in (tmp_path / "qa.md").read_text()


def test_report_plot_draws_each_variant_in_the_apps_colour(tmp_path):
    """Accuracy vs latency, each variant in the colour of the app's live charts (the plots had used
    matplotlib's cycle: baseline blue in the report, red in the app)."""
    rows = [Row(variant=variant, runtime="torch", parameters=1, size_mb=1.0, accuracy={"overall_f1": 40.0 + index},
                latency_p50_ms=10.0 * (4 - index), latency_p95_ms=11.0 * (4 - index), speedup_p50=4 / (4 - index))
            for index, variant in enumerate(VARIANT_COLORS)]
    report = Report(task="qa", preset="tiny", workload="QA", machine={}, rows=rows)
    report.plot(tmp_path / "qa.png")
    drawn = set(Image.open(tmp_path / "qa.png").convert("RGB").getdata())
    for variant, colour in VARIANT_COLORS.items():
        assert ImageColor.getrgb(colour) in drawn, variant
    # the same points in words, the chart's alt text in the app (gradio's image gave it an empty one)
    description = report.chart_description()
    for row in rows:
        assert f"{row.variant}: {row.accuracy['overall_f1']:.1f} at {row.latency_p50_ms:.1f} ms" in description, description


def test_qa_context_fills_the_requested_number_of_tokens(built_presets):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(built_presets["qa"].variant("baseline").source.location)
    context = qa_context(tokenizer, 384)
    length = len(tokenizer("Who worked a little bit harder?", context)["input_ids"])
    assert 380 <= length <= 384


def test_benchmarks_tab_carries_what_pruning_costs():
    """Issue 13: the committed pruning report (default and the 20 % candidate, each with its
    perplexity, instruction score and speed) is what the Benchmarks tab shows."""
    from models.reports import pruning_markdown

    text = pruning_markdown()
    assert "20.0 %" in text and "instruction set" in text and "perplexity" in text
    assert "No pruning report yet." == pruning_markdown(REPO_ROOT / "nowhere")


def test_the_committed_reports_links_lead_somewhere_from_the_page(monkeypatch):
    """The pruning report's links are relative to reports/ in the repository: on the page they led to 404s. On a
    Space a file its deploy uploads is linked there; any other (experiments/ stays behind) is named by its path."""
    import re

    from models.reports import pruning_markdown
    from ui.benchmarks import repository_links

    relative = re.compile(r"\]\((?!https?://)[^)]*\)")
    assert relative.search(pruning_markdown())  # what there is to mend
    monkeypatch.delenv("SPACE_ID", raising=False)
    here = repository_links(pruning_markdown(), "reports")
    assert not relative.search(here) and "(`reports/verify-generation.md`)" in here
    assert "(`experiments/pruned-instruction-recovery/results.md`)" in here
    monkeypatch.setenv("SPACE_ID", "org/showdown")
    space = repository_links(pruning_markdown(), "reports")
    assert "](https://huggingface.co/spaces/org/showdown/blob/main/reports/verify-generation.md)" in space
    assert "(`experiments/pruned-instruction-recovery/results.md`)" in space and not relative.search(space)
    # a title, an image, another scheme, an anchor and a file the repository lacks (the review's cases)
    odd = repository_links('[r](qa.md "QA") ![chart](qa.png) [w](HTTPS://x.org/a) [s](#top) [gone](nowhere.md)', "reports")
    assert odd == ("[r](https://huggingface.co/spaces/org/showdown/blob/main/reports/qa.md) ![chart](qa.png) "
                   "[w](HTTPS://x.org/a) [s](#top) gone (`reports/nowhere.md`)"), odd


def test_the_report_says_what_each_faster_rejected_recipe_missed_by():
    """Issue 26: when a slower rung ships, the report says by how much each faster one missed."""
    rejected = {"recipe": {"exporter": "gguf-grid", "weight_only_bits": 4, "quantize": True},
                "gates_missed": ["reading-comprehension F1 15.98 is 2.24 below its source (gate ≤ 1.0)"]}
    rows = [Row(variant=v, runtime="onnxruntime", parameters=1, size_mb=1.0, latency_p50_ms=1.0, latency_p95_ms=1.0,
                speedup_p50=1.0, accuracy={"agreement_pct": 100.0, **({"rejected_recipes": [rejected]} if v == "optimized" else {})})
            for v in ("baseline", "optimized")]
    text = Report(task="generation", preset="p", workload="w", machine={}, rows=rows).markdown()
    assert ("- `optimized`: rejected the GGUF's own 4-bit grid, int8 compute: reading-comprehension F1 15.98 "
            "is 2.24 below its source") in text


def test_the_report_says_which_accuracy_figures_were_read_from_records(tmp_path):
    """Latency is this run's; accuracy is the build's, and where a figure was read from a record the
    report says which, when and on which CPU (the table looked measured here throughout)."""
    accuracy = {"agreement_pct": 99.0, "reading_f1": 12.9, "reading_recorded": "2026-11-26, AMD EPYC (avx512-vnni)",
                "instruction_pct": 55.0, "instruction_recorded": "2026-11-27, AMD EPYC (avx512-vnni)"}
    rows = [Row(variant=v, runtime="onnxruntime", parameters=1, size_mb=1.0, latency_p50_ms=1.0, latency_p95_ms=1.0,
                speedup_p50=1.0, accuracy=accuracy if v == "pruned" else {"agreement_pct": 100.0})
            for v in ("baseline", "pruned")]
    text = Report(task="generation", preset="p", workload="w", machine={}, rows=rows).markdown()
    assert ("read from records, measured as shown: `pruned` reading F1 (2026-11-26, AMD EPYC (avx512-vnni)), "
            "instruction set (2026-11-27, AMD EPYC (avx512-vnni))") in text
    rows[1].accuracy = {"agreement_pct": 100.0}
    plain = Report(task="generation", preset="p", workload="w", machine={}, rows=rows).markdown()
    assert "Accuracy is what each variant's build measured (its manifest)." in plain and "records" not in plain
    # the Benchmarks tab's caption says so too (it had dropped the note), and a measure a build did not record is a dash
    report = Report(task="generation", preset="p", workload="w", machine={}, rows=rows[:1] + [
        Row(variant="pruned", runtime="torch", parameters=1, size_mb=1.0, latency_p50_ms=1.0, latency_p95_ms=1.0,
            speedup_p50=1.0, accuracy=accuracy)])
    report.save(tmp_path)
    table, caption = load_report_table("generation", tmp_path)
    assert "read from records, measured as shown: `pruned` reading F1 (2026-11-26" in caption
    assert list(table["tokens/s"]) == ["—", "—"] and list(table["TTFT (ms)"]) == ["—", "—"]  # not measured: not 0
    qa = Report(task="qa", preset="p", workload="w", machine={}, rows=[Row(
        variant="baseline", runtime="torch", parameters=1, size_mb=1.0, latency_p50_ms=1.0, latency_p95_ms=1.0,
        speedup_p50=1.0, accuracy={"overall_f1": 60.0, "overall_exact": 55.0, "forced_f1": 80.0, "forced_exact": 70.0})])
    assert qa.table()[0]["everyday F1 (forced)"] == "—" and qa.table()[0]["HasAns / NoAns F1"] == "—"  # a KeyError before


def test_a_column_shows_no_score_a_build_did_not_record():
    from ui.columns import accuracy_text

    assert accuracy_text({"overall_f1": 50.0}) == "held-out SQuAD 2.0 F1 50.0"  # "(HasAns 0.0, NoAns 0.0)" before
    text = accuracy_text({"agreement_pct": 99.0, "reading_f1": 12.0, "reading_f1_ci95": [11.0, 13.0]})
    assert "reading-comprehension F1 12.0 (95% CI 11.0 to 13.0)" in text  # no KeyError without a question count


def test_a_report_it_cannot_draw_leaves_the_saved_one_as_it_was(tmp_path):
    """`report --rounds -1` timed nothing: the NaN timings replaced the committed table and json, then the chart
    failed. The chart is drawn first now, and the command refuses a count below 1."""
    import math
    import subprocess
    import sys

    import pytest

    def rows(latency: float) -> list[Row]:
        return [Row(variant=variant, runtime="torch", parameters=1, size_mb=1.0, accuracy={"overall_f1": 40.0},
                    latency_p50_ms=latency, latency_p95_ms=latency, speedup_p50=1.0) for variant in VARIANT_COLORS]

    Report(task="qa", preset="tiny", workload="QA", machine={}, rows=rows(10.0)).save(tmp_path)
    saved = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    with pytest.raises(ValueError):
        Report(task="qa", preset="tiny", workload="QA", machine={}, rows=rows(math.nan)).save(tmp_path)
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.name != "qa-partial.png"} == saved
    for command in (["report", "--rounds", "0"], ["report", "--rounds", "-1"], ["gguf-grid-bench", "--rounds", "-1"]):
        done = subprocess.run([sys.executable, "-m", "optimize", *command], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2 and "use a whole number ≥ 1" in done.stderr, (command, done.stderr[-2000:])


def test_a_setting_typo_stops_an_optimize_command_in_one_line():
    """`SHOWDOWN_THREADS=two python -m optimize report` printed a traceback per variant, advised retraining, and ended
    with "build them first"."""
    import os
    import subprocess
    import sys

    from models.settings import usable_cpus

    done = subprocess.run([sys.executable, "-m", "optimize", "report", "--task", "qa", "--rounds", "1"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "SHOWDOWN_THREADS": "two"})
    assert done.returncode == 2 and done.stderr.strip() == "error: SHOWDOWN_THREADS='two': use a whole number ≥ 1 " \
                                                           f"(default {usable_cpus()})", done.stderr[-2000:]


def test_a_variant_that_does_not_load_is_named_in_the_report_not_left_out_in_silence(built_presets, tmp_path):
    """A report run with a variant unbuilt replaced the full table with a shorter one that never said so."""
    from dataclasses import replace

    preset = built_presets["qa"]
    unbuilt = replace(preset.variant("optimized"), name="pruned-optimized")  # its folder was never built
    showdown = Showdown(presets={"qa": replace(preset, variants=(*preset.variants, unbuilt))})
    report = measure_task(showdown, "qa", ReportConfig(qa_tokens=128, qa_longer_tokens=(), qa_rounds=2, warmup=1))
    assert [row.variant for row in report.rows] == ["baseline", "optimized"]
    assert list(report.skipped) == ["pruned-optimized"] and report.skipped["pruned-optimized"]
    report.save(tmp_path)
    assert "Not measured in this run (did not load): `pruned-optimized`: " in (tmp_path / "qa.md").read_text()
    assert Report.load(tmp_path / "qa.json") == report
    assert "Not measured in that run (did not load): `pruned-optimized`." in load_report_table("qa", tmp_path)[1]


def test_the_report_times_every_model_on_the_thread_that_runs_them_in_the_app(built_presets):
    """The report timed on its main thread the models the showdown had loaded and warmed on its model thread:
    PyTorch on two threads read `pruned` at 1.85x the baseline where the app serves it at over 2x."""
    import threading

    showdown = Showdown(presets=dict(built_presets))
    forwards: list[str] = []
    showdown.runner("qa", "baseline").model.register_forward_hook(
        lambda *_: forwards.append(threading.current_thread().name))
    measure_task(showdown, "qa", ReportConfig(qa_tokens=128, qa_longer_tokens=(200,), qa_rounds=2, qa_longer_rounds=2,
                                              warmup=1))
    model_thread = showdown.on_model_thread(lambda: threading.current_thread().name)
    assert len(forwards) >= 6 and set(forwards) == {model_thread}, forwards
    assert model_thread != threading.current_thread().name


def test_report_rounds_sets_every_timed_rounds_count(monkeypatch):
    """`report --rounds 1` still timed ten rounds at each longer context, under a help that said "timed rounds"."""
    from optimize.__main__ import main
    from optimize.publish import report

    asked = []
    monkeypatch.setattr(report, "run", lambda config, tasks: asked.append((config, tasks)))
    assert main(["report", "--task", "qa", "--rounds", "2"]) == 0
    [(config, tasks)] = asked
    assert (config.qa_rounds, config.qa_longer_rounds, config.generation_rounds, tasks) == (2, 2, 2, ("qa",))


def test_a_report_of_a_preset_that_loads_nothing_says_why(tmp_path, qa_preset):
    """"build them first" alone had hidden the cause when the variants were built but could not load (a Hub preset's
    repos out of reach, a source folder moved away)."""
    import dataclasses

    import pytest

    from models.errors import VariantUnavailable
    from models.showdown import Showdown

    gone = tuple(dataclasses.replace(v, source=dataclasses.replace(v.source, location=str(tmp_path / "moved")))
                 if v.name == "baseline" else v for v in qa_preset.variants)
    nothing = dataclasses.replace(qa_preset, name="tiny-qa-unloadable", variants=gone)
    with pytest.raises(VariantUnavailable, match=f"no variant of tiny-qa-unloadable loads \\(.*{tmp_path.name}.*moved"):
        measure_task(Showdown(presets={"qa": nothing}), "qa", ReportConfig())
