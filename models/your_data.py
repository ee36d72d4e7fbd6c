"""A visitor's own QA data, scored by every chosen variant: "on *my* questions, how do they compare?".

Reads SQuAD JSON, CSV or JSONL (context, question, answer or answers; an empty answer means "no
answer"), within limits a shared Space can afford; every problem a file can have becomes an
InputError naming it and the row. Scoring calls the showdown one question at a time, so other
visitors' requests take their turns in between.
"""
from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models import settings
from models.catalog import chosen_variants
from models.errors import InputError, UnknownVariant, VariantUnavailable, fault_message
from models.squad_metric import best_of, normalize_answer

log = logging.getLogger(__name__)

FORMATS = ".json (SQuAD), .jsonl or .csv with columns context, question, answer (or answers)"


@dataclass(frozen=True)
class Limits:
    """What one upload may hold on a shared Space; each is an environment variable's default."""
    max_rows: int = 250
    max_bytes: int = 2_000_000
    max_context_chars: int = 20_000
    max_question_chars: int = 1_000

    @classmethod
    def from_environment(cls) -> Limits:
        return cls(max_rows=settings.number("SHOWDOWN_SCORE_MAX_ROWS", cls.max_rows, int, minimum=1),
                   max_bytes=settings.number("SHOWDOWN_SCORE_MAX_BYTES", cls.max_bytes, int, minimum=1),
                   max_context_chars=settings.number("SHOWDOWN_SCORE_MAX_CONTEXT_CHARS", cls.max_context_chars, int, minimum=1))

    def text(self) -> str:
        return (f"at most {self.max_rows:,} questions, {self.max_bytes / 1e6:.1f} MB, "
                f"{self.max_context_chars:,} characters per context")


@dataclass(frozen=True)
class Item:
    row: int  # as the visitor counts: the CSV data row, the JSONL line, the n-th question of a SQuAD file
    context: str
    question: str
    answers: tuple[str, ...]  # empty: the question has no answer in the context


# --- reading ---------------------------------------------------------------------------------------
def read_file(path: str | Path, limits: Limits = Limits()) -> list[Item]:
    path = Path(path)
    if not path.is_file():
        raise InputError("No file was received; upload a " + FORMATS + ".")
    if path.stat().st_size > limits.max_bytes:
        raise InputError(f"The file is {path.stat().st_size:,} bytes; this Space takes at most "
                         f"{limits.max_bytes:,} (SHOWDOWN_SCORE_MAX_BYTES).")
    return read_rows(path.name, path.read_bytes(), limits)


def read_rows(name: str, content: bytes, limits: Limits = Limits()) -> list[Item]:
    """Items from a file's bytes, by its extension (or, for pasted text, by its first character)."""
    if len(content) > limits.max_bytes:
        raise InputError(f"The data is {len(content):,} bytes; this Space takes at most {limits.max_bytes:,}.")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = content[:error.start].count(b"\n") + 1
        raise InputError(f"The file is not UTF-8 text (byte 0x{content[error.start]:02x} on line {line}, at byte "
                         f"{error.start:,}); "
                         "save it as UTF-8 and upload it again.") from None
    if not text.strip():
        raise InputError("The file is empty; upload a " + FORMATS + ".")
    suffix = Path(name).suffix.lower()
    if suffix == ".json" or (suffix not in (".jsonl", ".csv") and _is_squad(text)):
        items = _squad_json(text)
    elif suffix == ".jsonl" or (suffix != ".csv" and text.lstrip().startswith("{")):
        items = _jsonl(text)
    elif suffix in (".csv", ".txt", ""):
        items = _csv(text)
    else:
        raise InputError(f"'{name}' is not a format this Space reads; upload a {FORMATS}.")
    return _checked(items, limits)


def _is_squad(text: str) -> bool:
    """Pasted text that is one JSON object with a "data" list (a JSONL record may mention "data" too)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    return isinstance(data, dict) and isinstance(data.get("data"), list)


def _squad_json(text: str) -> list[Item]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data" and error.colno == 1:  # one object per line: JSON Lines saved as .json
            return _jsonl(text)
        raise InputError(f"Malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}.") from None
    except RecursionError:
        raise InputError("The JSON is nested too deeply to be a SQuAD file.") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise InputError(SQUAD_SHAPE)
    items = []
    for article in data["data"]:
        for paragraph in _listed(article, "paragraphs"):
            for qa in _listed(paragraph, "qas"):
                row = len(items) + 1
                if not isinstance(qa, dict):
                    raise InputError(f"Question {row}: each entry of \"qas\" must be an object with a \"question\".")
                if "answers" not in qa and not _impossible(qa):  # unlabelled: it would score as all "no answer"
                    raise InputError(f'Question {row} has no "answers" (for "no answer": an empty list, or '
                                     '"is_impossible": true).')
                answers = () if _impossible(qa) else _answer_texts(qa.get("answers"), row)
                items.append(Item(row, _text(paragraph.get("context"), "context", row, "Question"),
                                  _text(qa.get("question"), "question", row, "Question"), answers))
    return items


SQUAD_SHAPE = ('A SQuAD JSON file needs a top-level "data" list of articles, each with a "paragraphs" list '
               'whose entries hold a "context" and a "qas" list.')


def _impossible(qa: dict) -> bool:
    flag = qa.get("is_impossible", False)
    return flag is True or (isinstance(flag, str) and flag.strip().lower() == "true")


def _listed(parent, key: str) -> list:
    """`parent[key]` of a SQuAD file, a list (absent: empty); any other shape is the visitor's to fix."""
    value = parent.get(key, []) if isinstance(parent, dict) else []
    if not isinstance(value, list):
        raise InputError(f'"{key}" must be a list; it is {type(value).__name__}. ' + SQUAD_SHAPE)
    return value


def _jsonl(text: str) -> list[Item]:
    items = []
    for number, line in enumerate(text.split("\n"), 1):  # not splitlines(): U+2028 may sit inside a string
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"Line {number} is not valid JSON (column {error.colno}: {error.msg}).") from None
        except RecursionError:
            raise InputError(f"Line {number} is JSON nested too deeply to be a record.") from None
        if not isinstance(record, dict):
            raise InputError(f"Line {number} is not a JSON object with context, question and answer(s).")
        items.append(_record(record, number, "Line"))
    return items


def _csv(text: str) -> list[Item]:
    delimiter = _delimiter(text)
    reader = csv.reader(io.StringIO(text, newline=None), delimiter=delimiter)  # also CR-only line ends
    try:
        header = [(c or "").strip().lower() for c in next(reader, [])]
    except csv.Error as error:  # e.g. a header field over the csv module's size limit
        raise InputError(f"The CSV's header could not be read: {error}.") from None
    columns = set(header)
    if not {"context", "question"} <= columns or not columns & {"answer", "answers"}:
        raise InputError("The CSV needs the columns context, question and answer (or answers); it has: "
                         + (", ".join(sorted(c for c in columns if c)) or "no header") + ".")
    items = []
    try:  # rows numbered as a spreadsheet shows them: the header is row 1, a blank line is a row, a quoted cell's
        for number, fields in enumerate(reader, 2):  # line breaks are not
            if not fields:
                continue
            if len(fields) > len(header):
                raise InputError(f"Row {number} has more fields than the header (an unquoted comma?).")
            if len(fields) < len(header):
                raise InputError(f"Row {number} has fewer fields than the header (for \"no answer\", keep the answer "
                                 "field empty: end the row with a comma).")
            items.append(_record(dict(zip(header, fields)), number, "Row"))
    except csv.Error as error:
        raise InputError(f"The CSV could not be read near line {reader.line_num}: {error}.") from None
    return items


def _delimiter(text: str) -> str:
    """The delimiter whose header line names the columns: the sniffer, reading rows too, took the ; around a quoted
    phrase in a cell for the delimiter and refused a file Python's own csv writer had written. It decides only when
    the header alone does not (the error then names the columns it found)."""
    first_line = text.splitlines()[0] if text else ""
    for delimiter in (",", ";", "\t"):
        try:
            columns = {(c or "").strip().lower() for c in next(csv.reader([first_line], delimiter=delimiter), [])}
        except csv.Error:  # a header field over the csv module's limit: said where the header is read
            break
        if {"context", "question"} <= columns and columns & {"answer", "answers"}:
            return delimiter
    try:  # the delimiter only: the sniffer took ' for the quote character when a quoted field held one
        return csv.Sniffer().sniff(text[:4096], delimiters=",;\t").delimiter
    except csv.Error:
        return ","


def _record(record: dict, number: int, unit: str) -> Item:
    """A CSV row or a JSONL line. `answers` may hold several (a list, or `|` between them or a JSON list in a cell);
    `answer` is one (a JSONL list there counts as several). Of the two, the filled one counts; neither is an error,
    not "no answer"."""
    record = {str(key).strip().lower(): value for key, value in record.items()}
    if "answers" not in record and "answer" not in record:
        raise InputError(f"{unit} {number} has no answer field (for \"no answer\", leave it empty).")
    several, one = record.get("answers"), record.get("answer")
    chosen, split = (several, True) if _filled(several) or not _filled(one) else (one, False)
    return Item(number, _text(record.get("context"), "context", number, unit),
                _text(record.get("question"), "question", number, unit), _answer_texts(chosen, number, unit, split))


def _filled(value) -> bool:
    return bool(value.strip()) if isinstance(value, str) else value not in (None, [], {})


def _text(value, field: str, number: int, unit: str) -> str:
    if value is None or isinstance(value, str):
        return value or ""  # empty: said by _checked
    raise InputError(f"{unit} {number}: the {field} must be text, not {type(value).__name__} ({str(value)[:40]}).")


def _answer_texts(answers, number: int, unit: str = "Question", split: bool = True) -> tuple[str, ...]:
    """Gold answers as texts: a list of strings, numbers or {"text": ...} objects, a datasets-style
    {"text": [...], "answer_start": [...]}, or a cell's text."""
    if answers is None:
        return ()
    if isinstance(answers, dict):
        answers = answers.get("text", None)
        if answers is None:
            raise InputError(f'{unit} {number}: an answers object needs a "text" list.')
    if isinstance(answers, str):
        stripped = answers.strip()
        if not split:  # an `answer` cell is one answer, brackets and all: "[0, 1]" had become the golds "0" and "1"
            answers = [stripped]
        elif stripped.startswith("[") and stripped.endswith("]"):  # a JSON list inside an `answers` cell
            try:
                answers = json.loads(stripped)
            except json.JSONDecodeError:
                raise InputError(f"{unit} {number}: the answers cell starts with '[' but is not a JSON list.") from None
        else:
            answers = stripped.split("|")
    if isinstance(answers, (int, float)) and not isinstance(answers, bool):
        answers = [answers]
    if not isinstance(answers, list):
        raise InputError(f"{unit} {number}: answers must be text or a list (empty for 'no answer').")
    texts = []
    for answer in answers:
        if isinstance(answer, dict):
            if "text" not in answer:
                raise InputError(f'{unit} {number}: an answer object needs a "text".')
            answer = answer["text"]
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            raise InputError(f"{unit} {number}: every answer must be text.")
        texts.append(str(answer).strip())
    return tuple(text for text in texts if text)


def _checked(items: list[Item], limits: Limits) -> list[Item]:
    if not items:
        raise InputError("The file holds no questions; upload a " + FORMATS + ".")
    if len(items) > limits.max_rows:
        raise InputError(f"The file holds {len(items):,} questions; this Space scores at most {limits.max_rows:,} at a "
                         "time (SHOWDOWN_SCORE_MAX_ROWS). Split it, or run the app yourself with a higher cap.")
    for item in items:
        where = f"Row {item.row}"
        if not item.context.strip():
            raise InputError(f"{where}: the context is empty.")
        if not item.question.strip():
            raise InputError(f"{where}: the question is empty.")
        if len(item.context) > limits.max_context_chars:
            raise InputError(f"{where}: the context has {len(item.context):,} characters; this Space takes at most "
                             f"{limits.max_context_chars:,} (SHOWDOWN_SCORE_MAX_CONTEXT_CHARS).")
        if len(item.question) > limits.max_question_chars:
            raise InputError(f"{where}: the question has {len(item.question):,} characters; at most {limits.max_question_chars:,}.")
    return items


# --- scoring ---------------------------------------------------------------------------------------
def score(answer: Callable[[str, str, str, bool], dict], items: list[Item], variants: list[str],
          allow_no_answer: bool, progress: Callable[[int, int], None] = lambda done, total: None) -> dict:
    """Every variant answers every item (`answer(context, question, variant, allow_no_answer)`, the
    showdown's); per variant EM / F1 (and HasAns F1, no-answer accuracy where the data has
    unanswerable questions), latency p50 / p95 and agreement with the baseline; one row per item and
    variant. A variant that cannot answer (not in this preset, not ready) is reported with its reason and
    skipped; a question a variant refuses (longer than it reads, say) is counted as skipped, with the reason."""
    chosen = chosen_variants(variants)
    rows: list[dict] = []
    errors: dict[str, str] = {}
    skipped: dict[str, list[str]] = {variant: [] for variant in chosen}
    total = len(items) * len(chosen)
    for index, item in enumerate(items):
        for offset, variant in enumerate(chosen):
            if variant in errors:
                continue
            try:
                result = answer(item.context, item.question, variant, allow_no_answer)
            except (UnknownVariant, VariantUnavailable) as error:  # not in this preset, or not ready
                errors[variant] = str(error)
                continue
            except InputError as error:  # this question only
                skipped[variant].append(f"row {item.row}: {error}")
                continue
            except Exception as error:  # noqa: BLE001 - a fault of ours in one variant: the others are still scored
                log.exception("your data: %s failed", variant)
                errors[variant] = fault_message(error)
                continue
            em, f1 = best_of(list(item.answers), result["answer"])
            rows.append({"row": item.row, "variant": variant, "question": item.question,
                         "gold": " | ".join(item.answers) or "(no answer)", "answer": result["answer"] or "(no answer)",
                         "exact": em, "f1": round(f1, 4), "answerable": bool(item.answers),
                         "latency_ms": round(result["latency_ms"]["total"], 2)})
            progress(index * len(chosen) + offset + 1, total)
    return {"summary": summarise(rows, chosen, errors, skipped), "rows": rows, "gold_not_in_context": gold_not_in_context(items)}


def gold_not_in_context(items: list[Item]) -> list[int]:
    """Rows whose every gold answer is absent from its context: an extractive model can only score F1 on them by
    overlap, never EM. Usually a data error (an answer edited, or paired with the wrong paragraph): said, not hidden."""
    return [item.row for item in items if item.answers
            and not any(normalize_answer(answer) in normalize_answer(item.context) for answer in item.answers)]


def summarise(rows: list[dict], variants: list[str], errors: dict[str, str],
              skipped: dict[str, list[str]] | None = None) -> list[dict]:
    baseline = {r["row"]: normalize_answer(r["answer"]) for r in rows if r["variant"] == "baseline"}
    out = []
    for variant in variants:
        mine = [r for r in rows if r["variant"] == variant]
        refused = (skipped or {}).get(variant, [])
        if not mine:
            reason = errors.get(variant) or (f"{len(refused)} skipped; {refused[0]}" if refused else "not run")
            out.append({"variant": variant, "questions": 0, "error": reason})
            continue
        answerable = [r for r in mine if r["answerable"]]
        unanswerable = [r for r in mine if not r["answerable"]]
        latencies = [r["latency_ms"] for r in mine]
        line = {"variant": variant, "questions": len(mine),
                "EM": round(100 * float(np.mean([r["exact"] for r in mine])), 1),
                "F1": round(100 * float(np.mean([r["f1"] for r in mine])), 1),
                "HasAns F1": round(100 * float(np.mean([r["f1"] for r in answerable])), 1) if answerable else None,
                "no-answer accuracy": (round(100 * float(np.mean([r["exact"] for r in unanswerable])), 1)
                                       if unanswerable else None),
                "p50 (ms)": round(float(np.percentile(latencies, 50)), 1),
                "p95 (ms)": round(float(np.percentile(latencies, 95)), 1),
                "same answer as baseline": _share([normalize_answer(r["answer"]) == baseline[r["row"]]
                                                   for r in mine if r["row"] in baseline and variant != "baseline"])}
        if refused:  # scored on fewer questions than the file holds: say how many, and the first reason
            line["skipped"] = f"{len(refused)}: {refused[0]}" + (" (and more)" if len(refused) > 1 else "")
        out.append(line)
    return out


def _share(flags: list[bool]) -> float | None:
    """A percentage, or None where nothing was compared (np.mean of nothing is NaN, which JSON refuses)."""
    return round(100 * float(np.mean(flags)), 1) if flags else None


ROW_COLUMNS = ("row", "variant", "question", "gold", "answer", "exact", "f1", "answerable", "latency_ms")
SUMMARY_COLUMNS = ("variant", "questions", "EM", "F1", "HasAns F1", "no-answer accuracy", "p50 (ms)", "p95 (ms)",
                   "same answer as baseline")  # one line of `score`'s summary (and "skipped" / "error" where some were)


def summary_markdown(summary: list[dict], note: str = "") -> str:
    """The comparison as a Markdown table, to paste into an issue or a notebook."""
    columns = [*SUMMARY_COLUMNS] + (["skipped"] if any("skipped" in line for line in summary) else [])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for line in summary:
        if "error" in line:
            lines.append(f"| {line['variant']} | 0 | {line['error'].replace('|', '/')} |" + " — |" * (len(columns) - 3))
            continue
        cells = ("—" if line.get(c) is None else str(line[c]).replace("|", "/").replace("\n", " ") for c in columns)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + (f"\n\n{note}" if note else "") + "\n"
