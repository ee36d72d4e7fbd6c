import json

from optimize.evaluate import squad


def example(answers=("Paris",), qid="q"):
    return squad.Example(id=qid, article="a", context="c", question="q", answers=tuple(answers),
                         answer_starts=tuple(0 for _ in answers))


def test_f1_and_exact_follow_the_official_normalisation():
    assert squad.exact("The Eiffel Tower", "eiffel tower!") == 1.0
    assert squad.f1("the second little pig", "second pig") == 2 * (1.0 * (2 / 3)) / (1.0 + 2 / 3)
    assert squad.f1("", "") == 1.0 and squad.f1("", "something") == 0.0


def test_evaluate_splits_has_answer_and_no_answer():
    data = [example(qid="a"), example(answers=(), qid="b")]
    metrics = squad.evaluate(data, {"a": "Paris", "b": ""})
    assert metrics["overall_f1"] == 100.0 and metrics["HasAns_total"] == 1 and metrics["NoAns_total"] == 1
    metrics = squad.evaluate(data, {"a": "", "b": "Paris"})
    assert metrics["overall_f1"] == 0.0


def test_best_threshold_answers_only_where_it_pays():
    data = [example(qid="a"), example(answers=(), qid="b"), example(answers=(), qid="c")]
    spans = {"a": "Paris", "b": "Lyon", "c": "Nice"}
    margins = {"a": 5.0, "b": 1.0, "c": -2.0}
    threshold = squad.best_threshold(data, spans, margins)
    assert 1.0 <= threshold < 5.0
    predictions = {q: spans[q] if margins[q] > threshold else "" for q in spans}
    assert squad.evaluate(data, predictions)["overall_f1"] == 100.0


def test_split_is_by_article_and_disjoint():
    split = squad.ArticleSplit()
    assert not set(split.train) & set(split.test) and not set(split.validation) & set(split.test)


def test_answerability_auc_counts_ranks_and_ties():
    from optimize.evaluate.squad_metrics import roc_auc

    assert roc_auc([3.0, 4.0], [1.0, 2.0]) == 1.0
    assert roc_auc([1.0, 2.0], [3.0, 4.0]) == 0.0
    assert roc_auc([1.0, 1.0], [1.0]) == 0.5
    assert roc_auc([2.0, 0.0], [1.0]) == 0.5


def test_variants_tune_their_threshold_on_four_articles_unless_their_source_trained_on_them(tmp_path):
    """One article (364 questions) decided a threshold that did not transfer; a source trained on
    the wider validation articles keeps its own split, so that no threshold is tuned on training data."""
    from optimize.evaluate.accuracy import threshold_split

    assert threshold_split(tmp_path) == squad.WIDE_VALIDATION  # a Hub model: no training record
    (tmp_path / "training.json").write_text(json.dumps({"split": {"train": list(range(12)), "validation": [12],
                                                                  "test": [13, 14, 15]}}))
    assert threshold_split(tmp_path).validation == (12,)
    (tmp_path / "training.json").write_text(json.dumps({"split": {"train": list(range(9)), "validation": [9, 10, 11, 12],
                                                                  "test": [13, 14, 15]}}))
    assert threshold_split(tmp_path) == squad.WIDE_VALIDATION


def test_measure_fits_a_verifier_on_validation_and_falls_back_to_the_margin_on_one_class():
    """`measure` fits the answerability verifier where validation holds both kinds of question and
    reports the margin rule beside it; validation of one kind cannot fit one, so the margin decides."""
    import numpy as np
    from transformers import AutoTokenizer

    from models.qa import QAConfig
    from models.sources import minilm_path
    from optimize.evaluate.squad_metrics import HeldOut, measure

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    context = "The second little pig built his house out of sticks in Warsaw."

    def forward(inputs):  # a span on the first context tokens, its margin set by the question's length
        start = np.zeros(inputs["input_ids"].shape, dtype=np.float32)
        end = start.copy()
        first = int(np.argmax(inputs["token_type_ids"][0]))
        start[:, first] = end[:, first + 1] = 0.1 * inputs["attention_mask"].sum()
        return start, end

    def asked(qid, question, answerable):
        return squad.Example(qid, "pigs", context, question, ("The second",) if answerable else (), (0,) if answerable else ())

    questions = [asked(f"q{i}", f"Who built a house{' with care' * (i % 3)}?", i % 2 == 0) for i in range(8)]
    questions += [asked(f"n{i}", f"Who built a house in Paris{' again' * i}?", False) for i in range(4)]
    both = measure(forward, tokenizer, QAConfig(), HeldOut(questions, questions, questions))
    assert both["verifier"]["features"][0] == "margin" and len(both["verifier"]["weights"]) == 6
    assert {"margin_rule_f1", "answerability_auc", "margin_auc"} <= set(both)
    answerable_only = [q for q in questions if q.answers]
    one = measure(forward, tokenizer, QAConfig(), HeldOut(questions, answerable_only, questions))
    assert one["verifier"] is None and one["overall_f1"] == one["margin_rule_f1"]
