"""Inference Showdown: one input, every variant answers side by side with its live latency.

A thin Gradio UI over models.showdown; all model logic lives in models/ and optimize/.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import warnings
from pathlib import Path

import gradio as gr
import pandas as pd

from models.catalog import VARIANT_COLORS, VARIANTS
from models.errors import InputError, VariantUnavailable
from models.logs import configure_logging
from models.machine import describe, slower_here
from models.reports import REPORTS_DIR, MeasureHere, bench_markdown, load_length_table, load_report_table, pruning_markdown, report_chart
from models.showdown import Showdown
from models.your_data import Limits
from optimize.first_start import start_background_build
from ui.your_data import your_data_tab

log = logging.getLogger("app")
USER_ERRORS = (InputError, VariantUnavailable)
SEED_CONTEXT = ("The first little pig was very lazy. He didn't want to work at all and he built his house out of "
                "straw. The second little pig worked a little bit harder but he was somewhat lazy too and he built "
                "his house out of sticks. Then, they sang and danced and played together the rest of the day.")
QA_EXAMPLES = [
    [SEED_CONTEXT, "Who worked a little bit harder?", False],
    [SEED_CONTEXT, "What did the first little pig build his house out of?", False],
    [SEED_CONTEXT, "What did the wolf eat for breakfast?", True],  # unanswerable: "no answer" once allowed
]
GENERATION_EXAMPLES = [
    ["What is the capital of France? Answer in one sentence."],
    ["Write a haiku about fast computers."],
    ["Give three tips for writing clear documentation."],
]
CHART_COLUMNS = ["run", "variant", "latency_ms"]
HISTORY_RUNS = 50  # the session chart keeps a visitor's last 50 runs
WAIT_SHOWN_MS = 1.0  # taking a free turn costs microseconds; more means another request computed


def _empty_history() -> pd.DataFrame:
    return pd.DataFrame({"run": pd.Series(dtype="int64"), "variant": pd.Series(dtype="str"),
                         "latency_ms": pd.Series(dtype="float64")})


def _every_variant(frame: pd.DataFrame, run: str | int, latency_ms: float) -> pd.DataFrame:
    """`frame` after a placeholder row per variant: gradio's plots fix their color domain when
    they first draw and never update it, so a variant absent then is drawn in no color at all
    (the session chart that stayed empty). Every frame a chart gets names every variant."""
    rows = pd.DataFrame({"run": run, "variant": list(VARIANTS), "latency_ms": latency_ms})
    return pd.concat([rows.astype(frame.dtypes.to_dict()), frame], ignore_index=True)


def _latest_run(history: pd.DataFrame) -> pd.DataFrame:
    """The bars: the last run, one bar per variant in the catalog's order (a plot keeps its rows'
    order: gradio's `sort` list breaks its front end). A variant that did not answer gets a bar of 0 ms."""
    run = int(history["run"].max()) if len(history) else 1
    latest = _every_variant(history[history["run"] == run], run, 0.0).drop_duplicates("variant", keep="last")
    return latest.sort_values("variant", key=lambda names: names.map(list(VARIANTS).index))


def _chart_tops(history: pd.DataFrame) -> list:
    """Both charts' y range, 0 to a tenth above the slowest run shown: with the top left open, vega
    ends the axis at the tallest bar and cuts its marker in half. Sent in a step of its own after
    the data: gradio 6.17's plots draw no marks when a value and a y_lim arrive in one update."""
    slowest = {"bars": _latest_run(history)["latency_ms"].max(), "points": history["latency_ms"].max()}
    return [gr.update(y_lim=[0, 1.1 * float(top) if top > 0 else None]) for top in slowest.values()]


def _history_points(history: pd.DataFrame) -> pd.DataFrame:
    """The session's runs as markers. Runs are labels ("1", "2", …), in the rows' order: a
    numeric axis over one or two runs ticks at 1.00, 1.20, …"""
    points = history.assign(run=history["run"].astype(str))
    return _every_variant(points, points["run"].iloc[0] if len(points) else "1", float("nan"))


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def _accuracy_text(accuracy: dict, runtime: str = "onnxruntime") -> str:
    if "overall_f1" in accuracy:
        text = (f"held-out SQuAD 2.0 F1 {accuracy['overall_f1']:.1f} (HasAns {accuracy.get('HasAns_f1', 0):.1f}, "
                f"NoAns {accuracy.get('NoAns_f1', 0):.1f})")
        if "margin_rule_f1" in accuracy:
            text += f" · {accuracy['margin_rule_f1']:.1f} with the null margin alone"
        if "forced_f1" in accuracy:
            text += f" · forced-span F1 {accuracy['forced_f1']:.1f}"
        if "everyday_f1" in accuracy:
            text += f" · everyday-set F1 {accuracy['everyday_f1']:.1f}"
        if "agreement_pct" in accuracy:
            text += f" · same span as its source {accuracy['agreement_pct']:.1f} %"
        if accuracy.get("recorded"):
            text += f" · read from a record ({accuracy['recorded']}), not measured on this machine"
        return text
    if "agreement_pct" in accuracy:
        parts = [f"perplexity {accuracy['perplexity']:.2f}"] if "perplexity" in accuracy else []
        if "reading_f1" in accuracy:
            low, high = accuracy.get("reading_f1_ci95", (None, None))
            interval = f" (95% CI {low:.1f} to {high:.1f}, {accuracy['reading_questions']} questions)" if low is not None else ""
            recorded = (f", read from a record measured {accuracy['reading_recorded']}, not on this machine"
                        if accuracy.get("reading_recorded") else ", measured on this machine")
            parts.append(f"reading-comprehension F1 {accuracy['reading_f1']:.1f}{interval}{recorded}")
        if "instruction_pct" in accuracy:
            share = (f" ({accuracy['instruction_of_baseline_pct']:.0f} % of baseline's)"
                     if "instruction_of_baseline_pct" in accuracy else "")
            parts.append(f"instruction set {accuracy['instruction_pct']:.0f} %{share}")
        if accuracy.get("note") == "reference":
            return " · ".join(parts + ["the reference"])
        # an exact export promises its source's model and is gated on agreement; lossy and pruned ones are not
        gated = accuracy.get("promise", "exact" if runtime != "torch" else "pruned") == "exact"
        agreement = f"next-token agreement with its source {accuracy['agreement_pct']:.1f} %" + ("" if gated else " (shown, not gated)")
        if "identical_continuations_pct" in accuracy:
            agreement += f", same 64-token text on {accuracy['identical_continuations_pct']:.0f} % of prompts"
        if accuracy.get("weights_exact"):
            agreement += " (its source's exact weights)"
        return " · ".join(parts + [agreement])
    return accuracy.get("note", "accuracy not measured yet")


def _gate_text(accuracy: dict) -> str:
    missed = accuracy.get("gates_missed")
    return f"\n\n⚠️ missed accuracy gate: {'; '.join(missed)}" if missed else ""


def _speedup(result: dict, baseline: dict | None, task: str) -> str:
    """QA: the baseline's total time over this variant's. Generation: decoding speed over the
    baseline's, with the first token apart: total times of texts of different lengths do not compare."""
    if baseline is None:
        return "speedup: run baseline too"
    if task == "qa":
        return f"**{baseline['latency_ms']['total'] / result['latency_ms']['total']:.2f}x** vs baseline"
    decode, base_decode = result.get("decode_tokens_per_s", 0.0), baseline.get("decode_tokens_per_s", 0.0)
    if not decode or not base_decode:
        return "speedup: too few tokens to time decoding"
    first = baseline["ttft_ms"] / result["ttft_ms"] if result["ttft_ms"] else float("nan")
    return f"decoding **{decode / base_decode:.2f}x** vs baseline · first token {first:.2f}x"


def _stats(status: dict, result: dict, baseline: dict | None, task: str) -> str:
    latency = result["latency_ms"]
    lines = [
        f"**{_ms(latency['total'])}** total · {_speedup(result, baseline, task)}",
        f"tokenize {_ms(latency['tokenize'])} · model {_ms(latency['model'])} · post {_ms(latency['post'])}"
        + (f" · timed {result['timing']}" if result.get("timing") else ""),
    ]
    if latency.get("wait", 0) > WAIT_SHOWN_MS:  # queued behind another request: not in the total
        lines.insert(1, f"⏳ waited {latency['wait']:,.0f} ms for another visitor")
    if task == "generation":
        lines.append(f"first token {_ms(result['ttft_ms'])} (prompt {result.get('prefill_tokens_per_s', 0):,.0f} tokens/s) · "
                     f"**decoding {result.get('decode_tokens_per_s', 0):.1f} tokens/s** · {result['new_tokens']} tokens written")
    else:
        lines.append(f"{result['tokens']} tokens in {result['windows']} window(s) · null margin {result['score']:+.2f}"
                     + (f" · answerability {result['answerability']:+.2f}" if result.get("verifier") and result.get("answerability") is not None else ""))
        if note := unanswerable_note(result):
            lines.insert(0, f"ℹ️ {note}")
    memory = status.get("memory_bytes")
    lines.append(f"size {status['size_bytes'] / 1e6:,.1f} MB on disk"
                 + (f", {memory / 1e6:,.0f} MB in memory" if memory is not None else "")
                 + f" · {_accuracy_text(status['accuracy'], status.get('runtime', 'onnxruntime'))}")
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


def _qa_answer_text(result: dict) -> str:
    return result["answer"] or "(no answer: the model rates it unanswerable)"


def machine_markdown(reference: Path = REPORTS_DIR / "qa.json") -> str:
    """The machine behind the live numbers, and why INT8 may gain less here than in the reports."""
    from models.runners import cpu_threads

    here = describe(cpu_threads())
    versions = ", ".join(f"{name} {here['versions'][name]}" for name in ("torch", "onnxruntime", "transformers")
                         if name in here["versions"])
    text = (f"**This machine:** {here['cpu']} ({here['isa']}; INT8: {here['int8']}), {here['cores']} cores, "
            f"{here['threads']} threads for the models; {versions}.")
    reference_isa = json.loads(reference.read_text()).get("machine", {}).get("isa", "") if reference.exists() else ""
    if why := slower_here(reference_isa):
        text += f"\n\nℹ️ Speedups here may differ from the Benchmarks tab: {why}."
    return text


def _status_markdown(showdown: Showdown) -> str:
    icons = {"ready": "🟢", "building": "🟡", "unavailable": "⚪"}
    rows = ["| task | variant | status | detail |", "|---|---|---|---|"]
    for status in showdown.variants():
        rows.append(f"| {status['task']} | {status['variant']} | {icons[status['status']]} {status['status']} | "
                    f"{status['detail']} |")
    return "\n".join(rows)


def _preset_picker(showdown: Showdown, task: str) -> gr.Dropdown:
    """Every model built here for the task (`optimize build --model` adds yours), the one shown first."""
    choices = showdown.choices(task)
    return gr.Dropdown(choices, value=choices[0], label="Model", interactive=len(choices) > 1,
                       info="Add yours: python -m optimize build --model ID_OR_PATH")


def _using(showdown: Showdown, task: str, preset: str | None) -> Showdown:
    try:
        return showdown.using(task, preset)
    except InputError as error:
        raise gr.Error(str(error)) from error


def _fresh_history() -> list:
    """Another model: its latencies start a new chart rather than join the last model's."""
    history = _empty_history()
    return [history, _latest_run(history), _history_points(history)]


def _ready(showdown: Showdown, task: str) -> list[str]:
    return [s["variant"] for s in showdown.variants() if s["task"] == task and s["status"] == "ready"]


def _variant_columns(task: str, label: str, lines: int, task_title: str):
    """One column per variant (output + stats), then this run's latency as bars and the
    session's runs as markers, each variant in the same color in both."""
    outputs, stats = [], []
    with gr.Row():  # equal_height spreads each column's blocks over the tallest one's height
        for variant in VARIANTS:
            with gr.Column(min_width=160):
                gr.Markdown(f"### {variant}")
                outputs.append(gr.Textbox(label=label, lines=lines, interactive=False))
                stats.append(gr.Markdown())
    history = gr.State(_empty_history())
    # y from 0: a latency axis cut above zero makes a 1.2x difference look like 5x; before the first run
    # an empty 0-100 ms axis (open-ended, the empty bars' axis read "0.000000"); runs set the top (_chart_tops)
    common = dict(y="latency_ms", color="variant", color_map=VARIANT_COLORS, y_title="ms (lower is better)", height=260,
                  y_lim=[0, 100])
    with gr.Row():
        bars = gr.BarPlot(_latest_run(_empty_history()), x="variant", x_title="variant", elem_id=f"{task}-bars",
                          title=f"This run: {task_title} latency per variant", **common)
        points = gr.ScatterPlot(_history_points(_empty_history()), x="run", x_title="run", elem_id=f"{task}-runs",
                                title=f"This session: {task_title} latency per run", **common)
    return outputs, stats, history, [bars, points]


def _check(validate, *args, selected: list[str]) -> list[str]:
    """Validate before anything runs; the message reaches the user as a toast, never a trace."""
    try:
        validate(*args)
        if not selected:
            raise InputError("Select at least one variant.")
    except InputError as error:
        raise gr.Error(str(error)) from error
    return [v for v in VARIANTS if v in selected]


def _record(showdown: Showdown, task: str, results: dict, stats: dict, history: pd.DataFrame) -> list:
    """Fill each column's stats (speedup against this run's baseline) and extend the session's
    history; returns the history and both charts' values."""
    baseline = results.get("baseline")
    run = int(history["run"].max()) + 1 if len(history) else 1
    rows = []
    for variant, result in results.items():
        stats[variant] = _stats(showdown.variant_status(task, variant), result, baseline, task)
        rows.append({"run": run, "variant": variant, "latency_ms": result["latency_ms"]["total"]})
    history = pd.concat([history, pd.DataFrame(rows, columns=CHART_COLUMNS)], ignore_index=True)
    history = history[history["run"] > run - HISTORY_RUNS].astype({"run": int, "variant": str, "latency_ms": float})
    return [history, _latest_run(history), _history_points(history)]


def measure_here_events(measurer: MeasureHere):
    """The button's handler: start the quick bench and follow its progress, or say that one is
    running already (one at a time: two would time each other)."""
    def measure_on_this_machine():
        if not measurer.start():
            yield f"A measurement is already running on this machine; one runs at a time.\n\n{measurer.status()}"
            return
        while measurer.running:
            yield measurer.status()
            measurer.wait(timeout_s=2.0)
        yield measurer.status()
    return measure_on_this_machine


def build_ui(showdown: Showdown, measurer: MeasureHere | None = None) -> gr.Blocks:
    measurer = measurer or MeasureHere()
    statuses = {(s["task"], s["variant"]): s for s in showdown.variants()}

    def answer_click(context: str, question: str, selected: list[str], allow_no_answer: bool, history: pd.DataFrame,
                   preset: str | None = None):
        from models.qa import validate
        chosen = _check(validate, question, context, selected=selected)
        showdown_here = _using(showdown, "qa", preset)
        answers, stats, results = {v: gr.update() for v in VARIANTS}, {v: gr.update() for v in VARIANTS}, {}
        for variant, result in showdown_here.compare(context, question, chosen, bool(allow_no_answer)).items():
            if "error" in result:
                answers[variant], stats[variant] = "", f"⚠️ {result['error']}"
            else:
                results[variant], answers[variant] = result, _qa_answer_text(result)
        charts = _record(showdown_here, "qa", results, stats, history)  # fills `stats` first
        return [*answers.values(), *stats.values(), *charts]

    def generate_click(prompt: str, max_new_tokens: int, selected: list[str], history: pd.DataFrame,
                           preset: str | None = None):
        from models.generation import validate
        chosen = _check(validate, prompt, max_new_tokens, selected=selected)
        showdown_here = _using(showdown, "generation", preset)
        texts, stats, results = {v: gr.update() for v in VARIANTS}, {v: gr.update() for v in VARIANTS}, {}
        unchanged = [gr.skip()] * 3
        for variant in showdown.run_order(chosen):
            texts[variant], stats[variant] = "", "generating…"
            try:
                for update in showdown_here.stream(prompt, variant, max_new_tokens, warm_up=True):
                    texts[variant] = update.text
                    if update.done:
                        results[variant] = update.result
                    yield [*texts.values(), *stats.values(), *unchanged]  # not the charts on every token
            except USER_ERRORS as error:
                stats[variant] = f"⚠️ {error}"
        charts = _record(showdown_here, "generation", results, stats, history)  # fills `stats` first
        yield [*texts.values(), *stats.values(), *charts]

    with gr.Blocks(title="Inference Showdown") as demo:
        gr.Markdown("# Inference Showdown\nOne input; the **baseline**, **optimized**, **pruned** and "
                    "**pruned-optimized** variants answer side by side, each timed live on this machine, "
                    "with its size and its accuracy measured on held-out data.")
        gr.Markdown(machine_markdown(), elem_id="machine")
        with gr.Accordion("Variant status", open=any(s["status"] == "building" for s in statuses.values())):
            status_md = gr.Markdown(_status_markdown(showdown))
        timer = gr.Timer(3.0)
        timer.tick(lambda: _status_markdown(showdown), outputs=status_md, api_visibility="private", queue=False)

        with gr.Tab("Question answering"):
            with gr.Row():
                context = gr.Textbox(label="Context", lines=8, value=SEED_CONTEXT, scale=3)
                with gr.Column(scale=2):
                    question = gr.Textbox(label="Question", value="Who worked a little bit harder?")
                    qa_preset = _preset_picker(showdown, "qa")
                    qa_selected = gr.CheckboxGroup(list(VARIANTS), value=list(VARIANTS), label="Variants")
                    allow_no_answer = gr.Checkbox(
                        value=False, label="Allow 'no answer' (SQuAD 2.0)",
                        info="Off: the best span, as transformers' pipeline returns it. On: 'no answer' when "
                             "the variant rates the question unanswerable.")
                    qa_button = gr.Button("Answer with every variant", variant="primary")
            gr.Examples(QA_EXAMPLES, inputs=[context, question, allow_no_answer])
            qa_answers, qa_stats, qa_history, qa_charts = _variant_columns("qa", "Answer", 1, "QA")
            qa_preset.change(_fresh_history, None, [qa_history, *qa_charts], api_visibility="private")
            qa_button.click(answer_click, [context, question, qa_selected, allow_no_answer, qa_history, qa_preset],
                            [*qa_answers, *qa_stats, qa_history, *qa_charts], api_visibility="private"
                            ).then(_chart_tops, qa_history, qa_charts, queue=False, api_visibility="private")

        with gr.Tab("Text generation"):
            with gr.Row():
                prompt = gr.Textbox(label="Prompt", lines=3, value=GENERATION_EXAMPLES[0][0], scale=3)
                with gr.Column(scale=2):
                    max_new_tokens = gr.Slider(1, 256, value=64, step=1, label="Max new tokens")
                    gen_preset = _preset_picker(showdown, "generation")
                    gen_selected = gr.CheckboxGroup(list(VARIANTS), value=list(VARIANTS), label="Variants")
                    gen_button = gr.Button("Generate with every variant", variant="primary")
            # labels, not rendered samples: gradio 6.17 draws no samples for a one-input Examples in a
            # tab that is not open at load (the tab showed an empty "Examples" box)
            gr.Examples(GENERATION_EXAMPLES, inputs=[prompt], example_labels=[row[0] for row in GENERATION_EXAMPLES])
            gen_texts, gen_stats, gen_history, gen_charts = _variant_columns("generation", "Text", 6, "generation")
            gen_preset.change(_fresh_history, None, [gen_history, *gen_charts], api_visibility="private")
            gen_button.click(generate_click, [prompt, max_new_tokens, gen_selected, gen_history, gen_preset],
                             [*gen_texts, *gen_stats, gen_history, *gen_charts], api_visibility="private"
                             ).then(_chart_tops, gen_history, gen_charts, queue=False, api_visibility="private")

        your_data_tab(showdown, Limits.from_environment())

        with gr.Tab("Benchmarks"):
            gr.Markdown("Measured by `python -m optimize report` on the machine named in each table: "
                        "latency p50/p95, speedup vs baseline, size on disk, held-out accuracy.")
            for task in ("qa", "generation"):
                table, caption = load_report_table(task)
                gr.Markdown(caption)
                gr.Dataframe(table, interactive=False, wrap=True)
                lengths = load_length_table(task)
                if not lengths.empty:
                    gr.Markdown("Latency by context length (p50; speedup over the baseline at the same length): "
                                "a paragraph longer than one window runs as two or three.")
                    gr.Dataframe(lengths, interactive=False, wrap=True)
                chart = report_chart(task)
                if chart:
                    gr.Image(chart, show_label=False, height=320)
            gr.Markdown(pruning_markdown())
            gr.Markdown("### Against what users would pick instead (`python -m optimize bench`)")
            # one above the other, each at full width: side by side, the committed table's nine columns
            # wrapped their headers letter by letter
            gr.Markdown("#### Measured here")
            with gr.Row():
                measure_button = gr.Button("Measure on this machine", variant="secondary", scale=1)
                gr.Markdown("The quick bench (`python -m optimize bench --quick --no-app`), here and now: "
                            "a few minutes, while the live columns' timings share the cores with it.")
            measured = gr.Markdown(measurer.status(), elem_id="measured-here")
            gr.Markdown("#### Committed (`reports/bench.md`)")
            gr.Markdown(bench_markdown())
            measure_button.click(measure_here_events(measurer), None, measured, api_name="measure_here",
                                 concurrency_limit=None)

        with gr.Tab("About"):
            gr.Markdown(about_text())

        gr.api(showdown.variants, api_name="variants")
        gr.api(api_qa(showdown), api_name="qa")
        gr.api(api_generate(showdown), api_name="generate")
        gr.api(api_qa(showdown, with_preset=True), api_name="qa_preset")
        gr.api(api_compare_qa(showdown), api_name="compare_qa")
        gr.api(api_generate(showdown, with_preset=True), api_name="generate_preset")
    return demo


def _messages_for_users(fn):
    """At the UI edge, errors a user can cause become a message (gr.Error), never a trace."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as error:
            raise gr.Error(str(error)) from error
    return wrapper


def api_qa(showdown: Showdown, with_preset: bool = False):
    """`/qa` as embedders already call it (four values), and `/qa_preset` with a fifth, the model."""
    def answer(context: str, question: str, variant: str, handle_impossible_answer: bool, preset: str) -> dict:
        return showdown.using("qa", preset or None).answer(context, question, variant, bool(handle_impossible_answer))

    @_messages_for_users
    def qa(context: str, question: str, variant: str = "optimized", handle_impossible_answer: bool = False) -> dict:
        """Answer `question` from `context` with one variant. As in transformers' pipeline, the best
        span comes back unless `handle_impossible_answer` lets the null score win (answer "");
        `null_wins` and `null_margin` carry the model's null decision either way."""
        return answer(context, question, variant, handle_impossible_answer, "")

    @_messages_for_users
    def qa_preset(context: str, question: str, variant: str = "optimized", handle_impossible_answer: bool = False,
                  preset: str = "") -> dict:
        """As /qa, with `preset`: another model built here (the app's picker; /variants names the one shown)."""
        return answer(context, question, variant, handle_impossible_answer, preset)
    return qa_preset if with_preset else qa


def api_compare_qa(showdown: Showdown):
    @_messages_for_users
    def compare_qa(context: str, question: str, variants: list[str] | None = None,
                   handle_impossible_answer: bool = False) -> dict:
        """What a click of the QA tab computes: every variant named (default: all) answers, each
        timed after one untimed warm-up call, with `speedup` over the baseline's total time."""
        return showdown.compare(context, question, list(variants or VARIANTS), bool(handle_impossible_answer))
    return compare_qa


def api_generate(showdown: Showdown, with_preset: bool = False):
    @_messages_for_users
    def generate(prompt: str, variant: str = "optimized", max_new_tokens: int = 64) -> dict:
        """Generate a reply to `prompt` (through the chat template) with one variant, greedy."""
        return showdown.generate(prompt, variant, max_new_tokens)

    @_messages_for_users
    def generate_preset(prompt: str, variant: str = "optimized", max_new_tokens: int = 64, preset: str = "") -> dict:
        """As /generate, with `preset` as for /qa_preset."""
        return showdown.using("generation", preset or None).generate(prompt, variant, max_new_tokens)
    return generate_preset if with_preset else generate


ABOUT_TEMPLATE = """
**What you see.** Each variant is a real model running here: `baseline` is PyTorch fp32 (eager);
`optimized` is the baseline exported to ONNX, graph-optimized by ONNX Runtime and quantized to
INT8 where its accuracy gates allow (its build steps say what it got; FP16 on a CUDA machine). The
generation baseline comes from a 4-bit GGUF, so its `optimized` carries that GGUF's own 4-bit
weights, bit for bit, with fp32 compute: the same model, gated on giving the same text. `pruned`
and `pruned-optimized` are the structurally pruned model and its optimized export. All variants share one tokenisation and
post-processing path, so only the model differs. On every click each variant is timed on the
call right after one untimed call on the same input (after idle time, a lone call measures how long
the variant slept, not the variant), and the order in which variants run rotates on every click.

**Two QA modes.** By default every variant returns its best span (at most 15 tokens), as
transformers' `question-answering` pipeline does (`handle_impossible_answer=False`,
`max_answer_len=15`); when the model rates the question unanswerable, the span is still shown
with a note "the model rates this unanswerable (answerability …)". Tick "Allow 'no answer' (SQuAD 2.0)"
(API: `handle_impossible_answer=True`) and a variant answers "no answer" whenever its answerability
score is not above its threshold. The score comes from a small verifier each variant fits on four
held-out validation articles (1,563 questions), with its threshold: a logistic regression over the
null margin (the best span's score minus the null score, in logit units), the null score, and
what the question names that the context never mentions (a name, a number, its content words).

**Long contexts.** A context longer than one 384-token window is read as overlapping windows (128
tokens shared), each run at its own length, and the best span over all of them wins. Model time
grows with the windows; the Benchmarks tab gives every variant's latency and speedup at one, two
and three windows, measured side by side.

**Accuracy is measured, not assumed.** QA, two ways, on SQuAD 2.0 articles never used in
training: SQuAD 2.0 EM/F1 (overall, answerable, unanswerable) with each variant's own fitted
verifier and threshold (and, beside it, F1 with the null margin alone deciding), and SQuAD
1.1-style forced-span EM/F1 on the answerable questions; plus F1 on 42 hand-written questions about
everyday texts, 4 of them unanswerable (`optimize/evaluate/everyday_qa.json`). Generation:
perplexity on held-out Wikipedia text, reading-comprehension F1 (held-out SQuAD questions asked
about their paragraph, with a 95 % interval), the score on a public 60-prompt instruction set
(`optimize/evaluate/instruction_set.json`), and greedy agreement with the source. Each variant
keeps one promise, and the build publishes nothing that misses its gate:

{gates}

**Try it on your data.** The "Your data" tab scores every variant on your own questions (SQuAD
JSON, CSV or JSONL): F1, EM, no-answer accuracy, latency and agreement with the baseline, with
the per-question answers to download.

**API.** `/variants`, `/qa`, `/compare_qa` (every variant, as a click), `/generate` and `/score_qa` (your
file) are callable with `gradio_client` (see the README).
"""


def about_text() -> str:
    """The About tab, its gate paragraph generated from the gates the build checks."""
    from optimize.evaluate.gates import PROMISES, gate_descriptions

    gates = "\n".join(f"- **{promise}** ({PROMISES[promise].split(':')[0]}): {text}."
                       for promise, text in gate_descriptions().items())
    return ABOUT_TEMPLATE.replace("{gates}", gates)


# Queue and concurrency. Model work is serialized by the showdown (one model computes at a time,
# timed inside its turn; the time a request waits for its turn is measured and shown apart), so
# gradio's own per-event limit only decides where a request waits: up to CONCURRENCY requests per
# event reach the showdown and wait there, measured; more wait in gradio's queue (the page shows
# their place in line), and beyond QUEUE_SIZE a visitor is told the queue is full. A waiting
# request holds a blocked worker thread and no CPU. With the old limit of 2 and no turn, two
# models computed at once on 2 cores and each reported the other's work as its own.
CONCURRENCY = 8
QUEUE_SIZE = 64
# The server's own threads (HTTP, queue, event handlers, the background builder) run this much
# nicer than the model thread, and a thread holds the GIL at most this long when another asks:
# on 2 cores, taking in the next visitor's request otherwise steals cycles from the compute being
# timed (Showdown.serve_models_first; measured in README "Serving"; 0 turns either off).
SERVING_NICE = int(os.environ.get("SHOWDOWN_SERVING_NICE", "10"))
GIL_SWITCH_INTERVAL_S = float(os.environ.get("SHOWDOWN_SWITCH_INTERVAL", "0.0002"))


def serve(showdown: Showdown, measurer: MeasureHere | None = None, **launch_kwargs) -> gr.Blocks:
    """Build and launch the UI with the queue settings above: the app, its tests and the
    scripts all serve it this one way."""
    demo = build_ui(showdown, measurer)
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=QUEUE_SIZE).launch(**launch_kwargs)
    return demo


def main() -> None:
    configure_logging()
    # gradio 6.17 reads starlette's renamed 422 constant on every queue join; the warning is its, not ours
    warnings.filterwarnings("ignore", message=".*HTTP_422_UNPROCESSABLE_ENTITY.*")
    showdown = Showdown.from_environment()
    showdown.serve_models_first(SERVING_NICE, GIL_SWITCH_INTERVAL_S)
    if os.environ.get("SHOWDOWN_BUILD", "1") != "0":
        start_background_build(showdown)
    serve(showdown, server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
          server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))


if __name__ == "__main__":
    main()
