"""Inference Showdown: one input, every variant answers side by side with its live latency.

A thin Gradio UI over models.showdown; all model logic lives in models/ and optimize/.
"""
from __future__ import annotations

import functools
import logging
import os

import gradio as gr
import pandas as pd

from models.catalog import VARIANTS
from models.errors import InputError, VariantUnavailable
from models.logs import configure_logging
from models.reports import bench_markdown, load_report_table, report_chart
from models.showdown import Showdown

log = logging.getLogger("app")
USER_ERRORS = (InputError, VariantUnavailable)
SEED_CONTEXT = ("The first little pig was very lazy. He didn't want to work at all and he built his house out of "
                "straw. The second little pig worked a little bit harder but he was somewhat lazy too and he built "
                "his house out of sticks. Then, they sang and danced and played together the rest of the day.")
QA_EXAMPLES = [
    [SEED_CONTEXT, "Who worked a little bit harder?"],
    [SEED_CONTEXT, "What did the first little pig build his house out of?"],
    [SEED_CONTEXT, "What did the wolf eat for breakfast?"],  # unanswerable: expect no answer
]
GENERATION_EXAMPLES = [
    ["What is the capital of France? Answer in one sentence."],
    ["Write a haiku about fast computers."],
    ["Give three tips for writing clear documentation."],
]
CHART_COLUMNS = ["run", "variant", "latency_ms"]


def _empty_history() -> pd.DataFrame:
    """Typed from the start so the plot gets numeric axes (an untyped frame plots as categories)."""
    return pd.DataFrame({"run": pd.Series(dtype="int64"), "variant": pd.Series(dtype="str"),
                         "latency_ms": pd.Series(dtype="float64")})


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def _accuracy_text(accuracy: dict) -> str:
    if "overall_f1" in accuracy:
        return (f"held-out F1 {accuracy['overall_f1']:.1f} (HasAns {accuracy.get('HasAns_f1', 0):.1f}, "
                f"NoAns {accuracy.get('NoAns_f1', 0):.1f})")
    if "agreement_pct" in accuracy:
        text = f"next-token agreement {accuracy['agreement_pct']:.1f} %"
        return text + (f", perplexity {accuracy['perplexity']:.2f}" if "perplexity" in accuracy else "")
    return accuracy.get("note", "accuracy not measured yet")


def _gate_text(accuracy: dict) -> str:
    missed = accuracy.get("gates_missed")
    return f"\n\n⚠️ missed accuracy gate: {'; '.join(missed)}" if missed else ""


def _stats(status: dict, result: dict, baseline_ms: float | None, task: str) -> str:
    latency = result["latency_ms"]
    speedup = f"**{baseline_ms / latency['total']:.2f}x** vs baseline" if baseline_ms else "speedup: run baseline too"
    lines = [
        f"**{_ms(latency['total'])}** total · {speedup}",
        f"tokenize {_ms(latency['tokenize'])} · model {_ms(latency['model'])} · post {_ms(latency['post'])}",
    ]
    if task == "generation":
        lines.append(f"first token {_ms(result['ttft_ms'])} · **{result['tokens_per_s']:.1f} tokens/s** "
                     f"({result['new_tokens']} tokens)")
    else:
        lines.append(f"{result['tokens']} tokens in {result['windows']} window(s) · score {result['score']:.2f}")
    lines.append(f"size {status['size_bytes'] / 1e6:,.1f} MB · {_accuracy_text(status['accuracy'])}")
    return "\n\n".join(lines) + _gate_text(status["accuracy"])


def _status_markdown(showdown: Showdown) -> str:
    icons = {"ready": "🟢", "building": "🟡", "unavailable": "⚪"}
    rows = ["| task | variant | status | detail |", "|---|---|---|---|"]
    for status in showdown.variants():
        rows.append(f"| {status['task']} | {status['variant']} | {icons[status['status']]} {status['status']} | "
                    f"{status['detail']} |")
    return "\n".join(rows)


def _ready(showdown: Showdown, task: str) -> list[str]:
    return [s["variant"] for s in showdown.variants() if s["task"] == task and s["status"] == "ready"]


def _variant_columns(label: str, lines: int, chart_title: str):
    """One column per variant (output + stats), and this session's latency chart below them."""
    outputs, stats = [], []
    with gr.Row(equal_height=True):
        for variant in VARIANTS:
            with gr.Column(min_width=160):
                gr.Markdown(f"### {variant}")
                outputs.append(gr.Textbox(label=label, lines=lines, interactive=False))
                stats.append(gr.Markdown())
    history = gr.State(_empty_history())
    chart = gr.LinePlot(_empty_history(), x="run", y="latency_ms", color="variant",
                        title=chart_title, height=260)
    return outputs, stats, history, chart


def _check(validate, *args, selected: list[str]) -> list[str]:
    """Validate before anything runs; the message reaches the user as a toast, never a trace."""
    try:
        validate(*args)
        if not selected:
            raise InputError("Select at least one variant.")
    except InputError as error:
        raise gr.Error(str(error)) from error
    return [v for v in VARIANTS if v in selected]


def _record(showdown: Showdown, task: str, results: dict, stats: dict, history: pd.DataFrame) -> pd.DataFrame:
    """Fill each column's stats (speedup against this run's baseline) and extend the session chart."""
    baseline_ms = results["baseline"]["latency_ms"]["total"] if "baseline" in results else None
    run = int(history["run"].max()) + 1 if len(history) else 1
    rows = []
    for variant, result in results.items():
        stats[variant] = _stats(showdown.variant_status(task, variant), result, baseline_ms, task)
        rows.append({"run": run, "variant": variant, "latency_ms": result["latency_ms"]["total"]})
    history = pd.concat([history, pd.DataFrame(rows, columns=CHART_COLUMNS)], ignore_index=True)
    return history.astype({"run": int, "variant": str, "latency_ms": float})  # numeric axes, not categories


def build_ui(showdown: Showdown) -> gr.Blocks:
    statuses = {(s["task"], s["variant"]): s for s in showdown.variants()}

    def compare_qa(context: str, question: str, selected: list[str], history: pd.DataFrame):
        from models.qa import validate
        chosen = _check(validate, question, context, selected=selected)
        answers, stats, results = {v: gr.update() for v in VARIANTS}, {v: gr.update() for v in VARIANTS}, {}
        for variant in showdown.run_order(chosen):
            try:
                results[variant] = showdown.answer(context, question, variant)
                answers[variant] = results[variant]["answer"] or "(no answer: the null score wins)"
            except USER_ERRORS as error:
                answers[variant], stats[variant] = "", f"⚠️ {error}"
        history = _record(showdown, "qa", results, stats, history)
        return [*answers.values(), *stats.values(), history, history]

    def compare_generation(prompt: str, max_new_tokens: int, selected: list[str], history: pd.DataFrame):
        from models.generation import validate
        chosen = _check(validate, prompt, max_new_tokens, selected=selected)
        texts, stats, results = {v: gr.update() for v in VARIANTS}, {v: gr.update() for v in VARIANTS}, {}
        for variant in showdown.run_order(chosen):
            texts[variant], stats[variant] = "", "generating…"
            try:
                for update in showdown.stream(prompt, variant, max_new_tokens):
                    texts[variant] = update.text
                    if update.done:
                        results[variant] = update.result
                    yield [*texts.values(), *stats.values(), history, history]
            except USER_ERRORS as error:
                stats[variant] = f"⚠️ {error}"
        history = _record(showdown, "generation", results, stats, history)
        yield [*texts.values(), *stats.values(), history, history]

    with gr.Blocks(title="Inference Showdown") as demo:
        gr.Markdown("# Inference Showdown\nOne input; the **baseline**, **optimized**, **pruned** and "
                    "**pruned-optimized** variants answer side by side, each timed live on this machine, "
                    "with its size and its accuracy measured on held-out data.")
        with gr.Accordion("Variant status", open=any(s["status"] == "building" for s in statuses.values())):
            status_md = gr.Markdown(_status_markdown(showdown))
        timer = gr.Timer(3.0)
        timer.tick(lambda: _status_markdown(showdown), outputs=status_md, api_visibility="private", queue=False)

        with gr.Tab("Question answering"):
            with gr.Row():
                context = gr.Textbox(label="Context", lines=8, value=SEED_CONTEXT, scale=3)
                with gr.Column(scale=2):
                    question = gr.Textbox(label="Question", value="Who worked a little bit harder?")
                    qa_selected = gr.CheckboxGroup(list(VARIANTS), value=list(VARIANTS), label="Variants")
                    qa_button = gr.Button("Answer with every variant", variant="primary")
            gr.Examples(QA_EXAMPLES, inputs=[context, question])
            qa_answers, qa_stats, qa_history, qa_chart = _variant_columns(
                "Answer", 1, "This session's QA latency per variant (ms, lower is better)")
            qa_button.click(compare_qa, [context, question, qa_selected, qa_history],
                            [*qa_answers, *qa_stats, qa_history, qa_chart], api_visibility="private")

        with gr.Tab("Text generation"):
            with gr.Row():
                prompt = gr.Textbox(label="Prompt", lines=3, value=GENERATION_EXAMPLES[0][0], scale=3)
                with gr.Column(scale=2):
                    max_new_tokens = gr.Slider(1, 256, value=64, step=1, label="Max new tokens")
                    gen_selected = gr.CheckboxGroup(list(VARIANTS), value=list(VARIANTS), label="Variants")
                    gen_button = gr.Button("Generate with every variant", variant="primary")
            gr.Examples(GENERATION_EXAMPLES, inputs=[prompt])
            gen_texts, gen_stats, gen_history, gen_chart = _variant_columns(
                "Text", 6, "This session's generation latency per variant (ms, lower is better)")
            gen_button.click(compare_generation, [prompt, max_new_tokens, gen_selected, gen_history],
                             [*gen_texts, *gen_stats, gen_history, gen_chart], api_visibility="private")

        with gr.Tab("Benchmarks"):
            gr.Markdown("Measured by `python -m optimize report` on the machine named in each table: "
                        "latency p50/p95, speedup vs baseline, size on disk, held-out accuracy.")
            for task in ("qa", "generation"):
                table, caption = load_report_table(task)
                gr.Markdown(caption)
                gr.Dataframe(table, interactive=False, wrap=True)
                chart = report_chart(task)
                if chart:
                    gr.Image(chart, show_label=False, height=320)
            with gr.Accordion("Against what users would pick instead (python -m optimize bench)", open=True):
                gr.Markdown(bench_markdown())

        with gr.Tab("About"):
            gr.Markdown(ABOUT)

        gr.api(showdown.variants, api_name="variants")
        gr.api(api_qa(showdown), api_name="qa")
        gr.api(api_generate(showdown), api_name="generate")
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


def api_qa(showdown: Showdown):
    @_messages_for_users
    def qa(context: str, question: str, variant: str = "optimized") -> dict:
        """Answer `question` from `context` with one variant; answer "" means no answer."""
        return showdown.answer(context, question, variant)
    return qa


def api_generate(showdown: Showdown):
    @_messages_for_users
    def generate(prompt: str, variant: str = "optimized", max_new_tokens: int = 64) -> dict:
        """Generate a reply to `prompt` (through the chat template) with one variant, greedy."""
        return showdown.generate(prompt, variant, max_new_tokens)
    return generate


ABOUT = """
**What you see.** Each variant is a real model running here: `baseline` is PyTorch fp32 (eager);
`optimized` is the baseline exported to ONNX, graph-optimized by ONNX Runtime and quantized to
INT8 where its accuracy gates allow (its build steps say what it got; FP16 on a CUDA machine); `pruned` and `pruned-optimized` are the
structurally pruned model and its optimized export. All variants share one tokenisation and
post-processing path, so only the model differs. Latency is measured per request after a warm-up,
and the order in which variants run rotates on every request.

**Accuracy is measured, not assumed.** QA: EM/F1 on SQuAD 2.0 articles never used in training,
with the SQuAD 2.0 null score for unanswerable questions. Generation: greedy next-token agreement
with the baseline and perplexity on held-out Wikipedia text.

**API.** `/variants`, `/qa` and `/generate` are callable with `gradio_client` (see the README).
"""


def main() -> None:
    configure_logging()
    showdown = Showdown.from_environment()
    if os.environ.get("SHOWDOWN_BUILD", "1") != "0":
        showdown.start_background_build()
    demo = build_ui(showdown)
    demo.queue(default_concurrency_limit=2).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
    )


if __name__ == "__main__":
    main()
