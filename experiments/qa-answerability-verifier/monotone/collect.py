"""Dump each model's spans and verifier features on the validation, test and everyday questions, and on
the showcase's questions (through the serving pre/post-processing), for analyze.py. Usage:
PYTHONPATH=. python experiments/qa-answerability-verifier/monotone/collect.py OUT.pkl MODEL_DIR..."""
import functools
import pickle
import sys
from pathlib import Path

import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models.qa import QAConfig
from models.runners import torch_qa_logits
from models.showdown import SEED_CONTEXT_LONG, WARMUP_CONTEXT
from optimize.evaluate import squad
from optimize.evaluate.squad_metrics import HeldOut, predict

SHOWCASE = [(WARMUP_CONTEXT, "Who worked a little bit harder?", True),
            (SEED_CONTEXT_LONG, "Who worked a little bit harder?", True),
            (WARMUP_CONTEXT, "What did the wolf eat for breakfast?", False),
            (SEED_CONTEXT_LONG, "What did the wolf eat for breakfast?", False)]

torch.set_num_threads(2)
held_out = HeldOut.load(squad.DEFAULT_SQUAD_PATH, squad.WIDE_VALIDATION)
showcase = [squad.Example(id=f"showcase-{i}", article="showcase", context=c, question=q,
                          answers=("The second little pig",) if a else (),
                          answer_starts=(c.find("The second little pig"),) if a else ())
            for i, (c, q, a) in enumerate(SHOWCASE)]
out = {}
for folder in map(Path, sys.argv[2:]):
    model = AutoModelForQuestionAnswering.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    forward = functools.partial(torch_qa_logits, model)
    out[str(folder)] = {name: (data, predict(forward, tokenizer, data, QAConfig()))
                        for name, data in [("validation", held_out.validation), ("test", held_out.test),
                                           ("everyday", held_out.everyday), ("showcase", showcase)]}
    print(folder, "done", flush=True)
pickle.dump(out, open(sys.argv[1], "wb"))
