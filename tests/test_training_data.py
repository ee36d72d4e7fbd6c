"""What QA trains on and what it is measured on stay apart: the extra SQuAD train articles and
other-paragraph negatives teach; the test articles, the validation article and the hand-written
everyday set only measure."""
import pytest

from optimize.evaluate import squad
from optimize.train.finetune_qa import TrainConfig, training_examples
from tests.conftest import requires_squad


def test_everyday_set_is_about_forty_questions_a_tenth_unanswerable():
    examples = squad.everyday_examples()
    unanswerable = [e for e in examples if not e.answers]
    assert 38 <= len(examples) <= 45 and 3 <= len(unanswerable) <= 6
    assert len({e.id for e in examples}) == len(examples)
    for example in examples:
        for answer, start in zip(example.answers, example.answer_starts):
            assert example.context[start:start + len(answer)] == answer


def test_other_paragraph_negatives_pair_a_question_with_text_of_its_article_that_lacks_the_answer():
    data = [squad.Example("a", "pigs", "The second little pig built with sticks.", "Who used sticks?",
                          ("The second little pig",), (0,)),
            squad.Example("b", "pigs", "The wolf blew the straw house down.", "What did the wolf do?",
                          ("blew the straw house down",), (9,)),
            squad.Example("c", "other", "Bricks are strong.", "What is strong?", ("Bricks",), (0,))]
    negatives = squad.other_paragraph_negatives(data, share=1.0, seed=0)
    assert {(n.question, n.context) for n in negatives} == {
        ("Who used sticks?", "The wolf blew the straw house down."),
        ("What did the wolf do?", "The second little pig built with sticks.")}
    assert all(not n.answers and n.id.endswith("-neg") for n in negatives)


def test_removed_answer_negatives_keep_the_paragraph_without_the_sentences_that_answer():
    context = ("The first little pig built a house of straw. The second little pig built with sticks. "
               "The third pig used bricks. The wolf came at night.")
    data = [squad.Example("a", "pigs", context, "Who used sticks?", ("The second little pig",), (45,)),
            squad.Example("b", "pigs", "Bricks are strong. So are stones.", "What is strong?", ("Bricks",), (0,)),
            squad.Example("c", "pigs", context, "Who was afraid?", (), ())]
    negatives = squad.removed_answer_negatives(data, share=1.0, seed=0)
    assert [(n.id, n.question, n.context, n.answers) for n in negatives] == [
        ("a-removed", "Who used sticks?",
         "The first little pig built a house of straw. The third pig used bricks. The wolf came at night.", ())]
    # "b" keeps one sentence only (too little to be a paragraph); "c" has no answer to remove


def test_short_context_positives_keep_the_answer_sentence_and_its_neighbours_with_the_answer_offset():
    context = ("The first little pig built a house of straw. The second little pig built with sticks. "
               "The third pig used bricks. The wolf came at night.")
    data = [squad.Example("a", "pigs", context, "Who used bricks?", ("The third pig",), (context.index("The third"),)),
            squad.Example("b", "pigs", "Bricks are strong. So are stones.", "What is strong?", ("Bricks",), (0,)),
            squad.Example("c", "pigs", context, "Who was afraid?", (), ())]
    [short] = squad.short_context_positives(data, share=1.0, seed=0)
    assert short.id == "a-short" and short.question == "Who used bricks?"
    assert short.context == "The second little pig built with sticks. The third pig used bricks. The wolf came at night."
    assert short.context[short.answer_starts[0]:].startswith("The third pig") and short.answers == ("The third pig",)
    # "b" is already two sentences (nothing to cut); "c" is unanswerable


def test_swapped_name_negatives_ask_about_a_name_from_another_article_that_the_paragraph_lacks():
    context = "Warsaw is the capital of Poland. The Vistula River flows through Warsaw."
    data = [squad.Example("a", "warsaw", context, "What river flows through Warsaw?", ("The Vistula River",), (33,)),
            squad.Example("b", "warsaw", context, "Which country has Warsaw as its capital?", ("Poland",), (25,)),
            squad.Example("c", "pigs", "The wolf ate Pork at Lunch.", "What did the wolf eat at Lunch?", ("Pork",), (13,)),
            squad.Example("d", "pigs", "The wolf ate.", "Who ate?", (), ())]
    assert squad.question_names("What river flows through Warsaw?") == ["Warsaw"]
    negatives = {n.id: n for n in squad.swapped_name_negatives(data, share=1.0, seed=0)}
    assert set(negatives) == {"a-swapped", "b-swapped", "c-swapped"}  # "d" has no answer
    assert negatives["a-swapped"].question == "What river flows through Lunch?"
    assert negatives["c-swapped"].question == "What did the wolf eat at Warsaw?"
    for negative in negatives.values():
        assert not negative.answers and negative.context == data[ord(negative.id[0]) - ord("a")].context


@requires_squad()
@pytest.mark.skipif(not squad.TRAIN_HEAD_PATH.exists(), reason="../shared/data/squad-v2-train-head is absent")
def test_training_never_sees_the_held_out_articles_or_the_everyday_texts():
    config = TrainConfig()
    articles = squad.load_articles(config.data)
    train = training_examples(config, articles)
    held_out_titles = {articles[i]["title"] for i in (*config.split.validation, *config.split.test)}
    assert not {e.article for e in train} & held_out_titles
    train_contexts = {e.context for e in train}
    assert not train_contexts & {e.context for e in squad.everyday_examples()}
    assert not any("little pig" in context for context in train_contexts)
    assert len(train) > 2 * len(squad.examples(articles, config.split.train))  # the train-head articles are in
