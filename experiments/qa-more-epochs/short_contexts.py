"""How much of the everyday shift is context length? Every third answerable validation question, asked of
its whole paragraph and of the answer's sentence with one sentence either side: mean null score and
margin of each model, through the serving pre/post-processing.

PYTHONPATH=. python experiments/qa-more-epochs/short_contexts.py MODEL_DIR ..."""
import functools
import re
import sys

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models.qa import postprocess, preprocess
from models.runners import load_qa_config, torch_qa_logits
from optimize.evaluate import squad

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def cropped(example: squad.Example) -> str:
    """The sentence holding the first answer, with its neighbours."""
    bounds, position = [], 0
    for sentence in SENTENCE_END.split(example.context):
        start = example.context.index(sentence, position)
        bounds.append((start, start + len(sentence)))
        position = start + len(sentence)
    index = next(k for k, (start, end) in enumerate(bounds) if start <= example.answer_starts[0] < end)
    first, last = max(0, index - 1), min(len(bounds), index + 2)
    return example.context[bounds[first][0]:bounds[last - 1][1]]


torch.set_num_threads(2)
questions = [e for e in squad.examples(squad.load_articles(), squad.WIDE_VALIDATION.validation) if e.answers][::3]
for model_dir in sys.argv[1:]:
    tokenizer, config = AutoTokenizer.from_pretrained(model_dir), load_qa_config(model_dir)
    forward = functools.partial(torch_qa_logits, AutoModelForQuestionAnswering.from_pretrained(model_dir).eval())
    measured = {"whole paragraph": [], "three sentences": []}
    for example in questions:
        for name, context in (("whole paragraph", example.context), ("three sentences", cropped(example))):
            windows = preprocess(tokenizer, example.question, context, config)
            answer = postprocess(windows, *forward(windows.inputs), context, config)
            measured[name].append((answer.null_score, answer.score))
    print(f"{model_dir} ({len(questions)} questions): " + "; ".join(
        f"{name}: null score {np.mean(values, axis=0)[0]:.2f}, margin {np.mean(values, axis=0)[1]:.2f}"
        for name, values in measured.items()), flush=True)
