"""Per-question answerability features of a QA model on the validation (9-12) and test (13-15)
articles, through the serving pre/post-processing: does anything beyond the null margin tell an
unanswerable question apart? Writes features-<model>.json beside this file."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models.qa import best_span, postprocess, preprocess
from models.runners import load_qa_config, torch_qa_logits
from optimize.evaluate import squad


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def features(windows, start, end, answer, config) -> dict:
    null_by_window = start[:, 0] + end[:, 0]
    best_values = [best_span(start[w], end[w], windows.offsets[w], config)[0] for w in range(len(start))]
    w = int(np.argmax(best_values))
    mask = np.array([o is not None for o in windows.offsets[w]] + [False] * (start.shape[1] - len(windows.offsets[w])))[: start.shape[1]]
    ps, pe = softmax(start[w]), softmax(end[w])
    ctx_s = np.where(mask, start[w], -np.inf)
    ctx_e = np.where(mask, end[w], -np.inf)
    top_s = np.sort(ctx_s[np.isfinite(ctx_s)])[::-1]
    top_e = np.sort(ctx_e[np.isfinite(ctx_e)])[::-1]
    return {
        "margin": float(answer.score), "null": float(null_by_window.min()), "best": float(max(best_values)),
        "p_null_start": float(ps[0]), "p_null_end": float(pe[0]),
        "p_span_start": float(ps[mask].max()), "p_span_end": float(pe[mask].max()),
        "start_gap": float(top_s[0] - top_s[1]) if len(top_s) > 1 else 0.0,
        "end_gap": float(top_e[0] - top_e[1]) if len(top_e) > 1 else 0.0,
        "entropy_start": float(-(ps * np.log(ps + 1e-12)).sum()), "entropy_end": float(-(pe * np.log(pe + 1e-12)).sum()),
        "windows": len(start), "span_chars": len(answer.span),
    }


def main(weights: Path) -> None:
    torch.set_num_threads(2)
    model = AutoModelForQuestionAnswering.from_pretrained(weights, dtype=torch.float32).eval()
    tokenizer, config = AutoTokenizer.from_pretrained(weights), load_qa_config(weights)
    articles = squad.load_articles()
    rows, started = [], time.time()
    for split, indices in (("validation", (9, 10, 11, 12)), ("test", (13, 14, 15))):
        for example in squad.examples(articles, indices):
            windows = preprocess(tokenizer, example.question, example.context, config)
            start, end = torch_qa_logits(model, windows.inputs)
            answer = postprocess(windows, start, end, example.context, config)
            rows.append({"id": example.id, "split": split, "article": example.article, "question": example.question,
                         "answerable": bool(example.answers), "span": answer.span,
                         "span_f1": squad.score(example, answer.span)[1],
                         **features(windows, start, end, answer, config)})
        print(split, len(rows), f"{time.time() - started:.0f} s", flush=True)
    out = Path(__file__).with_name(f"features-{weights.name}.json")
    out.write_text(json.dumps(rows))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "weights/qa-minilm-squad2"))
