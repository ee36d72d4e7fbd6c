"""The one report type: the build's measured table per task. `python -m optimize report` writes
it (JSON, CSV, Markdown, PNG); the app's Benchmarks tab and the model cards read it."""
from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from models.catalog import REPO_ROOT, VARIANT_COLORS
from models.manifest import rejected_recipes, write_atomically

REPORTS_DIR = REPO_ROOT / "reports"


@dataclass
class Row:
    variant: str
    runtime: str
    parameters: int
    size_mb: float
    accuracy: dict
    latency_p50_ms: float
    latency_p95_ms: float
    speedup_p50: float
    tokens_per_s: float | None = None
    ttft_ms: float | None = None
    decode_tokens_per_s: float | None = None  # generation: after the first token
    prefill_tokens_per_s: float | None = None  # generation: the prompt's tokens over the time to the first token
    new_tokens: int | None = None  # generation: tokens written per timed call
    memory_mb: float | None = None  # resident memory its load added, measured in the report's process
    # QA at longer contexts: [{"tokens", "windows", "p50_ms", "speedup"}], beside the one-window headline
    latency_by_length: list[dict] = field(default_factory=list)


def accuracy_text(accuracy: dict) -> str:
    """A variant's measured accuracy in a few words (the report's column, the build's summary)."""
    if "overall_f1" in accuracy:
        return f"F1 {accuracy['overall_f1']:.1f} / EM {accuracy.get('overall_exact', 0):.1f}"
    if "agreement_pct" in accuracy:
        return (f"agrees with its source {accuracy['agreement_pct']:.1f}%"
                + (f", same text {accuracy['identical_continuations_pct']:.0f}%" if "identical_continuations_pct" in accuracy else "")
                + (f", ppl {accuracy['perplexity']:.2f}" if "perplexity" in accuracy else "")
                + (f", reading F1 {accuracy['reading_f1']:.1f}" if "reading_f1" in accuracy else "")
                + ("" if "reading_f1_ci95" not in accuracy else " ({:.1f}-{:.1f})".format(*accuracy["reading_f1_ci95"]))
                + (f", instructions {accuracy['instruction_pct']:.0f}%" if "instruction_pct" in accuracy else ""))
    return "—"


def accuracy_origins(accuracy: dict) -> list[str]:
    """Which of a variant's accuracy figures were read from a record, with when and where it was measured."""
    labels = (("recorded", "held-out scores (its training record: {})"), ("reading_recorded", "reading F1 ({})"),
              ("instruction_recorded", "instruction set ({})"), ("reference_recorded", "its source's side of every comparison ({})"),
              ("perplexity_recorded", "perplexity ({})"))
    return [label.format(accuracy[key]) for key, label in labels if accuracy.get(key)]


@dataclass
class Report:
    task: str
    preset: str
    workload: str
    machine: dict
    rows: list[Row] = field(default_factory=list)
    created: str = ""
    skipped: dict[str, str] = field(default_factory=dict)  # variant -> why it did not load (a table without it says so)

    def accuracy_text(self, row: Row) -> str:
        return accuracy_text(row.accuracy)

    def accuracy_columns(self, row: Row) -> dict:
        """QA two ways (SQuAD 2.0 with the variant's fitted verifier and threshold, and with the null
        margin alone; forced span on answerable questions) plus the everyday set and span agreement;
        generation in one column."""
        a = row.accuracy
        if self.task != "qa" or "forced_f1" not in a:
            return {"accuracy": self.accuracy_text(row)}
        def pair(spec: str, *keys: str) -> str:  # a measure a build did not record reads "—", not a KeyError
            return spec.format(*(a[key] for key in keys)) if all(key in a for key in keys) else "—"

        return {
            "SQuAD 2.0 EM / F1": pair("{:.1f} / {:.1f}", "overall_exact", "overall_f1"),
            "HasAns / NoAns F1": pair("{:.1f} / {:.1f}", "HasAns_f1", "NoAns_f1"),
            "F1, margin alone (AUC, verifier's)": pair("{:.1f} ({:.2f}, {:.2f})", "margin_rule_f1", "margin_auc",
                                                       "answerability_auc"),
            "forced-span EM / F1": pair("{:.1f} / {:.1f}", "forced_exact", "forced_f1"),
            "everyday F1 (forced)": pair("{:.1f} ({:.1f})", "everyday_f1", "everyday_forced_f1"),
            "same span as source": pair("{:.1f}%", "agreement_pct"),
        }

    def table(self) -> list[dict]:
        out = []
        for row in self.rows:
            line = {
                "variant": row.variant, "runtime": row.runtime, "params (M)": round(row.parameters / 1e6, 1),
                "size (MB)": round(row.size_mb, 1),
                "memory (MB)": round(row.memory_mb, 1) if row.memory_mb is not None else "—",
                **self.accuracy_columns(row),
                "p50 (ms)": round(row.latency_p50_ms, 1), "p95 (ms)": round(row.latency_p95_ms, 1),
                "speedup": f"{row.speedup_p50:.2f}x",
            }
            if self.task == "generation":
                line["tokens written"] = row.new_tokens if row.new_tokens is not None else "—"
                line["tokens/s"] = round(row.tokens_per_s, 1) if row.tokens_per_s else "—"
                line["prompt tokens/s"] = round(row.prefill_tokens_per_s, 0) if row.prefill_tokens_per_s else "—"
                line["decode tokens/s"] = round(row.decode_tokens_per_s, 1) if row.decode_tokens_per_s else "—"
                line["TTFT (ms)"] = round(row.ttft_ms, 1) if row.ttft_ms else "—"
            out.append(line)
        return out

    def length_table(self) -> list[dict]:
        """p50 and speedup per context length, the headline window first: where a visitor's
        paragraph spans two or three windows, this is the speedup they see."""
        out = []
        for row in self.rows:
            if not row.latency_by_length:
                continue
            line = {"variant": row.variant, f"~{self.headline_tokens()} tokens (1 window)":
                    f"{row.latency_p50_ms:.1f} ms ({row.speedup_p50:.2f}x)"}
            for entry in row.latency_by_length:
                windows = f"{entry['windows']} window{'s' if entry['windows'] > 1 else ''}"
                line[f"~{entry['tokens']:,} tokens ({windows})"] = f"{entry['p50_ms']:.1f} ms ({entry['speedup']:.2f}x)"
            out.append(line)
        return out

    def headline_tokens(self) -> str:
        return self.workload.split(" tokens", 1)[0].rsplit(" ", 1)[-1]

    def markdown(self) -> str:
        table = self.table()
        if not table:
            return f"No variants measured for {self.task}."
        lines = [f"**{self.task}** — {self.preset}; {self.workload}; {machine_label(self.machine, self.created)}", ""]
        if versions := versions_label(self.machine):
            lines += [f"Runtimes: {versions}.", ""]
        lines += markdown_table(table)
        if self.skipped:  # a shorter table had replaced the full one with nothing to say a variant was missing
            lines += ["", "Not measured in this run (did not load): "
                      + "; ".join(f"`{variant}`: {why}" for variant, why in self.skipped.items()) + "."]
        if lengths := self.length_table():
            lines += ["", "Latency by context length (p50, speedup over the baseline at the same length):", "",
                      *markdown_table(lengths)]
        lines += ["", "Latency is measured in this run. Accuracy is what each variant's build measured (its manifest)"
                  + ("; these were read from records, measured as shown: " + "; ".join(origins) if (origins := [
                      f"`{row.variant}` {', '.join(found)}" for row in self.rows if (found := accuracy_origins(row.accuracy))])
                     else "") + "."]
        rejected = [(row.variant, line) for row in self.rows for line in rejected_recipes({"metrics": row.accuracy})]
        if rejected:  # what each faster rung missed by: the reason a slower one ships
            lines += ["", "Faster recipes the build measured and did not ship:", "",
                      *(f"- `{variant}`: {line}" for variant, line in rejected)]
        return "\n".join(lines) + "\n"

    def save(self, directory: Path = REPORTS_DIR) -> Path:
        """The chart first, to a side file: a report it cannot draw (a timing that is not a number) fails before the
        committed files are touched, not after its table has replaced them."""
        directory.mkdir(parents=True, exist_ok=True)
        stem = directory / self.task
        table = self.table()
        drawn = directory / f"{self.task}-partial.png"
        if table:
            self.plot(drawn)
        write_atomically(stem.with_suffix(".json"), json.dumps(asdict(self), indent=2) + "\n")
        write_atomically(stem.with_suffix(".md"), self.markdown())
        if table:
            with open(stem.with_suffix(".csv"), "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(table[0]))
                writer.writeheader()
                writer.writerows(table)
            drawn.replace(stem.with_suffix(".png"))
        return stem.with_suffix(".json")

    def plot(self, path: Path) -> None:
        """Accuracy vs latency: up and to the left is better. Generation plots the instruction-set
        score, the one quality measure every variant has on the same footing (agreement is with each
        variant's own source: pruned-optimized's 98 % is agreement with pruned, not with baseline)."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(6, 4), dpi=110)
        for row, accuracy in self.chart_points():
            axis.scatter(row.latency_p50_ms, accuracy, s=60, color=VARIANT_COLORS.get(row.variant),
                         label=f"{row.variant} ({row.speedup_p50:.1f}x)")
        x_title, y_title = self.chart_axes()
        axis.set_xlabel(x_title)
        axis.set_ylabel(y_title)
        axis.set_ylim(0, 100)  # full scales: 1-3 points between variants should look as small as they are
        axis.set_xlim(0, 1.1 * max((row.latency_p50_ms for row in self.rows), default=1))
        axis.legend(fontsize=8, loc="lower right")  # labels beside the points overlapped
        axis.set_title(f"{self.preset}: accuracy vs latency")
        axis.grid(alpha=0.3)
        figure.tight_layout()
        figure.savefig(path)
        plt.close(figure)

    def chart_points(self) -> list[tuple[Row, float]]:
        """Each plotted variant with its accuracy: the chart and its text alternative read the same points."""
        return [(row, accuracy) for row in self.rows
                if (accuracy := row.accuracy.get("overall_f1", row.accuracy.get("instruction_pct"))) is not None]

    def chart_axes(self) -> tuple[str, str]:
        return ("latency p50 (ms)" + (", 64 new tokens" if self.task == "generation" else ""),
                "held-out SQuAD 2.0 F1" if self.task == "qa" else "instruction-set score (%)")

    def chart_description(self) -> str:
        """The chart in words, for a screen reader (the image's alt text) and anyone whose image did not load."""
        latency, accuracy = self.chart_axes()
        points = "; ".join(f"{row.variant}: {value:.1f} at {row.latency_p50_ms:.1f} ms ({row.speedup_p50:.1f}x)"
                           for row, value in self.chart_points())
        return (f"{self.preset}: {accuracy} against {latency}, one point per variant. "
                + (f"{points}." if points else "No point: no variant has a measured accuracy."))

    @classmethod
    def load(cls, path: Path) -> Report:
        data = json.loads(Path(path).read_text())
        data["rows"] = [Row(**row) for row in data["rows"]]
        return cls(**data)


def markdown_table(rows: list[dict]) -> list[str]:
    header = list(rows[0])
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(r[h]) for h in header) + " |" for r in rows)]


def cpu_label(machine: dict) -> str:
    """The CPU and its instruction-set class ("AMD EPYC (avx2)"): INT8 and 4-bit speedups depend on it."""
    return f"{machine.get('cpu', '?')}" + (f" ({machine['isa']})" if machine.get("isa") else "")


def machine_label(machine: dict, created: str) -> str:
    """Where and when a table was measured: numbers from another machine say little about this one."""
    return (f"{cpu_label(machine)}, {machine.get('cores', '?')} cores, {machine.get('threads', '?')} threads; "
            f"measured {created or 'on an unrecorded date'}")


def versions_label(machine: dict, names: tuple[str, ...] | None = None) -> str:
    """The runtime versions a table was measured with ("torch 2.13.0+cpu, onnxruntime 1.31.1, ..."),
    all of them or only `names`, in that order."""
    versions = machine.get("versions", {})
    return ", ".join(f"{name} {versions[name]}" for name in (names or versions) if name in versions)


# What a visitor came for, first: the report's own order put them past the accuracy columns, off to the right of
# the Benchmarks tab's table even at 1,400 px (generation's from 'accuracy' on)
HEADLINE_COLUMNS = ("variant", "speedup", "p50 (ms)", "decode tokens/s", "tokens written", "TTFT (ms)")


def load_report_table(task: str, directory: Path = REPORTS_DIR):
    import pandas as pd

    path = directory / f"{task}.json"
    if not path.exists():
        return pd.DataFrame(), f"No {task} report yet: run `python -m optimize report`."
    report = Report.load(path)
    origins = [f"`{row.variant}` {', '.join(found)}" for row in report.rows if (found := accuracy_origins(row.accuracy))]
    caption = (f"## {'Question answering' if task == 'qa' else 'Text generation'} — {report.preset}\n"
               f"{report.workload}; {machine_label(report.machine, report.created)}. Latency measured in that run; "
               "accuracy as each variant's build measured it"
               + ("; read from records, measured as shown: " + "; ".join(origins) if origins else "") + "."
               + (" Not measured in that run (did not load): " + ", ".join(f"`{v}`" for v in report.skipped) + "."
                  if report.skipped else ""))
    table = pd.DataFrame(report.table())
    first = [column for column in HEADLINE_COLUMNS if column in table.columns]  # in view before any sideways scroll
    return table[first + [column for column in table.columns if column not in first]], caption


def load_length_table(task: str, directory: Path = REPORTS_DIR):
    """The report's latency by context length (QA), empty when it has none."""
    import pandas as pd

    path = directory / f"{task}.json"
    return pd.DataFrame(Report.load(path).length_table() if path.exists() else [])


def report_chart(task: str, directory: Path = REPORTS_DIR) -> tuple[str, str] | None:
    """The report's chart and its text alternative, None before a report drew one (a chart whose report is gone is
    still shown, said in general words)."""
    path, report = directory / f"{task}.png", directory / f"{task}.json"
    if not path.exists():
        return None
    return str(path), (Report.load(report).chart_description() if report.exists()
                       else f"{task} report: accuracy against latency, one point per variant.")


def bench_markdown(directory: Path = REPORTS_DIR) -> str:
    """`python -m optimize bench`'s table (the project vs transformers pipeline and optimum INT8),
    as written: its own heading names the date, the machine and the versions."""
    path = directory / "bench.md"
    if not path.exists():
        return "No benchmark yet: run `python -m optimize bench`."
    return path.read_text()


def pruning_markdown(directory: Path = REPORTS_DIR) -> str:
    """What pruning costs and buys, per candidate (reports/pruning-generation.md, written by hand
    from the build's measurements and experiments/pruned-decoder-candidate/measure.py)."""
    path = directory / "pruning-generation.md"
    return path.read_text() if path.exists() else "No pruning report yet."


def save_rows(name: str, title: str, rows: list[dict], directory: Path = REPORTS_DIR) -> None:
    """A small measured table (the pruning sweeps) as reports/<name>.json and .md."""
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / f"{name}.json", json.dumps(rows, indent=2) + "\n")
    header = list(rows[0])
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(r[h]) for h in header) + " |" for r in rows]
    write_atomically(directory / f"{name}.md", "\n".join(lines) + "\n")
