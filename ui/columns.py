"""The side-by-side columns every task tab shares: one column per variant (its output and its
stats: latency, speedup, size, memory, accuracy and the promise it keeps), this run as bars
and the session's runs as markers, each variant in the same color in both."""
from __future__ import annotations

import os

import gradio as gr
import pandas as pd

from models.catalog import VARIANT_COLORS, VARIANTS, chosen_variants
from models.errors import InputError
from models.showdown import Showdown
from ui.errors import user_error

CHART_COLUMNS = ["run", "variant", "latency_ms"]
HISTORY_RUNS = 50  # the session chart keeps a visitor's last 50 runs
CHART_MEASURES = {"qa": ("latency", "ms"), "generation": ("decoding time", "ms per token")}  # see chart_ms
WAIT_SHOWN_MS = 1.0  # taking a free turn costs microseconds; more means another request computed


def page_tab(label: str) -> gr.Tab:
    """A top-level tab whose children render when the page loads, not on its first visit: in gradio 6.17.3 tabs
    not yet rendered now and then set the tab bar measuring itself on every animation frame for as long as the
    page stays open, which a browser on the same cores takes from the models being timed (experiments/app-timing)."""
    return gr.Tab(label, render_children=True)


def empty_history() -> pd.DataFrame:
    return pd.DataFrame({"run": pd.Series(dtype="int64"), "variant": pd.Series(dtype="str"),
                         "latency_ms": pd.Series(dtype="float64")})


def _every_variant(frame: pd.DataFrame, run: str | int, latency_ms: float) -> pd.DataFrame:
    """`frame` after a placeholder row per variant: gradio's plots fix their color domain when
    they first draw and never update it, so a variant absent then is drawn in no color at all
    (the session chart that stayed empty). Every frame a chart gets names every variant."""
    rows = pd.DataFrame({"run": run, "variant": list(VARIANTS), "latency_ms": latency_ms})
    return pd.concat([rows.astype(frame.dtypes.to_dict()), frame], ignore_index=True)


def latest_run(history: pd.DataFrame) -> pd.DataFrame:
    """The bars: the last run, one bar per variant in the catalog's order (a plot keeps its rows'
    order: gradio's `sort` list breaks its front end). A variant that did not answer gets a bar of 0 ms."""
    run = int(history["run"].max()) if len(history) else 1
    latest = _every_variant(history[history["run"] == run], run, 0.0).drop_duplicates("variant", keep="last")
    latest = latest.fillna({"latency_ms": 0.0})  # a run that timed nothing: every variant on the axis, at 0
    return latest.sort_values("variant", key=lambda names: names.map(list(VARIANTS).index))


def chart_tops(history: pd.DataFrame) -> list:
    """Both charts' y range, 0 to a tenth above the slowest run shown: with the top left open, vega
    ends the axis at the tallest bar and cuts its marker in half. Sent in a step of its own after
    the data: gradio 6.17's plots draw no marks when a value and a y_lim arrive in one update."""
    slowest = {"bars": latest_run(history)["latency_ms"].max(), "points": history["latency_ms"].max()}
    return [gr.update(y_lim=[0, 1.1 * float(top) if top > 0 else 100.0]) for top in slowest.values()]  # NaN: nothing timed


def history_points(history: pd.DataFrame) -> pd.DataFrame:
    """The session's runs as markers. Runs are labels ("1", "2", …), in the rows' order: a
    numeric axis over one or two runs ticks at 1.00, 1.20, …"""
    points = history.assign(run=history["run"].astype(str))
    return _every_variant(points, points["run"].iloc[0] if len(points) else "1", float("nan"))


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def accuracy_text(accuracy: dict, runtime: str = "onnxruntime") -> str:
    if "overall_f1" in accuracy:
        split = [f"{name} {accuracy[f'{name}_f1']:.1f}" for name in ("HasAns", "NoAns") if f"{name}_f1" in accuracy]
        text = f"held-out SQuAD 2.0 F1 {accuracy['overall_f1']:.1f}" + (f" ({', '.join(split)})" if split else "")
        if "margin_rule_f1" in accuracy:
            text += f" · {accuracy['margin_rule_f1']:.1f} with the null margin alone"
        if "forced_f1" in accuracy:
            text += f" · forced-span F1 {accuracy['forced_f1']:.1f}"
        if "everyday_f1" in accuracy:
            text += f" · everyday-set F1 {accuracy['everyday_f1']:.1f}"
        if "agreement_pct" in accuracy:
            text += f" · same span as its source {accuracy['agreement_pct']:.1f} %"
        if accuracy.get("recorded"):
            text += f" · read from a record ({accuracy['recorded']}), not measured by this app"
        return text + _source_side(accuracy)
    if "agreement_pct" in accuracy:
        recorded = f", read from a record measured {accuracy['perplexity_recorded']}" if accuracy.get("perplexity_recorded") else ""
        parts = [f"perplexity {accuracy['perplexity']:.2f}{recorded}"] if "perplexity" in accuracy else []
        if "reading_f1" in accuracy:
            low, high = accuracy.get("reading_f1_ci95", (None, None))
            count = f", {accuracy['reading_questions']} questions" if "reading_questions" in accuracy else ""
            interval = f" (95% CI {low:.1f} to {high:.1f}{count})" if low is not None else ""
            recorded = (f", read from a record measured {accuracy['reading_recorded']}"
                        if accuracy.get("reading_recorded") else ", measured when it was built")
            parts.append(f"reading-comprehension F1 {accuracy['reading_f1']:.1f}{interval}{recorded}")
        if "instruction_pct" in accuracy:
            share = (f" ({accuracy['instruction_of_baseline_pct']:.0f} % of baseline's)"
                     if "instruction_of_baseline_pct" in accuracy else "")
            recorded = (f", read from a record measured {accuracy['instruction_recorded']}"
                        if accuracy.get("instruction_recorded") else "")
            parts.append(f"instruction set {accuracy['instruction_pct']:.0f} %{share}{recorded}")
        if accuracy.get("note") == "reference":
            return " · ".join(parts + ["the reference"])
        # an exact export promises its source's model and is gated on agreement; lossy and pruned ones are not
        gated = accuracy.get("promise", "exact" if runtime != "torch" else "pruned") == "exact"
        agreement = f"next-token agreement with its source {accuracy['agreement_pct']:.1f} %" + ("" if gated else " (shown, not gated)")
        if "identical_continuations_pct" in accuracy:
            agreement += f", same 64-token text on {accuracy['identical_continuations_pct']:.0f} % of prompts"
        if accuracy.get("weights_exact"):
            agreement += " (its source's exact weights)"
        return " · ".join(parts + [agreement]) + _source_side(accuracy)
    return accuracy.get("note", "accuracy not measured yet")


def _source_side(accuracy: dict) -> str:
    """The comparisons' other side (its source's scores), when the build read it from a committed record."""
    recorded = accuracy.get("reference_recorded")
    return f" · its source's side read from a record measured {recorded}" if recorded else ""


def _gate_text(accuracy: dict) -> str:
    missed = accuracy.get("gates_missed")
    return f"\n\n⚠️ missed accuracy gate: {'; '.join(missed)}" if missed else ""


def _lookup_note(draft: dict | None) -> str:
    """Exact prompt lookup, where the variant decodes with it: what its drafts bought (nothing on a text
    that does not repeat its prompt)."""
    if draft is None:
        return ""
    if not draft["drafted"]:
        return " · prompt lookup on, nothing to draft"
    return f" · prompt lookup kept {draft['accepted']} of {draft['drafted']} drafted tokens ({100 * draft['acceptance']:.0f} %)"


def speedup(result: dict, baseline: dict | None, task: str) -> float | None:
    """QA: the baseline's total time over this variant's. Generation: decoding speed over the
    baseline's, the first token apart: total times of texts of different lengths do not compare.
    None where there is nothing to divide (no baseline in the run, or too few tokens to time decoding)."""
    if baseline is None:
        return None
    if task == "qa":
        return baseline["latency_ms"]["total"] / result["latency_ms"]["total"]
    decode, base_decode = result.get("decode_tokens_per_s") or 0.0, baseline.get("decode_tokens_per_s") or 0.0
    return decode / base_decode if decode and base_decode else None


def _speedup_text(result: dict, baseline: dict | None, task: str) -> str:
    if baseline is None:
        return "speedup: no baseline in this run (not selected, or it did not answer)"
    ratio = speedup(result, baseline, task)
    if task == "qa":
        return f"**{ratio:.2f}x** vs baseline"
    first = f"first token {baseline['ttft_ms'] / result['ttft_ms']:.2f}x" if result.get("ttft_ms") and baseline.get("ttft_ms") else ""
    if ratio is None:  # whose decoding could not be timed: this variant's, or the baseline's it is compared with
        short = "too few tokens to time decoding" if not result.get("decode_tokens_per_s") else \
            "the baseline wrote too few tokens to time its decoding"
        return " · ".join(filter(None, [f"decoding speedup: {short}", first]))
    return f"decoding **{ratio:.2f}x** vs baseline" + (f" · {first}" if first else "")


def chart_ms(result: dict, task: str) -> float | None:
    """What the charts plot: QA's total time; generation's time per decoded token, so that texts of
    different lengths compare (None where decoding was not timed: no bar rather than another unit)."""
    if task == "qa":
        return result["latency_ms"]["total"]
    decode = result.get("decode_tokens_per_s") or 0.0
    return 1e3 / decode if decode else None


def stats_markdown(status: dict, result: dict, baseline: dict | None, task: str) -> str:
    latency = result["latency_ms"]
    lines = [
        f"**{_ms(latency['total'])}** total · {_speedup_text(result, baseline, task)}",
        f"tokenize {_ms(latency['tokenize'])} · model {_ms(latency['model'])} · post {_ms(latency['post'])}"
        + (f" · timed {result['timing']}" if result.get("timing") else ""),
    ]
    if latency.get("wait", 0) > WAIT_SHOWN_MS:  # queued behind another request: not in the total
        lines.insert(1, f"⏳ waited {latency['wait']:,.0f} ms for another visitor")
    if result.get("replica"):  # served by Ray Serve (ray_app.py): which replica, and how long it queued to reach it
        lines.insert(1, f"replica {result['replica']} · queued {latency.get('queue', 0):,.0f} ms before it")
    if task == "generation":
        cached = (f", {result['cached_prompt_tokens']} of its {result['prompt_tokens']} tokens read from the template cache"
                  if result.get("cached_prompt_tokens") else "")
        decode = result.get("decode_tokens_per_s") or 0.0
        written = f"{result['new_tokens']} token{'s' if result['new_tokens'] != 1 else ''} written"
        lines.append(f"first token {_ms(result['ttft_ms'])} (prompt {result.get('prefill_tokens_per_s', 0):,.0f} tokens/s{cached}) · "
                     + (f"**decoding {decode:.1f} tokens/s**" if decode else
                        f"decoding not timed ({'one token' if result['new_tokens'] == 1 else 'no token'})")
                     + f" · {written}" + _lookup_note(result.get("draft")))
    else:
        lines.append(f"{result['tokens']} tokens in {result['windows']} window(s) · null margin {result['score']:+.2f}"
                     + (f" · answerability {result['answerability']:+.2f}" if result.get("verifier") and result.get("answerability") is not None else ""))
        if note := unanswerable_note(result):
            lines.insert(0, f"ℹ️ {note}")
    memory = status.get("memory_bytes")
    lines.append(f"size {status['size_bytes'] / 1e6:,.1f} MB on disk"
                 + (f", {memory / 1e6:,.0f} MB in memory" if memory is not None else "")
                 + f" · {accuracy_text(status['accuracy'], status.get('runtime', 'onnxruntime'))}")
    if summary := status["accuracy"].get("summary"):  # the promise it keeps and its gated deltas, with intervals
        lines.append(f"promise — {summary}")
    return "\n\n".join(lines) + _gate_text(status["accuracy"])


def unanswerable_note(result: dict) -> str:
    """In span mode the best span is shown even when the model rates the question unanswerable, with this note."""
    if not result.get("null_wins") or not result.get("answer"):
        return ""
    score, threshold = result.get("answerability"), result.get("null_threshold") or 0.0
    if score is None:
        return "the model rates this unanswerable"
    name = "answerability" if result.get("verifier") else "margin"
    shown = f"{name} {score:+.2f}" + (f", its threshold {threshold:+.2f}" if threshold else "")
    return f"the model rates this unanswerable ({shown})"


def qa_answer_text(result: dict) -> str:
    return result["answer"] or "(no answer: the model rates it unanswerable)"


def preset_picker(showdown: Showdown, task: str) -> gr.Dropdown:
    """Every model built here for the task (`optimize build --model` adds yours), the one shown first."""
    choices = showdown.choices(task)
    on_space = bool(os.environ.get("SPACE_ID"))  # the Hub sets it: a visitor there cannot run the build command
    return gr.Dropdown(choices, value=choices[0], label="Model", interactive=len(choices) > 1,
                       info=None if on_space else "Add yours: python -m optimize build --model ID_OR_PATH")


def using(showdown: Showdown, task: str, preset: str | None) -> Showdown:
    try:
        return showdown.using(task, preset)
    except InputError as error:
        raise user_error(str(error)) from error


def fresh_history() -> list:
    """Another model: its latencies start a new chart rather than join the last model's."""
    history = empty_history()
    return [history, latest_run(history), history_points(history)]


def variant_columns(task: str, label: str, lines: int, task_title: str):
    """One column per variant (output + stats), then this run's latency as bars and the
    session's runs as markers, each variant in the same color in both."""
    outputs, stats = [], []
    with gr.Row():  # equal_height spreads each column's blocks over the tallest one's height
        for variant in VARIANTS:
            with gr.Column(min_width=160):
                gr.Markdown(f"## {variant}")  # h2 under the page's h1: a heading level skipped misleads a screen reader's outline
                outputs.append(gr.Textbox(label=f"{label} ({variant})", lines=lines, interactive=False))  # read aloud apart
                stats.append(gr.Markdown())
    history = gr.State(empty_history())
    # y from 0: a latency axis cut above zero makes a 1.2x difference look like 5x; before the first run
    # an empty 0-100 ms axis (open-ended, the empty bars' axis read "0.000000"); runs set the top (chart_tops)
    measure, unit = CHART_MEASURES[task]
    common = dict(y="latency_ms", color="variant", color_map=VARIANT_COLORS, y_title=f"{unit} (lower is better)",
                  height=300, y_lim=[0, 100])  # 260 cut the bar chart's title under slanted names
    with gr.Row():
        # names slanted: level, "pruned" ran into "pruned-optimized" under a phone's 60-pixel bars
        bars = gr.BarPlot(latest_run(empty_history()), x="variant", x_title="variant", elem_id=f"{task}-bars",
                          x_label_angle=-30, title=f"This run: {task_title} {measure} per variant", **common)
        points = gr.ScatterPlot(history_points(empty_history()), x="run", x_title="run", elem_id=f"{task}-runs",
                                title=f"This session: {task_title} {measure} per run", **common)
    return outputs, stats, history, [bars, points]


def check(validate, *args, selected: list[str]) -> list[str]:
    """Validate before anything runs; the message reaches the user as a toast, never a trace."""
    try:
        validate(*args)
        return chosen_variants(selected)
    except InputError as error:
        raise user_error(str(error)) from error


def record(showdown: Showdown, task: str, results: dict, stats: dict, history: pd.DataFrame, run: int) -> list:
    """Fill each column's stats (speedup against this run's baseline) and extend the session's
    history with run `run` (the kept runs' number: the table, the CSV and the charts say the same run); returns
    the history and both charts' values. A run that timed nothing (every variant failed, or one token written) is
    an empty run in the charts, not the previous click's bars under "This run"."""
    baseline = results.get("baseline")
    rows = []
    for variant, result in results.items():
        stats[variant] = stats_markdown(showdown.variant_status(task, variant), result, baseline, task)
        if (latency_ms := chart_ms(result, task)) is not None:
            rows.append({"run": run, "variant": variant, "latency_ms": latency_ms})
    rows = rows or [{"run": run, "variant": VARIANTS[0], "latency_ms": float("nan")}]
    history = pd.concat([history, pd.DataFrame(rows, columns=CHART_COLUMNS)], ignore_index=True)
    history = history[history["run"] > run - HISTORY_RUNS].astype({"run": int, "variant": str, "latency_ms": float})
    return [history, latest_run(history), history_points(history)]
