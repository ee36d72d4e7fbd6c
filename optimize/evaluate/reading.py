"""Reading comprehension for a decoder: it answers SQuAD questions about a paragraph it is given,
scored with the project's SQuAD F1 (issue 26).

Why: a 60-prompt instruction set cannot gate anything (one prompt moves its score visibly, and its
sampling error is wide); 2,115 answerable questions over 374 paragraphs no generation model saw can, and
each answer is checked against SQuAD's human answers, with no judge model. A fixed chat prompt,
greedy decoding through the app's own path, a short answer. Per-question F1 is kept so that a
delta against a source gets a paired-bootstrap interval (optimize/evaluate/intervals.py).

Cost: most of a question's time is prefilling its paragraph, which ~5 questions share. An ONNX
decoder keeps the paragraph's key/values (`GreedyDecoder.cache_prefix`, the HF "100x" write-up's
caching of a repeated context) and prefills only the question; a PyTorch model decodes left-padded
batches. SmolLM2-135M answers in sentences ("The largest city of Poland is Warsaw."), so its F1
is low in absolute terms; what a gate reads is the paired difference to its source.

The record: 2,115 questions take many minutes per PyTorch variant on 2 cores, and a build's outputs are the
same bytes on every rebuild from the same sources. Each measured model is recorded by the sha256 of
its files and the question set (`reading_record.json` beside this file for the built-in presets,
committed; `<artifacts>/reading-record.json` for yours), so a fresh machine's first build measures
only models it has never seen. The manifest names the day and CPU of a recorded measurement;
`python -m optimize verify` measures again with no record read."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

from optimize.evaluate import squad
from optimize.evaluate.instructions import greedy_texts

PROMPT = ("Answer the question with a short phrase copied from the paragraph.\n\n"
          "Paragraph: {context}\n\nQuestion: {question}")
ANSWER_TOKENS = 16
RECORD = Path(__file__).with_name("reading_record.json")


def questions(limit: int | None = None) -> list[squad.Example]:
    """The answerable questions of the 13 more SQuAD 2.0 dev articles: 2,115 questions over 374
    paragraphs that no generation model was trained, tuned or chosen on (issue 49: the 616 of the
    QA test articles, looked at many times, left a pass inside the noise)."""
    articles = squad.load_articles(squad.MORE_DEV_PATH)
    answerable = [e for e in squad.examples(articles, tuple(range(len(articles)))) if e.answers]
    return answerable[:limit] if limit else answerable


def available() -> bool:
    return squad.MORE_DEV_PATH.exists()


def paragraph_groups(limit: int | None = None) -> dict[str, str]:
    """Question id -> its paragraph: intervals resample paragraphs, whose questions succeed or fail together."""
    return {e.id: e.context for e in questions(limit)}


def set_key(data: list[squad.Example]) -> str:
    """What a score depends on besides the model: the prompt, the answer length, the questions."""
    return hashlib.sha256(json.dumps([PROMPT, ANSWER_TOKENS, [e.id for e in data]]).encode()).hexdigest()[:10]


def recorded(preset_name: str, directory: Path, load: Callable[[], object], limit: int | None = None) -> dict:
    """The reading-comprehension score of the model in `directory` ({"reading_f1", "questions",
    "per_question"}, plus "recorded": when and where, if it came from the record): measured with
    `load()`'s runner only when these exact files were never measured on this set."""
    from optimize.evaluate.records import model_record

    data = questions(limit)
    ids = [e.id for e in data]
    return model_record(
        preset_name, directory, RECORD, "reading-record.json", set_key(data), lambda: measure(load(), data),
        lambda result: {"reading_f1": result["reading_f1"], "per_question": [round(result["per_question"][i], 4) for i in ids]},
        lambda entry: {"reading_f1": entry["reading_f1"], "questions": len(data), "per_question": dict(zip(ids, entry["per_question"]))})


def answer_text(text: str) -> str:
    """The reply's first line, without a leading "The answer (to the question) is:", quotes or a
    closing full stop."""
    line = (text.strip().splitlines() or [""])[0]
    line = re.sub(r"^(the )?answer( to (the|this) question)?( is)?\s*[:\-]?\s*", "", line, flags=re.IGNORECASE)
    return line.strip().rstrip(".").strip().strip('"').strip()


def measure(runner, data: list[squad.Example] | None = None) -> dict:
    """F1 in points over `data` (default: every held-out answerable question), with each
    question's F1 (0..1) under `per_question` and the replies under `answers`."""
    data = data if data is not None else questions()
    prompts = [PROMPT.format(context=e.context, question=e.question) for e in data]
    decoder = getattr(runner.model, "decoder", None)
    if decoder is None or not decoder.shares_kv_buffer:  # PyTorch: batches of similar length pad less
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        replies = [""] * len(prompts)
        for index, reply in zip(order, greedy_texts(runner, [prompts[i] for i in order], ANSWER_TOKENS)):
            replies[index] = reply
    else:
        replies = _with_paragraph_prefixes(runner, decoder, data, prompts)
    per_question = {e.id: squad.score(e, answer_text(reply))[1] for e, reply in zip(data, replies)}
    return {"reading_f1": round(100 * sum(per_question.values()) / max(len(per_question), 1), 2),
            "questions": len(per_question), "per_question": per_question,
            "answers": {e.id: reply for e, reply in zip(data, replies)}}


def _with_paragraph_prefixes(runner, decoder, data: list[squad.Example], prompts: list[str]) -> list[str]:
    """Through the app's decoding path, each paragraph's tokens prefilled once: the decoder keeps
    the longest token prefix its questions' prompts share (the same key/values whatever follows,
    by causal attention), then the chat template's prefix as before."""
    from models import generation

    replies, cached_for = [], None
    try:
        for example, prompt in zip(data, prompts):
            if example.context != cached_for:
                decoder.cache_prefix(paragraph_prefix(runner.tokenizer, example.context))
                cached_for = example.context
            replies.append(generation.generate(runner, prompt, ANSWER_TOKENS)["text"])
    finally:
        decoder.cache_prefix(generation.template_prefix(runner.tokenizer))
    return replies


def paragraph_prefix(tokenizer, context: str) -> list[int]:
    """The tokens every question's prompt about `context` starts with: the common start of two
    prompts whose questions differ from their first character."""
    from models.generation import preprocess

    first, second = (preprocess(tokenizer, PROMPT.format(context=context, question=q))[0].tolist() for q in ("Who?", "Why?"))
    common = next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))
    return first[:common]
