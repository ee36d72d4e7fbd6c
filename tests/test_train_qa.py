"""The training recipe's pieces: labels, the curriculum, the margin loss."""
import random
from types import SimpleNamespace

import torch
from transformers import AutoTokenizer

from models.qa import QAConfig
from models.sources import minilm_path
from optimize.squad import Example
from optimize.train_qa import TrainConfig, answerability_loss, epoch_features, training_features


def test_labels_point_at_the_answer_tokens_and_cls_for_no_answer():
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    context = "The first little pig was lazy. The second little pig worked a little bit harder."
    data = [Example("a", "t", context, "Who worked harder?", ("The second little pig",), (context.index("The second"),)),
            Example("b", "t", context, "Who is the wolf?", (), ())]
    answerable, unanswerable = training_features(tokenizer, data, QAConfig())
    span = answerable["input_ids"][answerable["start_positions"]:answerable["end_positions"] + 1]
    assert tokenizer.decode(span) == "the second little pig"
    assert unanswerable["start_positions"] == unanswerable["end_positions"] == 0


def test_curriculum_starts_with_spans_then_adds_a_share_of_null_windows():
    features = [{"start_positions": 3}] * 10 + [{"start_positions": 0}] * 10
    config = TrainConfig(answerable_first_epochs=1, null_fraction=0.5)
    first = epoch_features(features, 1, config, random.Random(0))
    later = epoch_features(features, 2, config, random.Random(0))
    assert all(f["start_positions"] for f in first) and len(first) == 10
    assert len(later) == 15


def test_margin_loss_rewards_a_high_null_score_only_for_unanswerable_windows():
    batch = {"token_type_ids": torch.tensor([[0, 0, 1, 1]] * 2), "attention_mask": torch.ones(2, 4, dtype=torch.long),
             "start_positions": torch.tensor([2, 0])}
    null_wins = SimpleNamespace(start_logits=torch.tensor([[5.0, 0, 0, 0]] * 2), end_logits=torch.tensor([[5.0, 0, 0, 0]] * 2))
    span_wins = SimpleNamespace(start_logits=torch.tensor([[0.0, 0, 5, 0]] * 2), end_logits=torch.tensor([[0.0, 0, 5, 0]] * 2))
    right = SimpleNamespace(start_logits=torch.tensor([[0.0, 0, 5, 0], [5.0, 0, 0, 0]]),
                            end_logits=torch.tensor([[0.0, 0, 5, 0], [5.0, 0, 0, 0]]))
    assert answerability_loss(right, batch) < min(answerability_loss(null_wins, batch), answerability_loss(span_wins, batch))
