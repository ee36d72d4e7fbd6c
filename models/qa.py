"""Extractive QA pre/post-processing, written once and used by every runner.

Long contexts are split into overlapping windows (document stride), never silently truncated.
A context is tokenised once and its windows assembled per question (`context_tokens`).
The answer is the best span over all windows. SQuAD 2.0's null score (CLS start + CLS end) is
always weighed: the null decision (`null_wins`, `null_margin`) comes with every answer. As in
transformers' question-answering pipeline, "no answer" is returned only when asked for
(`handle_impossible_answer=True`): a span then has to score above `null_threshold`, on the
variant's answerability verifier (models/answerability.py) or, without one, on its null margin.
"""
from __future__ import annotations

import functools
import time
import unicodedata
from dataclasses import dataclass

import numpy as np

from models.answerability import Verifier, features
from models.errors import ConfigError, InputError, typed_text

MAX_QUESTION_CHARS = 1_000
MAX_CONTEXT_CHARS = 200_000
MAX_CONTEXT_TOKENS = 50_000  # the character cap's English in tokens; CJK text holds about one token per character
WINDOW_BATCH = 16  # windows per forward: attention over hundreds of windows at once took gigabytes
PADDED_LOGIT = -1e4  # where a window is shorter than the batch's widest: never a span, never the null


@dataclass(frozen=True)
class QAConfig:
    max_length: int = 384
    stride: int = 128  # tokens shared by consecutive windows
    max_question_tokens: int = 64
    max_answer_tokens: int = 15  # transformers' question-answering pipeline: max_answer_len=15
    top_k: int = 20
    null_threshold: float = 0.0  # tuned on validation articles, on the verifier's score if there is one
    verifier: Verifier | None = None  # fitted on validation articles; None: the margin decides

    def __post_init__(self) -> None:
        """A window must hold more context than it shares with the next: with no more room than `stride`, windows
        never moved on and a long context looped for ever (a user's qa_config.json can set these)."""
        room = self.max_length - self.max_question_tokens - 3  # [CLS] question [SEP] context [SEP]
        if min(self.stride, self.max_question_tokens, self.max_answer_tokens, self.top_k) < 1 or room <= self.stride:
            raise ConfigError(f"QA windows of {self.max_length} tokens with questions of up to {self.max_question_tokens} "
                              f"leave {room} for the context, which must be more than the stride ({self.stride}); "
                              "stride, question, answer tokens and top_k must be ≥ 1")


@dataclass
class Windows:
    """Tokenised (question, context) windows, ready for any runner."""

    inputs: dict[str, np.ndarray]  # input_ids, attention_mask, token_type_ids: int64 [windows, tokens]
    offsets: list[list[tuple[int, int] | None]]  # per token: char span in the context, None outside it
    question: str = ""  # as asked: the answerability verifier reads it

    @property
    def num_tokens(self) -> int:
        return int(self.inputs["attention_mask"].sum())


@dataclass(frozen=True)
class Answer:
    answer: str  # "" = no answer (only with handle_impossible_answer)
    score: float  # best span score minus null score (logit units): the null margin
    start: int  # char offsets in the context; -1 when there is no answer
    end: int
    span: str  # best span even when the null score wins (for inspection and threshold tuning)
    null_wins: bool = False  # answerability does not beat the tuned null threshold: the model rates it unanswerable
    null_score: float = 0.0  # the smallest null score of any window (logit units)
    answerability: float = 0.0  # what the null threshold is applied to: the verifier's score, else the margin
    cues: np.ndarray | None = None  # the verifier's inputs (models/answerability.FEATURES): evaluation fits verifiers on them


# a context of zero-width or format characters passes strip() but gives the model no token to answer from
UNREADABLE_CONTEXT = "The context has no text the model can read (only spaces or invisible characters)."


def no_answer_flag(value) -> bool:
    """`handle_impossible_answer` as an API client sent it: bool("false") is True, so a string is refused, not read."""
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise InputError(f"handle_impossible_answer must be true or false (got {value!r}).")


def validate(question: str, context: str) -> tuple[str, str]:
    question, context = typed_text(question, "question").strip(), typed_text(context, "context")
    if not context.strip():
        raise InputError("Please enter a context paragraph to search for the answer.")
    if not question:
        raise InputError("Please enter a question about the context.")
    if len(question) > MAX_QUESTION_CHARS:
        raise InputError(f"The question is too long ({len(question):,} characters; at most {MAX_QUESTION_CHARS:,}).")
    if len(context) > MAX_CONTEXT_CHARS:
        raise InputError(f"The context is too long ({len(context):,} characters; at most {MAX_CONTEXT_CHARS:,}).")
    return question, context


def tokenize(tokenizer, questions: list[str], contexts: list[str], config: QAConfig, padding: bool = True):
    """The one tokenisation used for training, evaluation and serving (fast tokenizer, offsets)."""
    questions = [q.lstrip() for q in questions]
    return tokenizer(
        questions, contexts, truncation="only_second", max_length=config.max_length, stride=config.stride,
        return_overflowing_tokens=True, return_offsets_mapping=True,
        padding="longest" if padding else False, return_tensors="np" if padding else None,
    )


def preprocess(tokenizer, question: str, context: str, config: QAConfig) -> Windows:
    question, context = validate(question, context)
    # typed "[CLS]" or "[SEP]" is text, not a token that reframes the pair
    question_ids = tokenizer(question.lstrip(), add_special_tokens=False, split_special_tokens=True)["input_ids"]
    if not question_ids:
        raise InputError("The question has no text the model can read (only invisible characters).")
    if len(question_ids) > config.max_question_tokens:
        raise InputError(f"The question is too long ({len(question_ids)} tokens; at most {config.max_question_tokens}).")
    if _pairs_like_bert(tokenizer):
        tokens = context_tokens(tokenizer, context)
        if not tokens.ids:
            raise InputError(UNREADABLE_CONTEXT)
        if len(tokens.ids) > MAX_CONTEXT_TOKENS:
            raise InputError(f"The context is too long ({len(tokens.ids):,} tokens; at most {MAX_CONTEXT_TOKENS:,}).")
        return _assemble(tokenizer, question, question_ids, tokens, config)
    encoded = tokenize(tokenizer, [question], [context], config)
    offsets = []
    for window in range(len(encoded["input_ids"])):
        sequence_ids = encoded.sequence_ids(window)
        spans = encoded["offset_mapping"][window].tolist()  # one C-level conversion, not one int() per token
        offsets.append([tuple(span) if sid == 1 else None for sid, span in zip(sequence_ids, spans)])
    if not any(span is not None for window in offsets for span in window):
        raise InputError(UNREADABLE_CONTEXT)
    names = ("input_ids", "attention_mask", "token_type_ids")
    inputs = {name: encoded[name].astype(np.int64) for name in names if name in encoded}
    return Windows(inputs=inputs, offsets=offsets, question=question)


@dataclass(frozen=True)
class ContextTokens:
    ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]


@functools.lru_cache(maxsize=16)  # bounded: a long context's tokens take megabytes
def context_tokens(tokenizer, context: str) -> ContextTokens:
    """A context tokenised once, then reused for every question and variant that reads it (the
    "cache the repeated context" idea of Hugging Face's 100x write-up): WordPiece splits each
    sequence of a pair on its own, so the pair's context tokens are these."""
    encoded = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True, split_special_tokens=True)
    return ContextTokens(tuple(encoded["input_ids"]), tuple(map(tuple, encoded["offset_mapping"])))


@functools.lru_cache(maxsize=8)
def _pairs_like_bert(tokenizer) -> bool:
    """True when the tokenizer frames a pair as [CLS] question [SEP] context [SEP] with token
    types 0…0 1…1, which `_assemble` reproduces; other tokenizers take the general path."""
    probe = tokenizer("who", "the wolf ran", return_token_type_ids=True)
    question, context = (tokenizer(text, add_special_tokens=False)["input_ids"] for text in ("who", "the wolf ran"))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    return (cls is not None and sep is not None and tokenizer.padding_side == "right"
            and probe["input_ids"] == [cls, *question, sep, *context, sep]
            and probe["token_type_ids"] == [0] * (len(question) + 2) + [1] * (len(context) + 1))


def _assemble(tokenizer, question: str, question_ids: list[int], context: ContextTokens, config: QAConfig) -> Windows:
    """The windows `tokenize` makes (truncation "only_second" with overflow and stride, padded to
    the longest), built from cached context tokens: each window holds `room` context tokens and
    starts `room - stride` after the previous one, until one reaches the end."""
    room = config.max_length - len(question_ids) - 3
    total = len(context.ids)
    starts = [0]
    while starts[-1] + room < total:
        starts.append(starts[-1] + room - config.stride)
    head = [tokenizer.cls_token_id, *question_ids, tokenizer.sep_token_id]
    width = len(head) + min(room, total) + 1
    ids = np.full((len(starts), width), tokenizer.pad_token_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    offsets = []
    for window, start in enumerate(starts):
        piece = slice(start, min(start + room, total))
        length = len(head) + (piece.stop - piece.start) + 1
        ids[window, :length] = head + list(context.ids[piece]) + [tokenizer.sep_token_id]
        mask[window, :length] = 1
        types[window, len(head):length] = 1
        offsets.append([None] * len(head) + list(context.offsets[piece]) + [None] * (width - length + 1))
    inputs = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in tokenizer.model_input_names:  # DistilBERT and RoBERTa-likes take no token types
        inputs["token_type_ids"] = types
    return Windows(inputs=inputs, offsets=offsets, question=question)


def best_span(start_logits: np.ndarray, end_logits: np.ndarray, offsets: list[tuple[int, int] | None],
              config: QAConfig) -> tuple[float, int, int]:
    """Best (score, start_token, end_token) in one window, restricted to context tokens. Those are masked before
    the top k are taken, as transformers' pipeline does: a long question's tokens could fill the top k."""
    best = (-np.inf, 0, 0)
    in_context = np.array([offset is not None for offset in offsets[: len(start_logits)]])
    starts = np.argsort(np.where(in_context, start_logits, -np.inf))[::-1][: config.top_k]
    ends = np.argsort(np.where(in_context, end_logits, -np.inf))[::-1][: config.top_k]
    for s in starts:
        if offsets[s] is None:
            continue
        for e in ends:
            if e < s or e - s + 1 > config.max_answer_tokens or offsets[e] is None:
                continue
            value = float(start_logits[s] + end_logits[e])
            if value > best[0]:
                best = (value, int(s), int(e))
    return best


def postprocess(windows: Windows, start_logits: np.ndarray, end_logits: np.ndarray, context: str,
                config: QAConfig, handle_impossible_answer: bool = True) -> Answer:
    """Best span over all windows against the smallest null score of any window (as SQuAD 2.0
    reference implementations do): the span must beat every window's "no answer". With
    `handle_impossible_answer=False` the best span is returned whatever the null decision."""
    null_score = min(float(s[0] + e[0]) for s, e in zip(start_logits, end_logits))
    best_value, best_chars = -np.inf, (-1, -1)
    for window, offsets in enumerate(windows.offsets):
        value, s, e = best_span(start_logits[window], end_logits[window], offsets, config)
        if value > best_value:
            best_value, best_chars = value, (offsets[s][0], offsets[e][1]) if value > -np.inf else (-1, -1)
    margin = best_value - null_score
    cues = features(windows.question, context, margin, null_score)
    if best_value == -np.inf:
        return Answer(answer="", score=-np.inf, start=-1, end=-1, span="", null_wins=True, null_score=null_score,
                      answerability=-np.inf, cues=cues)
    end = best_chars[1]
    while end < len(context) and unicodedata.category(context[end]).startswith("M"):  # a combining accent is the
        end += 1  # letter's: the tokenizer strips it, and its offsets end before it ("José" typed as e + U+0301)
    best_chars = (best_chars[0], end)
    span = context[best_chars[0]:best_chars[1]]
    answerability = config.verifier.score(cues) if config.verifier else margin
    null_wins = not answerability > config.null_threshold
    decided = {"null_wins": null_wins, "null_score": null_score, "answerability": answerability, "cues": cues}
    if null_wins and handle_impossible_answer:
        return Answer(answer="", score=margin, start=-1, end=-1, span=span, **decided)
    return Answer(answer=span, score=margin, start=best_chars[0], end=best_chars[1], span=span, **decided)


def logits_by_length(runner, windows: Windows) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits [windows, width], each window run at its own length: a context's last
    window is usually short, and padding it to the others' width computes tokens that are thrown
    away (a context just over one window would otherwise compute two full windows). Windows of one length run as
    one batch; padded positions get a logit no span can win with."""
    lengths = windows.inputs["attention_mask"].sum(axis=1)
    start = np.full(windows.inputs["input_ids"].shape, PADDED_LOGIT, dtype=np.float32)
    end = start.copy()
    for length in np.unique(lengths):
        same_length = np.flatnonzero(lengths == length)
        for first in range(0, len(same_length), WINDOW_BATCH):
            rows = same_length[first:first + WINDOW_BATCH]
            group = {name: np.ascontiguousarray(values[rows, :length]) for name, values in windows.inputs.items()}
            start[rows, :length], end[rows, :length] = runner.qa_logits(group)
    return start, end


def answer(runner, question: str, context: str, handle_impossible_answer: bool = False) -> dict:
    """Answer with `runner`, timing each stage; the dict is the `/qa` API's response. The defaults
    are the transformers pipeline's: always the best span, with the null decision beside it, and
    spans of at most 15 tokens (`max_answer_tokens`, the pipeline's `max_answer_len`)."""
    config = runner.qa_config
    started = time.perf_counter()
    windows = preprocess(runner.tokenizer, question, context, config)
    tokenized = time.perf_counter()
    start_logits, end_logits = logits_by_length(runner, windows)
    modelled = time.perf_counter()
    result = postprocess(windows, start_logits, end_logits, context, config, handle_impossible_answer)
    finished = time.perf_counter()
    margin = float(result.score) if np.isfinite(result.score) else None
    return {
        "answer": result.answer, "score": round(float(result.score), 4), "start": result.start, "end": result.end,
        "null_wins": result.null_wins, "null_margin": None if margin is None else round(margin, 4),
        "answerability": round(float(result.answerability), 4) if np.isfinite(result.answerability) else None,
        "null_threshold": round(float(config.null_threshold), 4), "verifier": config.verifier is not None,
        "handle_impossible_answer": bool(handle_impossible_answer), "max_answer_len": config.max_answer_tokens,
        "windows": len(windows.offsets), "tokens": windows.num_tokens,
        "latency_ms": {
            "tokenize": 1e3 * (tokenized - started), "model": 1e3 * (modelled - tokenized),
            "post": 1e3 * (finished - modelled), "total": 1e3 * (finished - started),
        },
    }
