"""Reading comprehension for a decoder: it answers SQuAD questions about a paragraph it is given,
scored with the project's SQuAD F1 (issue 26).

Why: a 60-prompt instruction set cannot gate anything (one prompt is 1.7 % of the score, its
sampling error about ±6 %); every answerable question of the held-out test articles (616) can, and
each answer is checked against SQuAD's human answers, with no judge model. A fixed chat prompt,
greedy decoding through the app's own path, a short answer. Per-question F1 is kept so that a
delta against a source gets a paired-bootstrap interval (optimize/evaluate/intervals.py).

Not yet a build gate: on 2 cores SmolLM2 takes 0.8-0.9 s per question (ONNX `optimized` 0.82,
PyTorch baseline 0.92, mostly prefilling the paragraph), ~9 minutes per variant, which every
generation build and the slow tests would pay. SmolLM2-135M answers in sentences ("The largest
city of Poland is Warsaw."): F1 13.6 on the first 32 questions."""
from __future__ import annotations

import re

from optimize.evaluate import squad
from optimize.evaluate.instructions import greedy_texts

PROMPT = ("Answer the question with a short phrase copied from the paragraph.\n\n"
          "Paragraph: {context}\n\nQuestion: {question}")
ANSWER_TOKENS = 16


def questions(limit: int | None = None) -> list[squad.Example]:
    """The answerable questions of the held-out test articles (never trained or tuned on)."""
    answerable = [e for e in squad.examples(squad.load_articles(), squad.ArticleSplit().test) if e.answers]
    return answerable[:limit] if limit else answerable


def answer_text(text: str) -> str:
    """The reply's first line, without a leading "Answer:" or a closing full stop."""
    line = (text.strip().splitlines() or [""])[0]
    return re.sub(r"^(the )?answer( is)?\s*[:\-]\s*", "", line, flags=re.IGNORECASE).strip().rstrip(".").strip()


def measure(runner, data: list[squad.Example] | None = None) -> dict:
    """F1 in points over `data` (default: every held-out answerable question), with each
    question's F1 (0..1) under `per_question` and the replies under `answers`."""
    data = data if data is not None else questions()
    replies = greedy_texts(runner, [PROMPT.format(context=e.context, question=e.question) for e in data], ANSWER_TOKENS)
    per_question = {e.id: squad.score(e, answer_text(reply))[1] for e, reply in zip(data, replies)}
    return {"reading_f1": round(100 * sum(per_question.values()) / max(len(per_question), 1), 2),
            "questions": len(per_question), "per_question": per_question,
            "answers": {e.id: reply for e, reply in zip(data, replies)}}
