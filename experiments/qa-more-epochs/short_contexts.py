"""How much of the everyday shift is context length? Every third answerable validation question whose
paragraph is longer than three sentences, asked of its whole paragraph and of the answer's sentence with
one sentence either side (`squad.short_context_positives`, as training crops it): mean null score and
margin of each model, through the serving pre/post-processing.

PYTHONPATH=. python experiments/qa-more-epochs/short_contexts.py MODEL_DIR ..."""
import functools
import sys

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models.qa import postprocess, preprocess
from models.runners import load_qa_config, torch_qa_logits
from optimize.evaluate import squad

torch.set_num_threads(2)
# every third answerable validation question, with its crop as training makes it (train-qa --short-context-share)
answerable = [e for e in squad.examples(squad.load_articles(), squad.WIDE_VALIDATION.validation) if e.answers][::3]
crops = {e.id.removesuffix("-short"): e.context for e in squad.short_context_positives(answerable, share=1.0, seed=0)}
questions = [e for e in answerable if e.id in crops]
for model_dir in sys.argv[1:]:
    tokenizer, config = AutoTokenizer.from_pretrained(model_dir), load_qa_config(model_dir)
    forward = functools.partial(torch_qa_logits, AutoModelForQuestionAnswering.from_pretrained(model_dir).eval())
    measured = {"whole paragraph": [], "three sentences": []}
    for example in questions:
        for name, context in (("whole paragraph", example.context), ("three sentences", crops[example.id])):
            windows = preprocess(tokenizer, example.question, context, config)
            answer = postprocess(windows, *forward(windows.inputs), context, config)
            measured[name].append((answer.null_score, answer.score))
    print(f"{model_dir} ({len(questions)} questions): " + "; ".join(
        f"{name}: null score {np.mean(values, axis=0)[0]:.2f}, margin {np.mean(values, axis=0)[1]:.2f}"
        for name, values in measured.items()), flush=True)
