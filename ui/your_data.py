"""The "Your data" tab and its `/score_qa` API: a visitor's own questions, scored by every variant."""
from __future__ import annotations

import time

import gradio as gr
import pandas as pd
from gradio.data_classes import FileData
from gradio.utils import get_upload_folder, is_in_or_equal

from models.catalog import VARIANT_COLORS, VARIANTS
from models.qa import no_answer_flag
from models.showdown import Showdown
from models.your_data import FORMATS, ROW_COLUMNS, SUMMARY_COLUMNS, Limits, read_file, read_rows, score, summary_markdown
from ui.columns import page_tab
from ui.errors import USER_ERRORS, user_error
from ui.runs import write_csv

EXAMPLE_CSV = ("context,question,answer\n"
               '"The second little pig built his house out of sticks.",What did the second pig build his house out of?,sticks\n'
               '"The second little pig built his house out of sticks.",What did the wolf eat?,\n')


def your_data_tab(showdown: Showdown, limits: Limits) -> None:
    with page_tab("Your data"):
        gr.Markdown(f"Score the variants on **your** questions: upload a {FORMATS} — an empty answer means "
                    f"\"no answer\"; in an `answers` cell, several answers are separated by `|` or written as a JSON list "
                    f"— or paste CSV / JSONL below. This Space takes {limits.text()}. Each variant "
                    "answers every question on this machine, one question at a time (other visitors keep their "
                    "turns); F1 and EM are the official SQuAD metric, latency is each call's total time.")
        with gr.Row():
            upload = gr.File(label="Your questions", file_types=[".json", ".jsonl", ".csv"], type="filepath",
                             elem_id="your-data-upload")
            with gr.Column():
                pasted = gr.Textbox(label="…or paste CSV / JSONL", lines=5, placeholder=EXAMPLE_CSV)
                variants = gr.CheckboxGroup(list(VARIANTS), value=list(VARIANTS), label="Variants")
                allow = gr.Checkbox(value=True, label="Allow 'no answer' (SQuAD 2.0)")
                button = gr.Button("Score every variant on my data", variant="primary")
        summary = gr.Dataframe(pd.DataFrame(columns=SUMMARY_COLUMNS), label="Per variant", interactive=False, wrap=True,
                               elem_id="your-data-summary")
        chart = gr.BarPlot(pd.DataFrame({"variant": list(VARIANTS), "F1": [0.0] * len(VARIANTS)}), x="variant", y="F1",
                           color="variant", color_map=VARIANT_COLORS, y_lim=[0, 100], height=240,
                           title="F1 on your data (higher is better)", elem_id="your-data-f1")
        with gr.Row():
            download = gr.File(label="Every answer, one row per question and variant (CSV)", elem_id="your-data-csv")
            markdown = gr.Code(label="This comparison as Markdown (copy it)", language="markdown", elem_id="your-data-md")

        def score_click(path: str | None, text: str, chosen: list[str], allow_no_answer: bool,
                        progress=gr.Progress()):
            if not path and not (text or "").strip():  # it said "The file is empty" of a file never uploaded
                raise user_error(f"Nothing to score yet: upload a {FORMATS}, or paste CSV / JSONL rows (the grey text "
                                 "in the box is an example).")
            try:
                items = read_file(path, limits) if path else read_rows("pasted", (text or "").encode(), limits)
                result = score(showdown.answer, items, chosen, bool(allow_no_answer),
                               lambda done, total: progress(done / total, desc=f"{done:,} of {total:,} answers"))
            except USER_ERRORS as error:
                raise user_error(str(error)) from error
            table = pd.DataFrame(result["summary"])
            scored = table[table["questions"] > 0]
            if scored.empty:  # no chosen variant answered: say why instead of an empty chart
                raise user_error("No variant answered: " + "; ".join(f"{r['variant']}: {r['error']}" for r in result["summary"]))
            csv_path = write_csv(result["rows"], ROW_COLUMNS, "your-data")
            note = (f"{len(items)} questions, {showdown.preset('qa').name}, "  # which model: the tab has no picker
                    f"scored {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
            if missing := result["gold_not_in_context"]:
                warning = (f"{len(missing)} gold answer(s) do not occur in their context (row {', '.join(map(str, missing[:5]))}"
                           f"{', …' if len(missing) > 5 else ''}): no span can match them exactly")
                gr.Warning(warning)
                note += f"; {warning}"
            return table, scored[["variant", "F1"]], str(csv_path), summary_markdown(result["summary"], note)

        button.click(score_click, [upload, pasted, variants, allow], [summary, chart, download, markdown],
                     api_visibility="private")
        gr.api(api_score_qa(showdown, limits), api_name="score_qa")


def api_score_qa(showdown: Showdown, limits: Limits):
    def score_qa(file: FileData, variants: list[str] | None = None, handle_impossible_answer: bool = True) -> dict:
        """Score your own QA file (SQuAD JSON, CSV or JSONL of context, question, answer(s)) with
        each variant: `summary` per variant (EM, F1, HasAns F1, no-answer accuracy, latency p50/p95,
        share of answers the same as the baseline's), `rows`, one per question and variant, and
        `gold_not_in_context`, the rows whose gold answers their context does not hold."""
        path = file.get("path") if isinstance(file, dict) else getattr(file, "path", None)
        if not path or not is_in_or_equal(path, get_upload_folder()):  # only what the client uploaded
            raise user_error("Send the file as an upload (gradio_client: handle_file(path)).")
        try:
            return score(showdown.answer, read_file(path, limits), VARIANTS if variants is None else variants,
                         no_answer_flag(handle_impossible_answer))
        except USER_ERRORS as error:
            raise user_error(str(error)) from error
    return score_qa
