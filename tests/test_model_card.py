"""The QA model card says how a two-stage baseline was made: each stage's data and a command per stage."""
import json

import pytest

from optimize.publish.model_card import qa_card


def stage(extra_data, validation_articles, windows, learning_rate, overall_f1, **more) -> dict:
    return {"train_windows": windows, "articles": {"train": ["Normans"], "validation": ["Immune_system"], "test": ["Force"]},
            "extra_data": extra_data, "negatives_share": 0.3, "split": {"train": [0], "validation": validation_articles, "test": [13]},
            "seed": 42, "epochs": 1, "best_epoch": 1, "batch_size": 32, "learning_rate": learning_rate,
            "answerable_first_epochs": 0, "null_fraction": 1.0, "answerability_weight": 1.0, "train_seconds": 600,
            "test": {"overall_f1": overall_f1, "HasAns_f1": 40.0, "overall_exact": 50.0, "HasAns_exact": 30.0,
                     "NoAns_exact": 70.0, "NoAns_f1": 70.0, "overall_total": 100, "HasAns_total": 50, "NoAns_total": 50},
            "history": [], "null_threshold": 1.0, **more}


def test_a_second_stage_card_names_both_stages_data_and_commands(tmp_path):
    first = stage(["train-v2.0-first10.json", "train-v1.1.json"], [9, 10, 11, 12], 119005, 1e-4, 57.0)
    second = stage(["train-v2.0-first10.json"], [9, 10, 11, 12], 10028, 3e-5, 57.7, stages=[first],
                   validation={"overall_f1": 66.5}, test_forced_span={"HasAns_exact": 70.0, "HasAns_f1": 80.1})
    (tmp_path / "training.json").write_text(json.dumps(second))
    card = qa_card(tmp_path).content
    assert "train, stage 1 (119005 windows)" in card and "the whole SQuAD 1.1 training set" in card
    assert "train, stage 2 (10028 windows)" in card
    commands = [line for line in card.splitlines() if line.startswith("python -m optimize train-qa")]
    assert len(commands) == 2
    assert "--full-data" in commands[0] and "--batch-size 32" in commands[0] and "--output runs/qa-stage1" in commands[0]
    assert "--answerability-stage" in commands[1] and "--init-from runs/qa-stage1" in commands[1]


def test_a_continued_stage_is_named_as_more_epochs_and_an_unscored_one_says_why(tmp_path):
    first = stage(["train-v2.0-first10.json", "train-v1.1.json"], [9, 10, 11, 12], 119005, 1e-4, 57.0)
    more = {key: value for key, value in stage(["train-v2.0-first10.json", "train-v1.1.json"], [9, 10, 11, 12], 119005,
                                               5e-5, 0.0, stages=[first], epochs=2).items() if key != "test"}
    more["held_out_note"] = "not scored on the test articles: stopped during its held-out scoring"
    last = stage(["train-v2.0-first10.json"], [9, 10, 11, 12], 12211, 3e-5, 59.7, stages=[more],
                 validation={"overall_f1": 67.4}, test_forced_span={"HasAns_exact": 70.9, "HasAns_f1": 81.1})
    (tmp_path / "training.json").write_text(json.dumps(last))
    card = qa_card(tmp_path).content
    assert ("then 2 more epoch(s) of the same data (`train-qa --full-data --init-from`), then a stage on the SQuAD 2.0 "
            "files' real unanswerable questions" in card)
    assert "# stage 2 (not scored on the test articles: stopped during its held-out scoring)" in card
    commands = [line for line in card.splitlines() if line.startswith("python -m optimize train-qa")]
    assert len(commands) == 3
    assert "--epochs 2" in commands[1] and "--init-from runs/qa-stage1" in commands[1] and "--full-data" in commands[1]
    assert "--init-from runs/qa-stage2" in commands[2] and "--answerability-stage" in commands[2]


@pytest.mark.parametrize("folder", ["weights/qa-minilm-squad2", "weights/qa-minilm-squad2-pruned"])
def test_the_committed_qa_cards_are_what_their_training_records_write_now(folder, tmp_path):
    """The pruned model's card still gave the baseline's scores of two trainings before, and files by old paths."""
    from models.catalog import REPO_ROOT

    path = REPO_ROOT / folder / "README.md"
    written = tmp_path / "README.md"
    qa_card(REPO_ROOT / folder).save(written)
    assert written.read_text() == path.read_text(), f"regenerate {path} (optimize.publish.model_card.write_qa_card)"
