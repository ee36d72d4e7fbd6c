"""Reading comprehension for decoders: SQuAD questions about a given paragraph, scored with SQuAD F1."""
from optimize.evaluate.reading import answer_text, measure, questions
from tests.conftest import requires_squad


def test_the_reply_is_read_as_its_first_line_without_a_label_or_full_stop():
    assert answer_text(" Answer: the second little pig.\nBecause he worked harder.") == "the second little pig"
    assert answer_text("The answer is: 1754") == "1754"
    assert answer_text("") == ""


@requires_squad()
def test_every_held_out_answerable_question_is_asked_and_scored_per_question(tmp_path):
    """616 questions (enough to gate on, unlike a 60-prompt set), each scored against SQuAD's own
    answers, with per-question F1 for paired intervals; the tiny model's replies are what the app
    decodes."""
    from models import generation
    from models.runners import load_runner
    from optimize.evaluate.reading import PROMPT
    from tests.tiny import tiny_llama

    data = questions()
    assert len(data) >= 600 and all(e.answers for e in data)
    runner = load_runner("generation", "baseline", "torch", tiny_llama(tmp_path / "reader", init_range=0.2))
    scored = measure(runner, data[:4])
    assert scored["questions"] == 4 and set(scored["per_question"]) == {e.id for e in data[:4]}
    assert all(0.0 <= f1 <= 1.0 for f1 in scored["per_question"].values())
    assert scored["reading_f1"] == round(100 * sum(scored["per_question"].values()) / 4, 2)
    first = data[0]
    app = generation.generate(runner, PROMPT.format(context=first.context, question=first.question), 16)
    assert scored["answers"][first.id] == app["text"]
