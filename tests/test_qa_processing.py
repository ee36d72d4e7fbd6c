import numpy as np
import pytest
from transformers import AutoTokenizer

from models.errors import InputError
from models.qa import QAConfig, postprocess, preprocess
from models.sources import minilm_path


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(minilm_path())


def test_long_context_is_split_into_overlapping_windows_not_truncated(tokenizer):
    context = " ".join(f"word{i}" for i in range(1500))
    windows = preprocess(tokenizer, "Which word comes last?", context, QAConfig())
    assert len(windows.offsets) > 1
    covered = max(span[1] for offsets in windows.offsets for span in offsets if span)
    assert covered == len(context)  # the last character is inside some window


def _logits_for(windows, char_start, char_end, span_score=10.0, null_score=0.0):
    shape = windows.inputs["input_ids"].shape
    start, end = np.full(shape, -10.0, dtype=np.float32), np.full(shape, -10.0, dtype=np.float32)
    start[:, 0] = end[:, 0] = null_score / 2
    for w, offsets in enumerate(windows.offsets):
        for t, span in enumerate(offsets):
            if span and span[0] == char_start:
                start[w, t] = span_score / 2
            if span and span[1] == char_end:
                end[w, t] = span_score / 2
    return start, end


def test_postprocess_returns_the_span_and_its_character_offsets(tokenizer):
    context = "The first pig was lazy. The second little pig worked harder."
    windows = preprocess(tokenizer, "Who worked harder?", context, QAConfig())
    s = context.index("The second little pig")
    start, end = _logits_for(windows, s, s + len("The second little pig"))
    answer = postprocess(windows, start, end, context, QAConfig())
    assert answer.answer == "The second little pig" and context[answer.start:answer.end] == answer.answer


def test_null_score_above_threshold_means_no_answer(tokenizer):
    context = "The first pig was lazy."
    windows = preprocess(tokenizer, "Who is the wolf?", context, QAConfig())
    start, end = _logits_for(windows, 0, 3, span_score=1.0, null_score=4.0)
    answer = postprocess(windows, start, end, context, QAConfig(null_threshold=0.0))
    assert answer.answer == "" and answer.start == -1 and answer.span == "The"
    answer = postprocess(windows, start, end, context, QAConfig(null_threshold=-5.0))
    assert answer.answer == "The"


def test_span_mode_returns_the_best_span_with_the_null_decision_beside_it(tokenizer):
    """transformers' pipeline convention: handle_impossible_answer=False always answers with the
    best span; the null decision (null_wins, margin) still comes with it."""
    context = "The first pig was lazy."
    windows = preprocess(tokenizer, "Who is the wolf?", context, QAConfig())
    start, end = _logits_for(windows, 0, 3, span_score=1.0, null_score=4.0)
    span_mode = postprocess(windows, start, end, context, QAConfig(), handle_impossible_answer=False)
    assert (span_mode.answer, span_mode.start, span_mode.end, span_mode.null_wins) == ("The", 0, 3, True)
    assert span_mode.score == pytest.approx(-3.0)
    squad2 = postprocess(windows, start, end, context, QAConfig(), handle_impossible_answer=True)
    assert (squad2.answer, squad2.null_wins, squad2.score) == ("", True, span_mode.score)
    start, end = _logits_for(windows, 0, 3, span_score=6.0, null_score=1.0)
    answered = postprocess(windows, start, end, context, QAConfig(), handle_impossible_answer=True)
    assert (answered.answer, answered.null_wins) == ("The", False)


@pytest.mark.parametrize("question, context", [("", "ctx"), ("q", "   "), ("q" * 2000, "ctx"),
                                               ("q", "\u200b\u200b\u2060")])  # invisible: no token to answer from
def test_bad_input_is_a_typed_error_with_a_message(tokenizer, question, context):
    with pytest.raises(InputError, match="."):
        preprocess(tokenizer, question, context, QAConfig())


def _tokenizer_windows(tokenizer, question, context, config):
    """What the tokenizer itself makes of the pair (the reference for the cached-context path)."""
    from models.qa import tokenize

    encoded = tokenize(tokenizer, [question], [context], config)
    offsets = [[tuple(int(x) for x in span) if sid == 1 else None
                for sid, span in zip(encoded.sequence_ids(w), encoded["offset_mapping"][w])]
               for w in range(len(encoded["input_ids"]))]
    return {k: encoded[k] for k in ("input_ids", "attention_mask", "token_type_ids")}, offsets


def test_windows_from_cached_context_tokens_equal_the_tokenizers_own(tokenizer):
    """preprocess tokenises a context once and assembles [CLS] question [SEP] window [SEP] itself:
    the windows (ids, masks, token types, offsets, overlap, padding) must be exactly the
    tokenizer's, for short, multi-window and awkward contexts."""
    from optimize.evaluate import squad

    cases = [("Who?", "A"), ("  Where is it?", "Café au lait — naïve “quotes”, tabs\tand\nnewlines.  "),
             ("Which word comes last?", " ".join(f"word{i}" for i in range(1500))),
             ("A question with quite a few words in it to shrink the room?", "x " * 700)]
    if squad.DEFAULT_SQUAD_PATH.exists():
        examples = squad.examples(squad.load_articles(squad.DEFAULT_SQUAD_PATH), (12,))[:40]
        cases += [(e.question, e.context) for e in examples]
        cases.append((examples[0].question, " ".join(e.context for e in examples[:12])))
    for config in (QAConfig(), QAConfig(max_length=128, stride=32)):
        for question, context in cases:
            windows = preprocess(tokenizer, question, context, config)
            expected, offsets = _tokenizer_windows(tokenizer, question.strip(), context, config)
            for name, array in expected.items():
                np.testing.assert_array_equal(windows.inputs[name], array, err_msg=f"{name}: {question!r}")
            assert windows.offsets == offsets


def test_a_span_longer_than_max_answer_tokens_gives_way_to_the_best_that_fits(tokenizer):
    """The pipeline's `max_answer_len` (15): a higher-scoring 20-token clause is not an answer."""
    context = "The second little pig " + " ".join(["worked"] * 16) + " hard. The wolf came."
    windows = preprocess(tokenizer, "Who worked?", context, QAConfig())
    long_end = context.index(" The wolf")
    start, end = _logits_for(windows, 0, long_end, span_score=10.0)
    short = len("The second little pig")
    for w, offsets in enumerate(windows.offsets):  # a weaker end token after "pig"
        end[w, [t for t, span in enumerate(offsets) if span and span[1] == short]] = 3.0
    assert postprocess(windows, start, end, context, QAConfig(max_answer_tokens=30)).answer == context[:long_end]
    assert postprocess(windows, start, end, context, QAConfig()).answer == "The second little pig"


def test_each_window_runs_at_its_own_length_with_the_padded_batchs_answer(tiny_qa_dir):
    """A context's short last window is not padded to the others' width (padding computed tokens
    that were thrown away: ~30 % of the model time at ~420 tokens), and the answer is the one the
    padded batch gives."""
    from models.qa import answer, logits_by_length
    from models.runners import load_runner

    runner = load_runner("qa", "baseline", "torch", tiny_qa_dir)
    seen: list[tuple[int, ...]] = []
    run = runner.qa_logits

    class Recording:
        def __getattr__(self, name):
            return getattr(runner, name)

        def qa_logits(self, inputs):
            seen.append(inputs["input_ids"].shape)
            assert inputs["attention_mask"].all()  # no padded position is computed
            return run(inputs)

    context = " ".join(f"word{i}" for i in range(500))
    windows = preprocess(runner.tokenizer, "Which word comes last?", context, runner.qa_config)
    lengths = windows.inputs["attention_mask"].sum(axis=1)
    assert len(lengths) >= 2 and lengths[-1] < lengths[0]
    start, end = logits_by_length(Recording(), windows)
    assert sorted(seen) == sorted({(int((lengths == n).sum()), int(n)) for n in lengths})
    padded = postprocess(windows, *run(windows.inputs), context, runner.qa_config)
    by_length = postprocess(windows, start, end, context, runner.qa_config)
    assert (by_length.start, by_length.end) == (padded.start, padded.end)
    assert answer(Recording(), "Which word comes last?", context)["start"] == padded.start
