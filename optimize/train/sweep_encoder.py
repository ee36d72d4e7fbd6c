"""`python -m optimize sweep-qa`: how accuracy and latency trade off with pruning sparsity.

`--recovered DIR …` instead tabulates pruned-and-recovered candidates (what `prune` wrote, gate
passed or not) two ways beside the baseline: SQuAD 2.0 F1, forced-span F1, the everyday set, and
PyTorch latency at 384 tokens — reports/pruning-sweep-qa-recovered.{json,md}.

For each (heads kept, FFN neurons kept per layer, layers dropped): prune the baseline with the same
importance scores the pruning stage uses (no recovery, so this is the damage recovery has to repair),
score validation F1 (null threshold tuned on validation), and time one 384-token forward in
PyTorch fp32 (median of repeated runs, all configs in one process). Writes reports/pruning-sweep-qa.{json,md}.
"""
from __future__ import annotations

import copy
from pathlib import Path

from models.catalog import REPO_ROOT
from models.reports import save_rows
from models.timing import forward_ms
from optimize.evaluate import squad
from optimize.evaluate.squad_metrics import evaluate_model
from optimize.prune.encoder import PruneConfig, drop_layers, importance, load_baseline, prune
from optimize.train.finetune_qa import TrainConfig, training_features

GRID = ((12, 1536, 0), (10, 1280, 0), (8, 1024, 0), (6, 1536, 0), (12, 768, 0), (6, 768, 0), (4, 512, 0), (3, 384, 0),
        (2, 256, 0), (12, 1536, 2), (12, 1536, 3), (8, 1024, 1), (8, 1024, 2), (6, 1024, 1), (6, 768, 1))


def run(baseline_dir: Path = REPO_ROOT / "weights/qa-minilm-squad2", config: TrainConfig = TrainConfig()) -> list[dict]:
    from transformers import AutoTokenizer

    articles = squad.load_articles(config.data)
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    features = training_features(tokenizer, squad.examples(articles, config.split.train), config.qa)
    validation = squad.examples(articles, config.split.validation)
    base = load_baseline(baseline_dir)
    heads, neurons = importance(base, features, tokenizer.pad_token_id, PruneConfig())
    rows = []
    for heads_kept, ffn_kept, layers_dropped in GRID:
        cut = PruneConfig(heads_kept=heads_kept, ffn_kept=ffn_kept, layers_dropped=layers_dropped)
        model = drop_layers(prune(copy.deepcopy(base), heads, neurons, cut), features, tokenizer.pad_token_id, cut).eval()
        validated = evaluate_model(model, tokenizer, validation, config.qa)
        params = sum(p.numel() for p in model.bert.encoder.parameters())
        rows.append({"heads_kept": heads_kept, "ffn_kept": ffn_kept, "layers_dropped": layers_dropped,
                     "encoder_params_m": round(params / 1e6, 2),
                     "validation_f1_no_recovery": round(validated["metrics"]["overall_f1"], 2),
                     "validation_forced_f1_no_recovery": round(validated["forced_metrics"]["HasAns_f1"], 2),
                     "torch_fp32_384_ms": round(forward_ms(model), 1)})
        print(rows[-1], flush=True)
    full = rows[0]["torch_fp32_384_ms"]
    for row in rows:
        row["speedup"] = round(full / row["torch_fp32_384_ms"], 2)
    save_rows("pruning-sweep-qa", f"QA pruning sweep of {baseline_dir.name} ({len(validation)} validation questions, "
              "before recovery)", rows)
    return rows


def recovered(candidates: list[Path], baseline_dir: Path = REPO_ROOT / "weights/qa-minilm-squad2") -> list[dict]:
    import json

    from optimize.evaluate.gates import beside_reference, failures
    from optimize.prune.encoder import load_baseline as load

    baseline = json.loads((baseline_dir / "training.json").read_text())["held_out"]
    rows = []
    for index, directory in enumerate([baseline_dir, *candidates]):
        training = json.loads((directory / "training.json").read_text())
        # a two-stage model (the shipped `pruned`) keeps its cut in its first stage's record
        prune_config = training.get("prune") or next((st["prune"] for st in training.get("stages", []) if "prune" in st), None)
        metrics, candidate = training["held_out"], index > 0
        model = load(directory).eval()
        missed = failures("qa", "torch", beside_reference(metrics, baseline)) if candidate else []
        rows.append({
            "candidate": ("baseline" if not candidate else f"{directory.name} (its cut not recorded)" if not prune_config
                          else f"{prune_config['heads_kept']} heads / {prune_config['ffn_kept']} FFN"
                          + (f" / {prune_config['layers_dropped']} layer(s) dropped" if prune_config.get("layers_dropped") else "")),
            "recovery epochs": training["epochs"] if candidate else "—",
            "encoder params (M)": round(sum(p.numel() for p in model.bert.encoder.parameters()) / 1e6, 2),
            "SQuAD 2.0 F1": metrics["overall_f1"], "HasAns / NoAns F1": f"{metrics['HasAns_f1']} / {metrics['NoAns_f1']}",
            "forced-span F1": metrics["forced_f1"], "everyday F1 (forced)": f"{metrics['everyday_f1']} ({metrics['everyday_forced_f1']})",
            "torch fp32 384 ms": round(forward_ms(model), 1),
            "gates (within 3 of baseline, both)": ("missed: " + "; ".join(missed)) if missed else ("pass" if candidate else "—"),
        })
        print(rows[-1], flush=True)
    full = rows[0]["torch fp32 384 ms"]
    for row in rows:
        row["speedup"] = f"{full / row['torch fp32 384 ms']:.2f}x"
    save_rows("pruning-sweep-qa-recovered", "QA pruning candidates after recovery (test articles, two ways)", rows)
    return rows
