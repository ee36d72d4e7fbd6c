"""The Benchmarks tab: the committed reports (`optimize report`, `optimize bench`, the pruning
report) and a button that runs the quick bench here and now."""
from __future__ import annotations

import base64
import html
import os
import posixpath
import re
from pathlib import Path

import gradio as gr

from models.catalog import REPO_ROOT
from models.measure_here import MeasureHere
from models.reports import bench_markdown, load_length_table, load_report_table, pruning_markdown, report_chart
from optimize.publish.space import uploaded_by_a_deploy
from ui.columns import page_tab


def measure_here_events(measurer: MeasureHere):
    """The button's handler: start the quick bench, or join the one running (one at a time: two would time each
    other), and follow it to its result; a second visitor's status had frozen at the moment of the click."""
    def measure_on_this_machine():
        joined = "" if measurer.start() else "A measurement was already running on this machine (one runs at a time): following it.\n\n"
        while measurer.running:
            yield joined + measurer.status()
            measurer.wait(timeout_s=2.0)
        yield joined + measurer.status()
    return measure_on_this_machine


def benchmarks_tab(measurer: MeasureHere) -> gr.Markdown:
    """One section per question a visitor brings (how fast is each task, what did pruning cost, how does it
    stand against what they would run instead), each shut but the first, so that no answer sits under a page of
    the others."""
    with page_tab("Benchmarks"):
        gr.Markdown("Measured by `python -m optimize report` and `python -m optimize bench` on the machine named in "
                    "each table: latency p50/p95, speedup vs baseline, size on disk, held-out accuracy.")
        # sections, not sub-tabs: gradio 6.17.3's tabs inside a tab loop on animation frames (ui.columns.page_tab)
        for task, label in (("qa", "QA report"), ("generation", "Generation report")):
            with gr.Accordion(label, open=task == "qa"):
                _report(task)
        with gr.Accordion("Pruning", open=False):
            committed_markdown(pruning_markdown(), "Pruning report")
        with gr.Accordion("Against alternatives", open=False):
            return _against_alternatives(measurer)


def _report(task: str) -> None:
    table, caption = load_report_table(task)
    gr.Markdown(caption)
    gr.Dataframe(table, interactive=False, wrap=True)
    lengths = load_length_table(task)
    if not lengths.empty:
        gr.Markdown("Latency by context length (p50; speedup over the baseline at the same length): "
                    "a paragraph longer than one window runs as two or more.")
        gr.Dataframe(lengths, interactive=False, wrap=True)
    if drawn := report_chart(task):
        gr.HTML(chart_html(*drawn))


# [text](path) or [text](path "title"), not an image's ![..](..), not a URL with a scheme, not an anchor
RELATIVE_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((?![a-z][a-z0-9+.-]*:|#)([^)\s]+)(?:\s+\"[^\"]*\")?\)", re.IGNORECASE)


def repository_links(markdown: str, folder: str) -> str:
    """A committed Markdown file's relative links (`[report](verify-generation.md)`) point into the repository, not
    at the page: in the app they led to a Not Found page. On a Space, one to a file the deploy uploads goes to the
    Space's copy; any other becomes its text and the file's path in the repository."""
    space = os.environ.get("SPACE_ID")

    def mend(link: re.Match) -> str:
        text, path = link.group(1), posixpath.normpath(posixpath.join(folder, link.group(2)))
        if space and uploaded_by_a_deploy(path) and (REPO_ROOT / path).is_file():
            return f"[{text}](https://huggingface.co/spaces/{space}/blob/main/{path})"
        return f"{text} (`{path}`)"
    return RELATIVE_LINK.sub(mend, markdown)


def committed_markdown(markdown: str, name: str) -> gr.Markdown:
    """A committed file of reports/ on the page: its links mended, its tables scrollable by keyboard."""
    return gr.Markdown(keyboard_scrollable(repository_links(markdown, "reports"), name))


def keyboard_scrollable(markdown: str, name: str) -> str:
    """Markdown whose wide tables scroll sideways on a phone, in a named region that takes keyboard focus: without
    it the scroll box could be scrolled only by touch or mouse (axe-core's scrollable-region-focusable)."""
    return f'<div role="region" title="{html.escape(name)}" tabindex="0">\n\n{markdown}\n\n</div>'  # gradio drops aria-label


def chart_html(path: str, description: str) -> str:
    """The report's chart inline, with its points in words as alt text: gradio 6.17's image gives every picture an
    empty alt, which hides the chart from a screen reader."""
    encoded = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(description)}" '
            'style="max-height: 320px; max-width: 100%; display: block; margin: auto">')


def _against_alternatives(measurer: MeasureHere) -> gr.Markdown:
    """Returns the measurement's status line, which the page's timer keeps current (app.build_ui)."""
    gr.Markdown("## Against what users would pick instead (`python -m optimize bench`)")
    # one above the other, each at full width: side by side, the committed table's nine columns
    # wrapped their headers letter by letter
    gr.Markdown("### Measured here")
    with gr.Row():
        measure_button = gr.Button("Measure on this machine", variant="secondary", scale=1)
        gr.Markdown("The quick bench (`python -m optimize bench --quick --no-app`), here and now: a few minutes "
                    "(more the first time: it exports optimum's INT8 models to compare with), while the live "
                    "columns' timings share the cores with it.")
    measured = gr.Markdown(measurer.status(), elem_id="measured-here")  # kept current by the page's timer (app.py)
    gr.Markdown("### Committed (`reports/bench.md`)")
    committed_markdown(bench_markdown(), "Committed benchmark")
    measure_button.click(measure_here_events(measurer), None, measured, api_name="measure_here",
                         concurrency_limit=None)
    return measured
