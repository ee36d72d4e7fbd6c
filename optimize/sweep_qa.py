"""`python -m optimize sweep-qa`: how accuracy and latency trade off with pruning sparsity.

For each (heads kept, FFN neurons kept) per layer: prune the baseline with the same importance
scores the pruning stage uses (no recovery, so this is the damage recovery has to repair),
score validation F1 (null threshold tuned on validation), and time one 384-token forward in
PyTorch fp32 (median of repeated runs, all configs in one process). Writes reports/pruning-sweep-qa.{json,md}.
"""
from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path

import torch

from models.reports import save_rows
from optimize import squad
from optimize.evaluate_qa import evaluate_model
from optimize.prune_qa import PruneConfig, importance, load_baseline, prune
from optimize.train_qa import TrainConfig, training_features

GRID = ((12, 1536), (10, 1280), (8, 1024), (6, 1536), (12, 768), (6, 768), (4, 512), (3, 384), (2, 256))


def forward_ms(model, repeats: int = 15) -> float:
    inputs = {"input_ids": torch.randint(1000, 2000, (1, 384)), "attention_mask": torch.ones(1, 384, dtype=torch.long)}
    times = []
    with torch.inference_mode():
        for index in range(repeats + 3):
            started = time.perf_counter()
            model(**inputs)
            if index >= 3:
                times.append(1e3 * (time.perf_counter() - started))
    return statistics.median(times)


def run(baseline_dir: Path = Path("weights/qa-minilm-squad2"), config: TrainConfig = TrainConfig()) -> list[dict]:
    from transformers import AutoTokenizer

    articles = squad.load_articles(config.data)
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    features = training_features(tokenizer, squad.examples(articles, config.split.train), config.qa)
    validation = squad.examples(articles, config.split.validation)
    base = load_baseline(baseline_dir)
    heads, neurons = importance(base, features, tokenizer.pad_token_id, PruneConfig())
    rows = []
    for heads_kept, ffn_kept in GRID:
        model = prune(copy.deepcopy(base), heads, neurons, PruneConfig(heads_kept=heads_kept, ffn_kept=ffn_kept)).eval()
        f1 = evaluate_model(model, tokenizer, validation, config.qa)["metrics"]["overall_f1"]
        params = sum(p.numel() for p in model.bert.encoder.parameters())
        rows.append({"heads_kept": heads_kept, "ffn_kept": ffn_kept, "encoder_params_m": round(params / 1e6, 2),
                     "validation_f1_no_recovery": round(f1, 2), "torch_fp32_384_ms": round(forward_ms(model), 1)})
        print(rows[-1], flush=True)
    full = rows[0]["torch_fp32_384_ms"]
    for row in rows:
        row["speedup"] = round(full / row["torch_fp32_384_ms"], 2)
    save_rows("pruning-sweep-qa", "QA pruning sweep (validation article, before recovery)", rows)
    return rows
