"""The answerability verifier: its cues, its fit, and the serving path that reads it."""
import json

import numpy as np
import pytest

from models.answerability import FEATURES, Verifier, features, fit
from models.qa import QAConfig, Windows, postprocess
from models.runners import load_qa_config

CONTEXT = "The second little pig built his house with sticks in 1810. The wolf blew it down."


def test_a_name_or_number_the_context_lacks_is_counted():
    asked = features("What did the wolf blow down in 1810?", CONTEXT, margin=2.0, null_score=1.0)
    swapped = features("What did the wolf blow down in Warsaw in 1920?", CONTEXT, margin=2.0, null_score=1.0)
    named = dict(zip(FEATURES, asked)), dict(zip(FEATURES, swapped))
    assert named[0]["missing_names"] == 0 and named[1]["missing_names"] == 1
    assert named[0]["missing_numbers"] == 0 and named[1]["missing_numbers"] == 1
    assert named[1]["missing_words"] > named[0]["missing_words"]
    assert (named[0]["margin"], named[0]["null_score"]) == (2.0, 1.0)
    assert features("Who didn't build with straw?", CONTEXT, 0.0, 0.0)[FEATURES.index("negation")] == 1.0
    assert (features("  What did the wolf blow down?", CONTEXT, 0.0, 0.0) ==
            features("What did the wolf blow down?", CONTEXT, 0.0, 0.0)).all()  # served questions are stripped



def test_the_cues_read_one_form_of_accents_apostrophes_and_digits():
    """A context with decomposed accents (NFD) hid the question's "Jerónimo" from the cues and flipped the decision
    (3 of 8 accented SQuAD dev questions), which the encoder does not see; "didn’t" was no negation; a full-width
    number the context holds counted as missing."""
    import unicodedata

    context = "Jerónimo de Ayanz built a steam pump in 1606. Nobody came."
    composed = features("What did Jerónimo de Ayanz build?", context, 0.0, 0.0)
    assert (features("What did Jerónimo de Ayanz build?", unicodedata.normalize("NFD", context), 0.0, 0.0) == composed).all()
    assert composed[FEATURES.index("missing_names")] == 0
    assert features("Who didn\u2019t come?", context, 0.0, 0.0)[FEATURES.index("negation")] == 1.0
    assert features("What happened in \uff11\uff16\uff10\uff16?", context + " In \uff11\uff16\uff10\uff16 too.", 0.0, 0.0)[
        FEATURES.index("missing_numbers")] == 0

def test_fit_learns_which_way_each_cue_points_and_survives_the_json_trip():
    rng = np.random.default_rng(0)
    answerable = rng.random(400) < 0.5
    values = rng.normal(size=(400, len(FEATURES)))
    values[:, 0] += 2 * answerable  # a larger margin: answerable
    values[:, 3] = (~answerable & (rng.random(400) < 0.6)).astype(float)  # a missing name: unanswerable
    verifier = fit(values, answerable)
    weights = dict(zip(FEATURES, verifier.weights))
    assert weights["margin"] > 0 > weights["missing_names"]
    scores = np.array([verifier.score(v) for v in values])
    assert scores[answerable].mean() > scores[~answerable].mean()
    again = Verifier.from_dict(json.loads(json.dumps(verifier.to_dict())))
    assert again == verifier and again.score(values[0]) == verifier.score(values[0])


def test_a_served_variant_decides_on_its_verifier_and_threshold(tmp_path):
    """qa_config.json carries the verifier; with it, a confident span about a name the context lacks
    is rated unanswerable while the same margin on a question it can answer is not."""
    one_cue = Verifier(mean=(0.0,) * 6, scale=(1.0,) * 6, weights=(1.0, 0.0, 0.0, -10.0, 0.0, 0.0), bias=0.0)
    (tmp_path / "qa_config.json").write_text(json.dumps({"null_threshold": 0.5, "verifier": one_cue.to_dict()}))
    config = load_qa_config(tmp_path)
    assert config.verifier == one_cue and config.null_threshold == 0.5

    def answered(question: str):
        offsets = [None] + [(0, 3), (4, 10)] + [None]
        start = np.array([[0.0, 4.0, 0.0, 0.0]], dtype=np.float32)
        end = np.array([[0.0, 0.0, 4.0, 0.0]], dtype=np.float32)
        windows = Windows(inputs={"input_ids": np.zeros((1, 4), np.int64)}, offsets=[offsets], question=question)
        return postprocess(windows, start, end, CONTEXT, config, handle_impossible_answer=True)

    kept = answered("Who built with sticks?")
    assert kept.answer == "The second" and kept.score == pytest.approx(8.0) and kept.answerability == pytest.approx(8.0)
    swapped = answered("Who built with sticks in Warsaw?")
    assert swapped.answer == "" and swapped.null_wins and swapped.score == pytest.approx(8.0)
    assert swapped.answerability == pytest.approx(-2.0)
    without = postprocess(Windows(inputs={}, offsets=[[None, (0, 3), (4, 10), None]], question="in Warsaw?"),
                          np.array([[0.0, 4.0, 0.0, 0.0]]), np.array([[0.0, 0.0, 4.0, 0.0]]), CONTEXT,
                          QAConfig(null_threshold=0.5))
    assert without.answerability == without.score == pytest.approx(8.0)  # no verifier: the margin decides


def test_a_verifier_of_other_features_is_refused():
    with pytest.raises(ValueError, match="features"):
        Verifier.from_dict({"mean": [0.0], "scale": [1.0], "weights": [1.0], "bias": 0.0, "features": ["margin"]})
