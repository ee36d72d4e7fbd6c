"""The bound a soup reaches for: the second stages' logits averaged per window (an output ensemble, one
forward pass per model and question), scored like soup.py, on the validation articles only. If the
ensemble does not beat the shipped model there, distilling it into one model would not either.

PYTHONPATH=. python experiments/qa-model-soup/ensemble.py NAME=SOURCE ..."""
import sys

import numpy as np
from soup import measured, model_of, state, validation

from models.runners import torch_qa_logits


def ensemble(models):
    def forward(inputs):
        logits = [torch_qa_logits(model, inputs) for model in models]
        return np.mean([s for s, _ in logits], axis=0), np.mean([e for _, e in logits], axis=0)
    return forward


if __name__ == "__main__":
    sources = dict(arg.split("=", 1) for arg in sys.argv[1:])
    models = [model_of(state(source)) for source in sources.values()]
    result = measured(ensemble(models), validation, {"validation": validation})["validation"]
    print(f"ensemble {'+'.join(sources)}: validation {result}", flush=True)
