"""Runs a visitor can keep: every run of the session as one CSV, and the last run as a Markdown table
to paste into an issue or a chat. The charts show the same runs; these keep their numbers."""
from __future__ import annotations

import contextlib
import csv
import tempfile
import time
import uuid
from pathlib import Path

import gradio as gr

from models.catalog import VARIANTS
from ui.columns import speedup

KEPT_RUNS = 50  # as the session chart (ui/columns.HISTORY_RUNS)
COLUMNS = ("run", "preset", "variant", "input", "output", "total_ms", "model_ms", "speedup", "tokens",
           "tokens_per_s", "prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "device", "timing")


def add_run(runs: list[dict], preset: str, text_in: str, results: dict[str, dict], task: str,
            failures: dict[str, str] | None = None) -> list[dict]:
    """This click's results, one row per variant in the catalog's order, after the session's earlier runs; the
    speedup is the one the variant's column shows (generation: decoding speed). `failures`: chosen variants that
    gave no result, with their column's message, kept as rows without numbers (a pasted table must not hide them)."""
    run = next_run(runs)
    baseline = results.get("baseline")
    rows = []
    for variant in VARIANTS:  # every answer is a catalog variant
        if variant not in results:
            if variant in (failures or {}):
                rows.append({column: None for column in COLUMNS} | {"run": run, "preset": preset, "variant": variant,
                                                                     "input": text_in[:500], "output": failures[variant],
                                                                     "timing": "failed"})
            continue
        result = results[variant]
        ratio = speedup(result, baseline, task)
        rows.append({
            "run": run, "preset": preset, "variant": variant, "input": text_in[:500],
            "output": result.get("answer", result.get("text", "")), "total_ms": round(result["latency_ms"]["total"], 2),
            "model_ms": round(result["latency_ms"]["model"], 2), "speedup": None if ratio is None else round(ratio, 2),  # as the column shows it
            "tokens": result.get("new_tokens", result.get("tokens")), "tokens_per_s": _rounded(result.get("tokens_per_s")),
            "prefill_tokens_per_s": _rounded(result.get("prefill_tokens_per_s")),
            "decode_tokens_per_s": _rounded(result.get("decode_tokens_per_s") or None),  # one token: not timed, not 0
            "ttft_ms": _rounded(result.get("ttft_ms")),
            "device": result.get("device", "cpu"), "timing": result.get("timing", ""),
        })
    kept = [row for row in runs if row["run"] > run - KEPT_RUNS]
    return kept + rows


def next_run(runs: list[dict]) -> int:
    return max((row["run"] for row in runs), default=0) + 1


def _rounded(value) -> float | None:
    return None if value is None else round(float(value), 2)


def _cell(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def runs_csv(runs: list[dict], task: str) -> str | None:
    """The session's runs as a CSV file for the download button (None before the first run)."""
    if not runs:
        return None
    return str(write_csv(runs, COLUMNS, f"{task}-runs"))


CSV_DIR = Path(tempfile.gettempdir()) / "showdown-csv"
CSV_KEPT_S = 3600  # a download is fetched within seconds; an hour-old file is no one's


def write_csv(rows: list[dict], columns, prefix: str) -> Path:
    """A download's CSV, every cell a visitor wrote kept inert, in one folder for the process, files older than an
    hour removed on the way: a folder per click had piled up for as long as the app ran."""
    CSV_DIR.mkdir(exist_ok=True)
    for old in CSV_DIR.glob("*.csv"):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > CSV_KEPT_S:
                old.unlink()
    path = CSV_DIR / f"{prefix}-{uuid.uuid4().hex[:12]}.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows({key: inert(value) for key, value in row.items()} for row in rows)
    return path


def inert(value):
    """A visitor's text in a CSV cell, as text: a spreadsheet runs a cell that starts with = + - @ as a formula."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def last_run_markdown(runs: list[dict], task: str) -> str:
    """The last run as a Markdown table: the comparison a visitor pastes elsewhere."""
    if not runs:
        return ""
    run = runs[-1]["run"]
    rows = [row for row in runs if row["run"] == run]
    generation = task == "generation"
    header = ("| variant | text | tokens written | first token (ms) | decode tokens/s | decoding speedup | runs on |" if generation
              else "| variant | answer | total (ms) | model (ms) | speedup | runs on |")
    lines = [f"Run {run} ({rows[0]['preset']}), on: {rows[0]['input'][:80]!r}", "", header,
             "|---" * header.count(" | ") + "|---|"]
    for row in rows:
        output = " ".join(str(row["output"]).split())[:60].replace("|", "\\|") or ("(empty)" if generation else "(no answer)")
        speedup_cell = f"{row['speedup']:.2f}x" if row["speedup"] else "—"
        measures = ([_cell(row["tokens"], "d"), _cell(row["ttft_ms"], ".1f"), _cell(row["decode_tokens_per_s"], ".1f")]
                    if generation else [_cell(row["total_ms"], ".1f"), _cell(row["model_ms"], ".1f")])
        cells = [row["variant"], output, *measures, speedup_cell, row["device"] or "—"]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def kept_runs_row(task: str) -> tuple[gr.State, gr.DownloadButton, gr.Textbox]:
    """Under the charts: the CSV download and the copyable table (both fill after the first run)."""
    runs = gr.State([])
    with gr.Row():
        table = gr.Textbox(label="This run as a Markdown table (copy it with the button)", lines=4, interactive=False,
                           buttons=["copy"], elem_id=f"{task}-run-table", scale=3)
        download = gr.DownloadButton("Download this session's runs (CSV)", value=None, elem_id=f"{task}-runs-csv", scale=1,
                                     interactive=False)  # greyed until a run: a click on nothing did nothing, silently
    return runs, download, table


def kept_runs_outputs(runs: list[dict], preset: str, text_in: str, results: dict[str, dict], task: str,
                      failures: dict[str, str] | None = None) -> list:
    """The three outputs after a click: the runs, the CSV and the table."""
    runs = add_run(runs, preset, text_in, results, task, failures)
    csv_path = runs_csv(runs, task)
    return [runs, gr.DownloadButton(value=csv_path, interactive=csv_path is not None), last_run_markdown(runs, task)]
