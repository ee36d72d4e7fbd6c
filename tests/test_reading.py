"""Reading comprehension for decoders: SQuAD questions about a given paragraph, scored with SQuAD F1."""
from optimize.evaluate.reading import answer_text, measure, questions
from tests.conftest import requires_squad


def test_the_reply_is_read_as_its_first_line_without_a_label_or_full_stop():
    assert answer_text(" Answer: the second little pig.\nBecause he worked harder.") == "the second little pig"
    assert answer_text("The answer is: 1754") == "1754"
    assert answer_text("") == ""


@requires_squad()
def test_every_held_out_answerable_question_is_asked_and_scored_per_question(tmp_path):
    """2,115 questions over 374 paragraphs of articles no generation model saw (enough to gate on,
    unlike a 60-prompt set or the 616 test questions), each scored against SQuAD's own answers, with
    per-question F1 and each question's paragraph for paired intervals; the tiny model's replies are
    what the app decodes."""
    from models import generation
    from models.runners import load_runner
    from optimize.evaluate.reading import PROMPT
    from tests.tiny import tiny_llama

    from optimize.evaluate import squad
    from optimize.evaluate.reading import paragraph_groups

    data = questions()
    assert len(data) == 2115 and all(e.answers for e in data)
    assert len(set(paragraph_groups().values())) == 374
    qa_paragraphs = {e.context for e in squad.all_examples(squad.DEFAULT_SQUAD_PATH)}
    assert not qa_paragraphs & {e.context for e in data}  # not the articles the old gate (and QA's test) used
    runner = load_runner("generation", "baseline", "torch", tiny_llama(tmp_path / "reader", init_range=0.2))
    scored = measure(runner, data[:4])
    assert scored["questions"] == 4 and set(scored["per_question"]) == {e.id for e in data[:4]}
    assert all(0.0 <= f1 <= 1.0 for f1 in scored["per_question"].values())
    assert scored["reading_f1"] == round(100 * sum(scored["per_question"].values()) / 4, 2)
    from optimize.evaluate.reading import answer_text
    for example in data[:4]:  # each question's F1 is the official metric on the reply's answer line
        assert scored["per_question"][example.id] == squad.score(example, answer_text(scored["answers"][example.id]))[1]
    first = data[0]
    app = generation.generate(runner, PROMPT.format(context=first.context, question=first.question), 16)
    assert scored["answers"][first.id] == app["text"]


def test_the_answer_label_quotes_and_restated_question_prefix_are_dropped():
    assert answer_text('The answer is "9th".') == "9th"
    assert answer_text("The answer to the question is: The Economist") == "The Economist"


@requires_squad()
def test_an_onnx_decoder_prefills_each_paragraph_once_and_answers_as_the_app_does(built_presets):
    """The paragraph's key/values are kept across its questions: the replies are the app's own
    (each prompt decoded from scratch), and the chat template's prefix is back afterwards."""
    from models import generation
    from models.runners import load_runner
    from optimize.evaluate.reading import PROMPT, paragraph_prefix

    preset = built_presets["generation"]
    runner = load_runner("generation", "optimized", "onnxruntime", preset.built_dir("optimized"))
    decoder = runner.model.decoder
    assert decoder.shares_kv_buffer
    data = questions(7)  # two paragraphs' questions
    assert len({e.context for e in data}) >= 2
    prefix = paragraph_prefix(runner.tokenizer, data[0].context)
    prompt_ids = generation.preprocess(runner.tokenizer, PROMPT.format(context=data[0].context, question=data[0].question))
    assert prompt_ids[0, : len(prefix)].tolist() == prefix and len(prefix) > 100
    cached, decode = [], decoder.generate

    def generate_and_note_the_cached_prefix(*args, **kwargs):
        generated = decode(*args, **kwargs)
        cached.append(decoder.last_cached_prompt_tokens)
        return generated

    decoder.generate = generate_and_note_the_cached_prefix
    scored = measure(runner, data)
    del decoder.generate
    paragraph_tokens = [len(paragraph_prefix(runner.tokenizer, e.context)) for e in data]
    assert cached == paragraph_tokens  # each prompt's prefill started after its paragraph's cached tokens
    assert decoder.prefix[0] == tuple(generation.template_prefix(runner.tokenizer))
    decoder.prefix = ((), None)  # nothing cached: every prompt prefilled in full
    for example in data:
        plain = generation.generate(runner, PROMPT.format(context=example.context, question=example.question), 16)
        assert scored["answers"][example.id] == plain["text"], example.question
