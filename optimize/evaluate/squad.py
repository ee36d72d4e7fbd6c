"""SQuAD 2.0 data: the article split and the official EM/F1 metric.

The only QA data here is half of the SQuAD 2.0 dev set (16 articles), so every score is
reported on articles never trained on: the split is by article, never by question.
"""
from __future__ import annotations

import collections
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from models import settings
from models.answerability import question_names
from models.squad_metric import best_of, exact, f1, normalize_answer  # noqa: F401 - re-exported for the build

# ../shared/data beside the checkout; SHOWDOWN_SHARED_DATA points elsewhere (a lent GPU machine gets a copy)
SHARED_DATA = settings.shared_data(check=False)  # checked where the app or a command starts
DEFAULT_SQUAD_PATH = SHARED_DATA / "squad-v2-dev" / "dev-v2.0.json"
# The first 10 articles of the official SQuAD 2.0 train set: extra training data, no title shared with dev.
TRAIN_HEAD_PATH = SHARED_DATA / "squad-v2-train-head" / "train-v2.0-first10.json"
# 13 more articles of the official SQuAD 2.0 dev set (4,079 questions, 1,964 unanswerable), none of
# whose paragraphs is in the other files: real crowd-written negatives for training (issue 48).
MORE_DEV_PATH = SHARED_DATA / "squad-v2-dev-more" / "dev-v2.0-more.json"
# The whole SQuAD 1.1 training set (442 articles, all answerable; its first 10 are TRAIN_HEAD_PATH's).
SQUAD11_TRAIN_PATH = SHARED_DATA / "squad-v1.1-train" / "train-v1.1.json"
# The project's own hand-written questions on everyday texts: they measure, they never teach.
EVERYDAY_PATH = Path(__file__).with_name("everyday_qa.json")


@dataclass(frozen=True)
class Example:
    id: str
    article: str
    context: str
    question: str
    answers: tuple[str, ...]  # empty = unanswerable
    answer_starts: tuple[int, ...]


@dataclass(frozen=True)
class ArticleSplit:
    """Article indices into the file: train on `train`, tune the null threshold on `validation`,
    report on `test`. The default keeps the last three articles (1,265 questions) for testing."""

    train: tuple[int, ...] = tuple(range(0, 12))
    validation: tuple[int, ...] = (12,)
    test: tuple[int, ...] = (13, 14, 15)


# With SQuAD 1.1's 87,599 training questions the dev file's articles are no longer needed to teach
# spans; four of them (1,563 questions, 775 unanswerable) tune the null threshold instead of one
# (364), whose threshold did not transfer to the test articles. The test articles are the same.
WIDE_VALIDATION = ArticleSplit(train=tuple(range(0, 9)), validation=(9, 10, 11, 12), test=(13, 14, 15))


def load_articles(path: Path = DEFAULT_SQUAD_PATH, split: ArticleSplit | None = None) -> list[dict]:
    """The file's articles; a file that is not SQuAD's layout, or has fewer articles than `split` names (a user's
    --data file), is refused here in one line rather than as a traceback after hours of training."""
    from models.errors import InputError

    if not Path(path).exists():
        raise FileNotFoundError(f"SQuAD 2.0 data not found at {path}; pass --data PATH")
    if not Path(path).is_file():
        raise InputError(f"{path} is a folder, not a SQuAD-style JSON file")
    try:
        articles = json.loads(Path(path).read_text())["data"]
        if not isinstance(articles, list) or not all(isinstance(a, dict) and "paragraphs" in a for a in articles):
            raise TypeError
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InputError(f"{path} is not a SQuAD-style JSON file ({{\"data\": [articles with \"paragraphs\"]}})") from None
    needed = max((*split.train, *split.validation, *split.test), default=-1) + 1 if split else 0
    if len(articles) < needed:
        raise InputError(f"{path} has {len(articles)} articles; this run's split reads articles by index up to "
                         f"{needed - 1} (the SQuAD 2.0 dev file's layout: {needed} articles or more)")
    return articles


def is_dev_file(path: Path | str | None) -> bool:
    """`path` is the SQuAD 2.0 dev file the gates read (named any way): its articles are split by index, never all
    trained on."""
    try:
        return path is not None and Path(path).resolve().samefile(DEFAULT_SQUAD_PATH)
    except OSError:
        return False


def check_recovery_data(path: Path) -> None:
    """A pruned model's recovery data (`--data`, not the dev file, whose split keeps them apart) may hold none of
    the articles that gate and measure it."""
    from models.errors import InputError

    if not is_dev_file(path) and (held_out := held_out_articles_in(Path(path))):
        raise InputError(f"--data {path} holds articles the pruned model is gated and measured on "
                         f"({', '.join(held_out)}): leave them out of the recovery data")


def held_out_articles_in(path: Path) -> list[str]:
    """Titles of the dev file's validation and test articles (`WIDE_VALIDATION`) whose paragraphs `path` also holds:
    a user's recovery data must not teach the articles that gate and measure the result."""
    if not DEFAULT_SQUAD_PATH.exists():
        return []
    held_out = load_articles(DEFAULT_SQUAD_PATH, WIDE_VALIDATION)
    contexts = {p["context"] for a in load_articles(path) for p in a["paragraphs"]}
    return [held_out[i]["title"] for i in (*WIDE_VALIDATION.validation, *WIDE_VALIDATION.test)
            if any(p["context"] in contexts for p in held_out[i]["paragraphs"])]


def examples(articles: list[dict], indices: tuple[int, ...]) -> list[Example]:
    out = []
    for index in indices:
        article = articles[index]
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [] if qa.get("is_impossible") else qa["answers"]
                out.append(Example(
                    id=qa["id"], article=article["title"], context=paragraph["context"],
                    question=qa["question"],
                    answers=tuple(a["text"] for a in answers),
                    answer_starts=tuple(a["answer_start"] for a in answers),
                ))
    return out


def all_examples(path: Path) -> list[Example]:
    """Every question of a SQuAD file (extra training data: all of its articles train)."""
    articles = load_articles(path)
    return examples(articles, tuple(range(len(articles))))


def everyday_examples(path: Path = EVERYDAY_PATH) -> list[Example]:
    """The hand-written set (answers are exact substrings of their text; offsets found here)."""
    out = []
    for text in json.loads(Path(path).read_text())["texts"]:
        for index, item in enumerate(text["questions"]):
            out.append(Example(id=f"{text['title']}-{index}", article=f"everyday/{text['title']}", context=text["context"],
                               question=item["question"], answers=tuple(item["answers"]),
                               answer_starts=tuple(text["context"].index(a) for a in item["answers"])))
    return out


def other_paragraph_negatives(data: list[Example], share: float, seed: int) -> list[Example]:
    """Unanswerable examples made from answerable ones: the question paired with another paragraph
    of the same article that contains none of its answers. They teach "the answer is not *here*"
    on realistic, on-topic text (SQuAD 2.0's own negatives are written against one paragraph)."""
    rng = random.Random(seed)
    contexts: dict[str, list[str]] = collections.defaultdict(list)
    for example in data:
        if example.context not in contexts[example.article]:
            contexts[example.article].append(example.context)
    out = []
    for example in data:
        if not example.answers or rng.random() >= share:
            continue
        others = [c for c in contexts[example.article]
                  if c != example.context and not any(a.lower() in c.lower() for a in example.answers)]
        if others:
            out.append(Example(id=f"{example.id}-neg", article=example.article, context=rng.choice(others),
                               question=example.question, answers=(), answer_starts=()))
    return out


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def sentence_bounds(context: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each sentence of a paragraph, as the generated examples cut it."""
    bounds = [0] + [m.end() for m in _SENTENCE_END.finditer(context)] + [len(context)]
    return [(start, end) for start, end in zip(bounds, bounds[1:]) if start < end]


def removed_answer_negatives(data: list[Example], share: float, seed: int) -> list[Example]:
    """Unanswerable examples made from answerable ones: the question asked of its own paragraph with
    the sentences that hold its answers taken out. The rest of the paragraph stays on topic and
    usually still names the question's entities, which is what makes SQuAD 2.0's written negatives
    hard (another paragraph of the article, the other kind of negative, seldom does)."""
    rng = random.Random(seed)
    out = []
    for example in data:
        if not example.answers or rng.random() >= share:
            continue
        sentences = sentence_bounds(example.context)
        spans = [(s, s + len(a)) for s, a in zip(example.answer_starts, example.answers)]
        kept = [example.context[start:end].strip() for start, end in sentences
                if not any(start < span_end and span_start < end for span_start, span_end in spans)]
        context = " ".join(kept)
        if len(kept) < 2 or any(a.lower() in context.lower() for a in example.answers):
            continue
        out.append(Example(id=f"{example.id}-removed", article=example.article, context=context,
                           question=example.question, answers=(), answer_starts=()))
    return out


def short_context_positives(data: list[Example], share: float, seed: int) -> list[Example]:
    """Answerable examples made from answerable ones: the question asked of the sentence that holds its
    first answer with one sentence either side. Removed-answer negatives are shorter than their
    paragraphs and always unanswerable; these pair length with "answerable" too, so that a short, plain
    text does not read as "no answer" (the full-data models' null score rises on such texts)."""
    rng = random.Random(seed)
    out = []
    for example in data:
        if not example.answers or rng.random() >= share:
            continue
        sentences = sentence_bounds(example.context)
        answer_start, answer_end = example.answer_starts[0], example.answer_starts[0] + len(example.answers[0])
        holding = [i for i, (start, end) in enumerate(sentences) if start < answer_end and answer_start < end]
        first, last = max(0, holding[0] - 1), min(len(sentences), holding[-1] + 2)
        if last - first >= len(sentences):
            continue  # the paragraph is already this short
        crop_start = sentences[first][0]
        context = example.context[crop_start:sentences[last - 1][1]].rstrip()
        out.append(Example(id=f"{example.id}-short", article=example.article, context=context,
                           question=example.question, answers=(example.answers[0],),
                           answer_starts=(answer_start - crop_start,)))
    return out


def swapped_name_negatives(data: list[Example], share: float, seed: int) -> list[Example]:
    """Unanswerable examples made from answerable ones: a name in the question that its paragraph
    contains, replaced by a name from another article's questions that the paragraph does not
    contain. SQuAD 2.0's written negatives are often of this kind (an entity swapped for a plausible
    one): the rest of the question still matches the paragraph word for word, and only the name says
    the answer is not there."""
    rng = random.Random(seed)
    names_by_article: dict[str, set[str]] = collections.defaultdict(set)
    for example in data:
        names_by_article[example.article].update(question_names(example.question))
    pool = sorted((name, article) for article, names in names_by_article.items() for name in names)
    out = []
    for example in data:
        if not example.answers or not pool or rng.random() >= share:
            continue
        answers = " ".join(example.answers).lower()
        names = [n for n in question_names(example.question) if n in example.context and n.lower() not in answers]
        if not names:
            continue
        name = rng.choice(names)
        for _ in range(20):
            other, article = rng.choice(pool)
            if article != example.article and other.lower() not in example.context.lower():
                out.append(Example(id=f"{example.id}-swapped", article=example.article, context=example.context,
                                   question=example.question.replace(name, other), answers=(), answer_starts=()))
                break
    return out


# the official SQuAD 2.0 metric lives in the runtime (the app scores a visitor's own data with it)


def score(example: Example, prediction: str) -> tuple[float, float]:
    return best_of(list(example.answers), prediction)


def evaluate(data: list[Example], predictions: dict[str, str]) -> dict[str, float]:
    """EM/F1 in percent, overall and split into HasAns / NoAns, as the official script reports."""
    rows = {"overall": [], "HasAns": [], "NoAns": []}
    for example in data:
        em, f = score(example, predictions[example.id])
        rows["overall"].append((em, f))
        rows["HasAns" if example.answers else "NoAns"].append((em, f))
    metrics: dict[str, float] = {}
    for name, values in rows.items():
        if values:
            metrics[f"{name}_exact"] = 100 * sum(v[0] for v in values) / len(values)
            metrics[f"{name}_f1"] = 100 * sum(v[1] for v in values) / len(values)
            metrics[f"{name}_total"] = len(values)
    return metrics


def best_threshold(data: list[Example], spans: dict[str, str], margins: dict[str, float]) -> float:
    """The null-score threshold that maximises F1 on `data`: answer only when the best span
    beats the null score by more than the threshold (SQuAD 2.0's find_best_thresh)."""
    gold = {e.id: e for e in data}
    no_answer_f1 = {i: score(gold[i], "")[1] for i in gold}
    span_f1 = {i: score(gold[i], spans[i])[1] for i in gold}
    current = sum(no_answer_f1.values())  # threshold = +inf: answer nothing
    best, best_value = float("inf"), current
    for qid in sorted(gold, key=lambda i: -margins[i]):  # lower the threshold one question at a time
        current += span_f1[qid] - no_answer_f1[qid]
        if current > best_value:
            best_value, best = current, margins[qid]
    # answer when margin > threshold: step just below the last admitted margin
    return best - 1e-6 if best != float("inf") else 1e9


def collate(batch: list[dict], pad_id: int, device: str = "cpu") -> dict:
    """Training features (token ids, segment ids, span labels) as one right-padded batch of tensors,
    for training and for the pruning plan's calibration alike."""
    import torch

    length = max(len(f["input_ids"]) for f in batch)
    input_ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(batch), length), dtype=torch.long)
    attention_mask = torch.zeros((len(batch), length), dtype=torch.long)
    for row, feature in enumerate(batch):
        n = len(feature["input_ids"])
        input_ids[row, :n] = torch.as_tensor(feature["input_ids"])
        token_type_ids[row, :n] = torch.as_tensor(feature["token_type_ids"])
        attention_mask[row, :n] = 1
    tensors = {
        "input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
        "start_positions": torch.tensor([f["start_positions"] for f in batch]),
        "end_positions": torch.tensor([f["end_positions"] for f in batch]),
    }
    return {name: tensor.to(device) for name, tensor in tensors.items()}
