"""Inference Showdown: one input, every variant answers side by side with its live latency.

A thin Gradio UI over models.showdown; all model logic lives in models/ and optimize/.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from models import settings
from models.catalog import presets_from_environment
from models.your_data import Limits

USAGE = """usage: python app.py   (no options; settings are environment variables, empty = default)

  GRADIO_SERVER_PORT=7860      GRADIO_SERVER_NAME=0.0.0.0   where it listens
  SHOWDOWN_BUILD=1             build missing or stale variants in the background on start (0: serve what is built)
  SHOWDOWN_QA_PRESET, SHOWDOWN_GENERATION_PRESET   a model built here with `python -m optimize build --model`
  SHOWDOWN_HUB_PREFIX=ORG/NAME serve the variants `python -m optimize push` uploaded there
  SHOWDOWN_DEVICE=auto         auto, cpu or cuda          SHOWDOWN_PROMPT_LOOKUP   1 / 0: for every ONNX decoder / none
  SHOWDOWN_THREADS=<usable CPUs> threads per model        SHOWDOWN_ARTIFACTS=artifacts   where variants are built
  SHOWDOWN_SERVING_NICE=10     SHOWDOWN_SWITCH_INTERVAL=0.0002   the web server's priority and GIL switch interval
  SHOWDOWN_SCORE_MAX_ROWS=250  SHOWDOWN_SCORE_MAX_BYTES=2000000  SHOWDOWN_SCORE_MAX_CONTEXT_CHARS=20000   "Your data"
  SHOWDOWN_SHARED_DATA=../shared/data   the SQuAD data the builds' gates read (absent: QA served as not measured)
  SHOWDOWN_NO_RECORDS=0        1: the builds measure every gate here, no committed record read (a slower first start)
  SHOWDOWN_CUDA_GRAPH=1        0: no CUDA graphs for ONNX QA on a GPU
"""


@dataclass(frozen=True)
class StartSettings:
    host: str
    port: int
    nice: int
    switch_interval: float
    build: bool


def start_settings() -> StartSettings:
    """Every setting `python app.py` reads, checked before gradio and the models are imported (seconds), so that a
    typo stops the start in one line at once; the presets too, unless they come from the Hub (read at start)."""
    if not os.environ.get("SHOWDOWN_HUB_PREFIX"):
        presets_from_environment()
    settings.check_model_settings(), Limits.from_environment()
    nice, switch_interval = settings.serving()
    port = settings.server_port()
    host = os.environ.get("GRADIO_SERVER_NAME", "").strip() or "0.0.0.0"
    settings.check_listen(host, port)
    return StartSettings(host, port, nice, switch_interval, bool(settings.flag("SHOWDOWN_BUILD", True)))


if __name__ == "__main__":  # before gradio, which reads GRADIO_SERVER_PORT with int() as it is imported
    if sys.argv[1:]:  # `--help` had started the server
        asked = sys.argv[1] in ("-h", "--help")
        print(USAGE, file=sys.stdout if asked else sys.stderr)
        sys.exit(0 if asked else 2)
    try:  # every setting, before gradio (which reads GRADIO_SERVER_PORT as it is imported) and the models load
        START = start_settings()
    except settings.ConfigError as error:  # a setting that points at nothing stops the start in one line, at once
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)

import gradio as gr  # noqa: E402

from models.catalog import VARIANTS  # noqa: E402
from models.errors import ConfigError, InputError
from models.logs import configure_logging
from models.machine import describe, slower_here
from models.qa import no_answer_flag
from models.measure_here import MeasureHere
from models.reports import REPORTS_DIR, versions_label
from models.showdown import Showdown
from optimize.first_start import start_background_build
from ui.about import about_text
from ui.benchmarks import benchmarks_tab
from ui.columns import page_tab
from ui.errors import USER_ERRORS, user_error
from ui.page import PAGE_CSS, PAGE_HEAD, page_theme
from ui.tasks import GENERATION_EXAMPLES, QA_EXAMPLES, SEED_CONTEXT, generation_tab, qa_tab  # noqa: F401 - the app's examples
from ui.your_data import your_data_tab

log = logging.getLogger("app")


def machine_markdown(reference: Path = REPORTS_DIR / "qa.json") -> str:
    """The machine behind the live numbers, and why INT8 may gain less here than in the reports."""
    here = describe(settings.cpu_threads())
    versions = versions_label(here, ("torch", "onnxruntime", "transformers"))
    text = (f"**This machine:** {here['cpu']} ({here['isa']}; INT8: {here['int8']}), {here['cores']} cores, "
            f"{here['threads']} threads for the models; {versions}.")
    reference_isa = json.loads(reference.read_text()).get("machine", {}).get("isa", "") if reference.exists() else ""
    if why := slower_here(reference_isa):
        text += f"\n\nℹ️ Speedups here may differ from the Benchmarks tab: {why}."
    return text


def _status_markdown(statuses: list[dict]) -> str:
    icons = {"ready": "🟢", "building": "🟡", "unavailable": "⚪"}
    rows = ["| task | variant | status | detail |", "|---|---|---|---|"]
    for status in statuses:
        detail = " ".join(str(status["detail"]).split()).replace("|", "\\|")  # an error's lines or pipes end the row
        state = f"{icons[status['status']]} {status['status']}"
        if status["status"] == "ready" and status.get("accuracy", {}).get("gates_missed"):  # green beside "missed"
            state = "🟠 ready, missed a gate"
        elif status["status"] == "ready" and "served from an earlier build: " in detail:  # its rebuild failed
            state = "🟠 ready, an earlier build"
        rows.append(f"| {status['task']} | {status['variant']} | {state} | {detail} |")
    return "\n".join(rows)


def _building_markdown(statuses: list[dict], measuring: bool = False) -> str:
    """A line above the tabs while variants build (empty once all are built), naming each and its step, and while a
    visitor's "Measure on this machine" runs: the live timings on every tab read slower meanwhile, which no tab said."""
    building = [status for status in statuses if status["status"] == "building"]
    steps = "; ".join(f"{status['task']} / {status['variant']}: {status['detail']}" for status in building)
    lines = [f"🟡 **Building {len(building)} variant{'s' if len(building) > 1 else ''} on this machine** ({steps}). "
             "Built variants answer meanwhile; *Variant status* lists them all."] if building else []
    if measuring:
        lines.append("⏳ **A benchmark is running on this machine** (Benchmarks → Against alternatives): the live "
                     "timings share the cores with it and read slower until it ends.")
    return "\n\n".join(lines)


def _status_texts(showdown: Showdown, measuring: bool = False) -> tuple[str, str]:
    """The building line and the status table, from one read of every variant's state (files, records)."""
    statuses = showdown.variants()
    return _building_markdown(statuses, measuring), _status_markdown(statuses)


def build_ui(showdown: Showdown, measurer: MeasureHere | None = None) -> gr.Blocks:
    measurer = measurer or MeasureHere()
    with gr.Blocks(title="Inference Showdown") as demo:
        gr.Markdown("# Inference Showdown\nOne input; the **baseline**, **optimized**, **pruned** and "
                    "**pruned-optimized** variants answer side by side, each timed live on this machine, "
                    "with its size and its accuracy measured on held-out data.")
        gr.Markdown(machine_markdown(), elem_id="machine")
        # Filled by a timer that sends only what changed, never at page load: in gradio 6.17.3 a component updated
        # while the page mounts (a callable value, a load event), any update of an Accordion, and now and then an
        # update landing as the visitor switches tabs set the page's tabs measuring themselves on every animation
        # frame for as long as the page stays open, in the visitor's browser, which takes it from the models being
        # timed when it runs on the same 2 cores (experiments/app-timing; tests/test_browser.py checks every tab).
        # The Benchmarks tab's "Measure on this machine" status rides the same timer: a page opened during or after a
        # measurement had shown "not measured yet".
        at_start = ("", _status_texts(showdown)[1], measurer.status())  # no building line baked in for later visitors
        building_md = gr.Markdown(at_start[0], elem_id="building")
        with gr.Accordion("Variant status", open=False):
            status_md = gr.Markdown(at_start[1])
        shown = gr.State(at_start)  # what this page shows: only a change is sent
        qa_tab(showdown)
        generation_tab(showdown)
        your_data_tab(showdown, Limits.from_environment())
        measured_md = benchmarks_tab(measurer)

        def refresh(before: tuple[str, str, str]):
            now = (*_status_texts(showdown, measurer.running), measurer.status())
            return tuple(gr.skip() if new == old else new for new, old in zip(now, before)) + (now,)

        gr.Timer(3.0).tick(refresh, shown, [building_md, status_md, measured_md, shown], api_visibility="private",
                           queue=False)
        with page_tab("About"):
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
            raise user_error(str(error)) from error
    return wrapper


def api_qa(showdown: Showdown, with_preset: bool = False):
    """`/qa` as embedders already call it (four values), and `/qa_preset` with a fifth, the model."""
    def answer(context: str, question: str, variant: str, handle_impossible_answer: bool, preset: str) -> dict:
        return showdown.using("qa", preset or None).answer(context, question, variant, no_answer_flag(handle_impossible_answer))

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
        return showdown.compare(context, question, VARIANTS if variants is None else variants, no_answer_flag(handle_impossible_answer))
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


# Queue and concurrency. Model work is serialized by the showdown (one model computes at a time,
# timed inside its turn; the time a request waits for its turn is measured and shown apart), so
# gradio's own per-event limit only decides where a request waits: up to CONCURRENCY requests per
# event reach the showdown and wait there, measured; more wait in gradio's queue (the page shows
# their place in line), and beyond QUEUE_SIZE a visitor is told the queue is full. A waiting
# request holds a blocked worker thread and no CPU. With the old limit of 2 and no turn, two
# models computed at once on 2 cores and each reported the other's work as its own.
CONCURRENCY = 8
QUEUE_SIZE = 64


def serve(showdown: Showdown, measurer: MeasureHere | None = None, **launch_kwargs) -> gr.Blocks:
    """Build and launch the UI with the queue settings above: the app, its tests and the
    scripts all serve it this one way."""
    demo = build_ui(showdown, measurer)
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=QUEUE_SIZE).launch(
        theme=page_theme(), css=PAGE_CSS, head=PAGE_HEAD, **launch_kwargs)
    return demo


def main(start: StartSettings) -> int:
    configure_logging()
    # gradio 6.17 reads starlette's renamed 422 constant on every queue join; the warning is its, not ours
    warnings.filterwarnings("ignore", message=".*HTTP_422_UNPROCESSABLE_ENTITY.*")
    try:  # what start_settings checked, read again: a preset can also be unbuilt or from the Hub
        showdown = Showdown.from_environment()
    except (ConfigError, InputError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    showdown.serve_models_first(start.nice, start.switch_interval)
    if start.build:
        start_background_build(showdown)
    serve(showdown, server_name=start.host, server_port=start.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(START))
