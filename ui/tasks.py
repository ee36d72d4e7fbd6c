"""The two task tabs: QA and text generation, each a row of inputs, the variants' columns and the
charts; a click times every chosen variant as the median of three calls on the same input, the first after one
untimed warm-up call."""
from __future__ import annotations

import json
import logging
import time

import gradio as gr
import pandas as pd

from models.catalog import VARIANTS
from models.errors import fault_message
from models.showdown import Showdown
from ui.columns import (chart_tops, check, fresh_history, page_tab, preset_picker, qa_answer_text, record, using,
                        variant_columns)
from ui.errors import USER_ERRORS
from ui.runs import kept_runs_outputs, kept_runs_row, next_run

NOT_RUN = "not selected for this run"  # a column a click leaves out says so, instead of an earlier click's numbers
log = logging.getLogger("app")


def failed(variant: str, error: Exception) -> str:
    """A column's line for a fault of ours (not the visitor's): the click goes on with the other variants."""
    log.exception("%s failed", variant)
    return fault_message(error)
# BROWSER_LOAD: a visitor's browser on the same 2 cores takes them from the models being timed; gradio's animated
# progress overlay and a redraw on every generated token made it take the most (experiments/app-timing), so the task
# buttons show no overlay (their columns say what runs) and the text grows at most this often.
STREAM_INTERVAL_S = 0.25
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


def example_buttons(examples: list[list], inputs: list, label_column: int) -> None:
    """Examples that fill their inputs in the browser. gr.Examples asks the server for the values first, so a
    task button clicked within that round trip (longer on a visitor's slow network) sent the previous input
    while the box already showed the example (docs/measurements.md)."""
    gr.Markdown("Examples", elem_classes="examples-label")
    with gr.Row():
        for example in examples:
            values = example if len(inputs) > 1 else example[0]
            gr.Button(example[label_column], size="sm", variant="secondary", scale=0, min_width=160).click(
                None, None, inputs, js=f"() => {json.dumps(values)}", api_visibility="private")


def unchanged() -> list[dict]:
    """The history and charts, the kept runs, the button: written once, at the end (fresh updates: gradio may edit
    them)."""
    return [gr.skip() for _ in range(7)]


QA_BUTTON, GENERATION_BUTTON = "Answer with every variant", "Generate with every variant"


def ready(label: str) -> dict:
    return gr.update(value=label, interactive=True)


def checked(validate, *inputs, selected: list[str]):
    """`check`, the chosen variants returned (`chosen = yield from checked(...)`); a rejected input empties the
    columns first: the last click's answers and numbers had stood under its error, read as its own."""
    try:
        return check(validate, *inputs, selected=selected)
    except gr.Error:
        yield [*("" for _ in VARIANTS), *("" for _ in VARIANTS), *unchanged()]
        raise


def working(verb: str, chosen: list[str]) -> dict:
    """The button says what runs and takes no second click meanwhile: the page's own progress overlay stays off
    (BROWSER_LOAD), and a long context's minutes had shown nothing in view."""
    return gr.update(value=f"{verb} {len(chosen)} variant{'s' * (len(chosen) > 1)}…", interactive=False)


def qa_tab(showdown: Showdown) -> None:
    def answer_click(context: str, question: str, selected: list[str], allow_no_answer: bool, history: pd.DataFrame,
                     runs: list[dict], preset: str | None = None):
        from models.qa import validate
        chosen = yield from checked(validate, question, context, selected=selected)
        showdown_here = using(showdown, "qa", preset)
        answers, stats, results = {v: "" for v in VARIANTS}, {v: NOT_RUN for v in VARIANTS}, {}
        yield [*answers.values(), *(stats | {v: "timing…" for v in chosen}).values(), *unchanged()[:-1],
               working("Timing", chosen)]  # shown while it works
        try:
            compared = showdown_here.compare(context, question, chosen, bool(allow_no_answer))
        except USER_ERRORS:
            raise
        except Exception as error:  # noqa: BLE001 - a fault of ours: said in every column, the page not left "timing…"
            compared = {variant: {"error": failed(variant, error)} for variant in chosen}
        for variant, result in compared.items():
            if "error" in result:
                answers[variant], stats[variant] = "", f"⚠️ {result['error']}"
            else:
                results[variant], answers[variant] = result, qa_answer_text(result)
        charts = record(showdown_here, "qa", results, stats, history, next_run(runs))  # fills `stats` first
        kept = kept_runs_outputs(runs, showdown_here.preset("qa").name, question, results, "qa",
                                 {v: stats[v] for v in chosen if v not in results})
        yield [*answers.values(), *stats.values(), *charts, *kept, gr.skip()]  # the button: `ready` below

    with page_tab("Question answering"):
        with gr.Row():
            context = gr.Textbox(label="Context", lines=8, value=SEED_CONTEXT, scale=3)
            with gr.Column(scale=2):
                question = gr.Textbox(label="Question", value="Who worked a little bit harder?")
                # under its input, not under the options: below them it sat past the fold of an 800x600 embed
                qa_button = gr.Button(QA_BUTTON, variant="primary")
                qa_preset = preset_picker(showdown, "qa")
                qa_selected = gr.CheckboxGroup(list(VARIANTS), value=list(VARIANTS), label="Variants")
                allow_no_answer = gr.Checkbox(
                    value=False, label="Allow 'no answer' (SQuAD 2.0)",
                    info="Off: the best span, as transformers' pipeline returns it. On: 'no answer' when "
                         "the variant rates the question unanswerable.")
        example_buttons(QA_EXAMPLES, [context, question, allow_no_answer], label_column=1)
        qa_answers, qa_stats, qa_history, qa_charts = variant_columns("qa", "Answer", 1, "QA")
        qa_runs, qa_download, qa_table = kept_runs_row("qa")
        qa_preset.change(fresh_history, None, [qa_history, *qa_charts], api_visibility="private")
        gr.on([qa_button.click, question.submit],  # Enter in the question answers, as a search box does
              answer_click, [context, question, qa_selected, allow_no_answer, qa_history, qa_runs, qa_preset],
              [*qa_answers, *qa_stats, qa_history, *qa_charts, qa_runs, qa_download, qa_table, qa_button],
              api_visibility="private", show_progress="hidden"  # its own "timing…" (BROWSER_LOAD)
              ).then(chart_tops, qa_history, qa_charts, queue=False, api_visibility="private"
              ).then(lambda: ready(QA_BUTTON), None, qa_button, queue=False, api_visibility="private")  # after a fault too


def generation_tab(showdown: Showdown) -> None:
    def generate_click(prompt: str, max_new_tokens: int, selected: list[str], history: pd.DataFrame,
                       runs: list[dict], preset: str | None = None):
        from models.generation import validate
        chosen = yield from checked(validate, prompt, max_new_tokens, selected=selected)
        showdown_here = using(showdown, "generation", preset)
        texts, stats, results = {v: "" for v in VARIANTS}, {v: NOT_RUN for v in VARIANTS}, {}
        stats |= {v: "waiting for its turn…" for v in chosen}
        yield [*texts.values(), *stats.values(), *unchanged()[:-1],  # at once: the last click's texts had stood until a token
               working("Generating with", chosen)]
        shown = 0.0
        for variant, update in showdown_here.stream_each(prompt, showdown.run_order(chosen), max_new_tokens, warm_up=True):
            if isinstance(update, Exception):  # this variant's; the others still run
                stats[variant] = f"⚠️ {update}" if isinstance(update, USER_ERRORS) else f"⚠️ {fault_message(update)}"
                yield [*texts.values(), *stats.values(), *unchanged()]
                continue
            texts[variant] = update.text
            if update.done:
                results[variant] = update.result
                stats[variant] = (f"decoding {update.result.get('decode_tokens_per_s', 0):.1f} tokens/s · "
                                  f"{update.result['new_tokens']} tokens written (speedups once all have run)")
            else:
                stats[variant] = "generating…"
            if update.done or time.perf_counter() - shown >= STREAM_INTERVAL_S:
                shown = time.perf_counter()
                yield [*texts.values(), *stats.values(), *unchanged()]  # not the charts on every token
        charts = record(showdown_here, "generation", results, stats, history, next_run(runs))  # fills `stats` first
        kept = kept_runs_outputs(runs, showdown_here.preset("generation").name, prompt, results, "generation",
                                 {v: stats[v] for v in chosen if v not in results})
        yield [*texts.values(), *stats.values(), *charts, *kept, gr.skip()]

    with page_tab("Text generation"):
        with gr.Row():
            with gr.Column(scale=3):
                prompt = gr.Textbox(label="Prompt", lines=3, value=GENERATION_EXAMPLES[0][0])
                gen_button = gr.Button(GENERATION_BUTTON, variant="primary")  # in view, as QA's
            with gr.Column(scale=2):
                max_new_tokens = gr.Slider(1, 256, value=64, step=1, label="Max new tokens")
                gen_preset = preset_picker(showdown, "generation")
                gen_selected = gr.CheckboxGroup(list(VARIANTS), value=list(VARIANTS), label="Variants")
        example_buttons(GENERATION_EXAMPLES, [prompt], label_column=0)
        gen_texts, gen_stats, gen_history, gen_charts = variant_columns("generation", "Text", 6, "generation")
        gen_runs, gen_download, gen_table = kept_runs_row("generation")
        gen_preset.change(fresh_history, None, [gen_history, *gen_charts], api_visibility="private")
        gen_button.click(generate_click, [prompt, max_new_tokens, gen_selected, gen_history, gen_runs, gen_preset],
                         [*gen_texts, *gen_stats, gen_history, *gen_charts, gen_runs, gen_download, gen_table, gen_button],
                         api_visibility="private", show_progress="hidden"  # the texts grow instead (BROWSER_LOAD)
                         ).then(chart_tops, gen_history, gen_charts, queue=False, api_visibility="private"
                         ).then(lambda: ready(GENERATION_BUTTON), None, gen_button, queue=False, api_visibility="private")
