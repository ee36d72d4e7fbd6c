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


def test_windows_run_in_batches_of_bounded_size(tiny_qa_dir):
    """Hundreds of windows in one forward took gigabytes (attention over every window at once)."""
    from models.qa import WINDOW_BATCH, logits_by_length
    from models.runners import load_runner

    runner = load_runner("qa", "baseline", "torch", tiny_qa_dir)
    batches: list[int] = []

    class Recording:
        def __getattr__(self, name):
            return getattr(runner, name)

        def qa_logits(self, inputs):
            batches.append(inputs["input_ids"].shape[0])
            return runner.qa_logits(inputs)

    windows = preprocess(runner.tokenizer, "Which word comes last?", " ".join(f"word{i}" for i in range(2500)),
                         runner.qa_config)
    start, _ = logits_by_length(Recording(), windows)
    assert len(windows.offsets) > WINDOW_BATCH and max(batches) <= WINDOW_BATCH and sum(batches) == len(windows.offsets)
    assert start.shape[0] == len(windows.offsets)


@pytest.mark.parametrize("question, context, message", [
    ("Who?", 123, "The context must be text"),
    ("Who chased \ud800 the wolf?", "The wolf ran.", r"invalid character \(U\+D800 at position 11\)"),
    ("\u200b\ufeff", "The wolf ran.", "The question has no text the model can read"),
    ("Who?", "猫" * 60_000, r"The context is too long \(60,000 tokens; at most 50,000\)"),
])
def test_input_no_tokenizer_or_model_can_take_is_said_before_either_runs(tokenizer, question, context, message):
    """Found by probing: an int raised AttributeError, a lone surrogate (JSON can carry one) a TypeError; an
    invisible question was answered; 200,000 CJK characters made ~800 windows."""
    with pytest.raises(InputError, match=message):
        preprocess(tokenizer, question, context, QAConfig())


def test_special_tokens_typed_in_the_input_are_text(tokenizer):
    """"[CLS] Who ran?" had put a second [CLS] into the pair, and the model read the frame differently."""
    windows = preprocess(tokenizer, "[CLS] Who ran? [SEP]", "The wolf ran. [PAD]", QAConfig())
    ids = windows.inputs["input_ids"][0].tolist()
    assert ids.count(tokenizer.cls_token_id) == 1 and ids.count(tokenizer.sep_token_id) == 2
    assert tokenizer.pad_token_id not in ids


def test_a_long_questions_tokens_do_not_crowd_the_context_out_of_the_top_k(tokenizer):
    """The top 20 starts and ends were taken over the whole window, then filtered to the context: when a long
    question's tokens held all 20, no span was left, and even span mode said "no answer"."""
    question = ("According to the meeting minutes who was responsible for preparing the quarterly budget report and "
                "when is it due to be presented to the board?")
    windows = preprocess(tokenizer, question, "?", QAConfig())
    start, end = _logits_for(windows, 0, 1, span_score=2.0)
    for w, offsets in enumerate(windows.offsets):
        question_positions = [t for t, span in enumerate(offsets) if span is None and t > 0]
        start[w, question_positions] = end[w, question_positions] = 5.0
    assert len(question_positions) > QAConfig().top_k
    assert postprocess(windows, start, end, "?", QAConfig(), handle_impossible_answer=False).answer == "?"


def test_a_combining_accent_stays_with_its_letter(tokenizer):
    """The tokenizer strips accents, so "Jose" + U+0301 ends its offsets before the accent: the span took "Jose"."""
    context = "The new chef is Jose\u0301 and he cooks well."
    windows = preprocess(tokenizer, "Who is the new chef?", context, QAConfig())
    start, end = _logits_for(windows, 16, 20)
    result = postprocess(windows, start, end, context, QAConfig())
    assert (result.answer, result.start, result.end) == ("Jose\u0301", 16, 21)


def test_windows_that_cannot_move_on_are_refused_when_the_config_is_read():
    """A qa_config.json whose windows hold no more context than their stride had looped for ever on a long context."""
    import pytest

    from models.errors import ConfigError
    from models.qa import QAConfig

    with pytest.raises(ConfigError, match="leave 125 for the context, which must be more than the stride \\(128\\)"):
        QAConfig(max_length=192, stride=128)
    with pytest.raises(ConfigError):
        QAConfig(stride=0)
    assert QAConfig(max_length=256, stride=128).stride == 128  # 189 tokens of context: windows move on
