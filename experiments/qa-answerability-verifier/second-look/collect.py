"""Per-question logits, spans and margins of one QA model on the train, validation and test dev articles (pickle)."""
import pickle, sys, time
import numpy as np, torch
from transformers import AutoTokenizer, AutoModelForQuestionAnswering
from models.qa import preprocess, postprocess, logits_by_length
from models.runners import load_qa_config, torch_qa_logits
from optimize.evaluate import squad
torch.set_num_threads(2)
weights = sys.argv[1]; out = sys.argv[2]
tok = AutoTokenizer.from_pretrained(weights); model = AutoModelForQuestionAnswering.from_pretrained(weights).eval()
config = load_qa_config(weights)
class R: pass
r = R(); r.qa_logits = lambda inputs: torch_qa_logits(model, inputs)
articles = squad.load_articles()
split = squad.WIDE_VALIDATION
rows = {}
t0 = time.time()
for name, idx in (("validation", split.validation), ("test", split.test), ("train", split.train)):
    for ex in squad.examples(articles, idx):
        w = preprocess(tok, ex.question, ex.context, config)
        s, e = logits_by_length(r, w)
        a = postprocess(w, s, e, ex.context, config)
        rows[ex.id] = dict(split=name, ex=ex, start=s.astype(np.float16), end=e.astype(np.float16),
                           offsets=w.offsets, span=a.span, margin=a.score)
        if len(rows) % 500 == 0:
            print(len(rows), round(time.time() - t0), flush=True)
    pickle.dump(rows, open(out, "wb"))
print("done", len(rows), round(time.time() - t0), flush=True)
