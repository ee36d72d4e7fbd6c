"""Weight averages ("model soups", Wortsman et al. 2022) of QA models fine-tuned from the same stage 1:
does averaging the shipped baseline with its sibling second stages decide "no answer" better?

Greedy soup on the validation articles: ingredients sorted by their validation score, each added to the
average only if the score rises. The validation score is the one the training runs keep epochs and
candidates by: the mean of SQuAD 2.0 F1 (the six-cue verifier and the null threshold fitted on the
validation articles, as serving fits them) and forced-span F1, on the four validation articles.
The rule, fixed before any soup was scored: a soup ships if its validation score beats the shipped
baseline's by >= 0.5 and its everyday F1 is no more than 5 points under the shipped baseline's.
Only the chosen soup and the shipped baseline are scored on the test articles.

PYTHONPATH=. python experiments/qa-model-soup/soup.py OUT_DIR NAME=SOURCE ...   (SOURCE: a weights folder
or a train-jobs checkpoint.pt; the first is the shipped baseline, weights/qa-minilm-squad2, whose tokenizer and configs the soup takes)"""
import functools
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models import answerability
from models.runners import load_qa_config, torch_qa_logits
from optimize.evaluate import squad
from optimize.evaluate.squad_metrics import auc, predict, scored

torch.set_num_threads(2)
# the shipped baseline's tokenizer and serving config: every model here shares them
shipped_dir = Path("weights/qa-minilm-squad2")
tokenizer, config = AutoTokenizer.from_pretrained(shipped_dir), load_qa_config(shipped_dir)
articles = squad.load_articles()
validation = squad.examples(articles, squad.WIDE_VALIDATION.validation)
test = squad.examples(articles, squad.WIDE_VALIDATION.test)
everyday = squad.everyday_examples()


def state(source: str) -> dict[str, torch.Tensor]:
    path = Path(source)
    raw = torch.load(path, weights_only=False, map_location="cpu")["model"] if path.suffix == ".pt" \
        else load_file(path / "model.safetensors")
    return {k: v.float() for k, v in raw.items()}


def model_of(weights: dict[str, torch.Tensor]):
    model = AutoModelForQuestionAnswering.from_pretrained(shipped_dir, dtype=torch.float32).eval()
    model.load_state_dict(weights)
    return model


def measured(model, fit_on: list, data: dict[str, list]) -> dict:
    """The verifier and threshold fitted on `fit_on` (validation), then F1 both ways on each set;
    `model` is a torch model or a forward function (windows -> start and end logits)."""
    forward = model if callable(model) and not isinstance(model, torch.nn.Module) else functools.partial(torch_qa_logits, model)
    predicted = {name: predict(forward, tokenizer, examples, config) for name, examples in data.items()}
    spans, _, features = predicted["validation"]
    labels = np.array([bool(e.answers) for e in fit_on])
    verifier = answerability.fit(np.array([features[e.id] for e in fit_on]), labels)
    scores = {name: {qid: verifier.score(v) for qid, v in p[2].items()} for name, p in predicted.items()}
    threshold = squad.best_threshold(fit_on, spans, scores["validation"])
    result = {}
    for name, examples in data.items():
        s = scored(examples, predicted[name][0], scores[name], threshold)
        result[name] = {"f1": round(s["metrics"]["overall_f1"], 2), "forced_f1": round(s["forced_metrics"]["HasAns_f1"], 2)}
        if name != "everyday":
            result[name]["auc"] = round(auc(examples, scores[name]), 3)
    result["validation"]["score"] = round((result["validation"]["f1"] + result["validation"]["forced_f1"]) / 2, 2)
    return result


def main(out: Path, sources: dict[str, str]) -> None:
    started = time.time()
    states = {name: state(source) for name, source in sources.items()}
    shipped_name = next(iter(states))
    single = {}
    for name, weights in states.items():
        single[name] = measured(model_of(weights), validation, {"validation": validation})["validation"]
        print(f"{name:12s} validation {single[name]}  ({time.time() - started:.0f} s)", flush=True)
    order = sorted(single, key=lambda n: single[n]["score"], reverse=True)
    soup, best = [order[0]], single[order[0]]
    for name in order[1:]:
        trial = soup + [name]
        averaged = {k: sum(states[n][k] for n in trial) / len(trial) for k in states[shipped_name]}
        result = measured(model_of(averaged), validation, {"validation": validation})["validation"]
        print(f"soup {'+'.join(trial):30s} validation {result}  ({time.time() - started:.0f} s)", flush=True)
        if result["score"] > best["score"]:
            soup, best = trial, result
    print(f"greedy soup: {'+'.join(soup)}, validation score {best['score']} against the shipped {single[shipped_name]['score']}")
    averaged = {k: sum(states[n][k] for n in soup) / len(soup) for k in states[shipped_name]}
    everyday_sets = {"validation": validation, "everyday": everyday}
    shipped_everyday = measured(model_of(states[shipped_name]), validation, everyday_sets)["everyday"]
    soup_everyday = measured(model_of(averaged), validation, everyday_sets)["everyday"]
    passes = (len(soup) > 1 and best["score"] - single[shipped_name]["score"] >= 0.5
              and soup_everyday["f1"] >= shipped_everyday["f1"] - 5)
    print(f"everyday F1: shipped {shipped_everyday}, soup {soup_everyday}")
    print(f"rule: {'passes' if passes else 'fails'}")
    if len(soup) > 1:
        held_out = {"validation": validation, "test": test, "everyday": everyday}
        print("test, scored once:")
        for name, weights in (("shipped " + shipped_name, states[shipped_name]), ("soup " + "+".join(soup), averaged)):
            print(f"  {name}: {measured(model_of(weights), validation, held_out)}", flush=True)
        out.mkdir(parents=True, exist_ok=True)
        for f in shipped_dir.iterdir():
            if f.is_file() and f.name not in ("model.safetensors", "README.md", "training.json"):
                shutil.copy(f, out / f.name)
        save_file({k: v.half().contiguous() for k, v in averaged.items()}, out / "model.safetensors")
        (out / "soup.json").write_text(json.dumps({"ingredients": {n: sources[n] for n in soup}, "validation": best}, indent=1))
    print(f"done in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main(Path(sys.argv[1]), dict(arg.split("=", 1) for arg in sys.argv[2:]))
