"""Per question of the validation, test and everyday sets: the serving verifier's features, and the
final-layer hidden states a probe could read (the [CLS] row of the window with the smallest null
score, and the best span's start and end rows), through the serving pre/post-processing (pickle).

PYTHONPATH=. python experiments/qa-answerability-verifier/hidden-probe/collect.py WEIGHTS OUT.pkl"""
import pickle
import sys
import time

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models.qa import PADDED_LOGIT, best_span, postprocess, preprocess
from models.runners import load_qa_config
from optimize.evaluate import squad

torch.set_num_threads(2)
weights, out = sys.argv[1], sys.argv[2]
tokenizer = AutoTokenizer.from_pretrained(weights)
model = AutoModelForQuestionAnswering.from_pretrained(weights).eval()
config = load_qa_config(weights)
articles = squad.load_articles()
split = squad.WIDE_VALIDATION
sets = {"validation": squad.examples(articles, split.validation), "test": squad.examples(articles, split.test),
        "everyday": squad.everyday_examples()}


@torch.inference_mode()
def forward(inputs: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start/end logits and last hidden states, each window at its own length (as logits_by_length)."""
    lengths = inputs["attention_mask"].sum(axis=1)
    width = inputs["input_ids"].shape[1]
    start = np.full((len(lengths), width), PADDED_LOGIT, dtype=np.float32)
    end = start.copy()
    hidden = np.zeros((len(lengths), width, model.config.hidden_size), dtype=np.float32)
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        group = {k: torch.from_numpy(np.ascontiguousarray(v[rows, :length])) for k, v in inputs.items()}
        output = model(**group, output_hidden_states=True)
        start[rows, :length] = output.start_logits.numpy()
        end[rows, :length] = output.end_logits.numpy()
        hidden[rows, :length] = output.hidden_states[-1].numpy()
    return start, end, hidden


rows, started = {}, time.time()
for name, data in sets.items():
    for example in data:
        windows = preprocess(tokenizer, example.question, example.context, config)
        start, end, hidden = forward(windows.inputs)
        answer = postprocess(windows, start, end, example.context, config)
        null_window = int(np.argmin(start[:, 0] + end[:, 0]))
        best = max(((best_span(start[w], end[w], offsets, config), w) for w, offsets in enumerate(windows.offsets)),
                   key=lambda item: item[0][0])
        (_, s, e), w = best
        rows[example.id] = dict(split=name, example=example, span=answer.span, cues=answer.cues,
                                cls=hidden[null_window, 0].astype(np.float16),
                                span_start=hidden[w, s].astype(np.float16), span_end=hidden[w, e].astype(np.float16))
        if len(rows) % 500 == 0:
            print(len(rows), round(time.time() - started), flush=True)
pickle.dump(rows, open(out, "wb"))
print("done", len(rows), round(time.time() - started), flush=True)
