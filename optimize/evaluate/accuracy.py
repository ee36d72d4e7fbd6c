"""Accuracy of a variant, measured the same way for every variant.

QA: SQuAD 2.0 EM/F1 on the held-out articles with the null threshold the variant tunes on the
four validation articles (`threshold_split`), forced-span EM/F1 on their answerable questions, F1 on the everyday set, and
the share of answerable questions where the variant picks the same span as its source; the same two F1s on the
validation articles, which the gates read (the test articles decide nothing). Generation: teacher-forced
greedy next-token agreement with the source on the source's own greedy continuations of held-out
prompts, perplexity on Wikipedia paragraphs of generation's validation set (the reading set's articles,
never the QA test articles: experiments/perplexity-on-validation/RULE.md), and for an ONNX export
the share of prompts whose own 64-token greedy continuation is the source's, token for token
(what a visitor sees: one early flip changes the rest of the text).
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from models.catalog import Preset
from models.generation import preprocess as chat_prompt
from models.runners import Runner, load_runner
from optimize.evaluate import instructions, reading, squad
from optimize.evaluate import squad_metrics as evaluate_qa
from optimize.evaluate.continuations import batched_torch_continuations, lookup_keeps_texts
from optimize.evaluate.gates import AgreementBelowGate, AgreementGuard, Gates
from optimize.evaluate.heldout import PROMPTS
from optimize.evaluate.intervals import paired_delta, paired_ratio
from optimize.evaluate.records import content_key, records_off, reference_cache, reference_recorded, training_record
from optimize.evaluate.squad_metrics import HeldOut

log = logging.getLogger("optimize.evaluate.accuracy")
CONTINUATION_TOKENS = 64
PERPLEXITY_PARAGRAPHS = 48
PERPLEXITY_MAX_TOKENS = 256


def test_examples(data_path: Path = squad.DEFAULT_SQUAD_PATH) -> list[squad.Example] | None:
    if not Path(data_path).exists():
        log.warning("SQuAD data not found at %s: accuracy not measured", data_path)
        return None
    return squad.examples(squad.load_articles(data_path), squad.ArticleSplit().test)


def qa_accuracy(runner: Runner, held_out: HeldOut, guard: AgreementGuard | None = None,
                reference_spans: dict[str, str] | None = None) -> dict:
    """`guard`: count each answerable validation question's span against `reference_spans` as it comes
    (the exact gate reads validation; the test articles decide nothing)."""
    def on_gated_span(example: squad.Example, span: str) -> None:
        if example.id in reference_spans:
            guard.count(int(span == reference_spans[example.id]))

    return evaluate_qa.measure(runner.qa_logits, runner.tokenizer, runner.qa_config, held_out,
                               on_gated_span if guard else None)


def qa_against(metrics: dict, reference: dict) -> dict:
    """A QA variant's metrics beside its source's, as the gates read them."""
    from optimize.evaluate.gates import beside_reference
    from optimize.evaluate.intervals import paired_delta

    metrics = beside_reference(metrics, reference)
    metrics["agreement_pct"] = round(evaluate_qa.span_agreement(metrics.pop("_spans"), reference["_spans"]), 2)  # shown
    metrics["validation_agreement_pct"] = round(evaluate_qa.span_agreement(  # what the exact gate reads
        metrics.pop("_validation_spans"), reference["_validation_spans"]), 2)
    # SQuAD 2.0 F1 and forced-span F1, per question, paired with the reference's: on the test articles
    # (shown) and on validation (gated), where the reference measured them
    for key, name in (("f1", "overall_f1"), ("forced_f1", "forced_f1"), ("validation_f1", "validation_f1"),
                      ("validation_forced_f1", "validation_forced_f1")):
        own = metrics.pop(f"_{key}", None)
        if own is not None and f"_{key}" in reference:
            metrics[f"{name}_delta"] = paired_delta(reference[f"_{key}"], own)
    return metrics


def save_null_decision(directory: Path, metrics: dict) -> dict:
    """A variant serves with the answerability verifier and null threshold it fitted on validation,
    not its source's. Returns the metrics without the verifier's coefficients."""
    import json

    path = Path(directory) / "qa_config.json"
    config = json.loads(path.read_text()) if path.exists() else {}
    decision = {"null_threshold": metrics["null_threshold"], "verifier": metrics["verifier"]}
    if not records_off():  # `optimize verify` measures a built variant, it never changes it
        path.write_text(json.dumps({**config, **decision}, indent=2) + "\n")
    return {k: v for k, v in metrics.items() if k != "verifier"}


def greedy_continuations(runner: Runner, batch_size: int = 16) -> list[torch.Tensor]:
    """The runner's greedy continuation of each held-out prompt, prompt included, ending at its
    first end-of-turn token as `runner.generate` does. PyTorch decodes the prompts in left-padded
    batches: on two cores a 135M decoder reads its weights once per step for the whole batch, so the
    reference side of a clean build takes a fraction of the time, with the same tokens
    (tests/test_build.py checks this against one prompt at a time)."""
    if runner.runtime != "torch":
        out = []
        for prompt in PROMPTS:
            ids = chat_prompt(runner.tokenizer, prompt)
            out.append(runner.generate(ids, CONTINUATION_TOKENS)[:, : ids.shape[1] + CONTINUATION_TOKENS])
        return out
    return batched_torch_continuations(runner, list(PROMPTS), CONTINUATION_TOKENS, batch_size)


def logits(runner: Runner, input_ids: torch.Tensor) -> torch.Tensor:
    """Logits on the CPU, for a PyTorch model on any device (a lent GPU's recovery measures with it) or an ONNX one."""
    if runner.runtime == "torch":
        input_ids = input_ids.to(runner.model.device)
    with torch.inference_mode():
        out = runner.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), use_cache=False)
    if isinstance(out.logits, torch.Tensor):
        return out.logits.float().cpu()
    return torch.as_tensor(np.asarray(out.logits)).float()


def next_token_agreement(runner: Runner, sequences: list[torch.Tensor], prompt_lengths: list[int],
                         floor_pct: float | None = None) -> float:
    """`floor_pct`: stop with AgreementBelowGate once the gate can no longer be reached."""
    total = sum(sequence.shape[1] - start for sequence, start in zip(sequences, prompt_lengths))
    guard = AgreementGuard(total, floor_pct, "greedy tokens") if floor_pct else None
    matches = 0
    for sequence, start in zip(sequences, prompt_lengths):
        predicted = logits(runner, sequence)[0, start - 1:-1].argmax(-1)
        agreeing = int((predicted == sequence[0, start:]).sum())
        matches += agreeing
        if guard:
            guard.count(agreeing, sequence.shape[1] - start)
    return 100 * matches / max(total, 1)


def identical_continuations(runner: Runner, sequences: list[torch.Tensor], prompt_lengths: list[int]) -> float:
    """% of prompts whose free-running greedy continuation equals the reference's, token for token."""
    same = 0
    for sequence, start in zip(sequences, prompt_lengths):
        produced = runner.generate(sequence[:, :start], sequence.shape[1] - start)[:, : sequence.shape[1]]
        same += int(produced.shape == sequence.shape and bool((produced == sequence).all()))
    return 100 * same / max(len(sequences), 1)


def text_nll(runner: Runner, texts: list[str]) -> list[tuple[float, int]]:
    """Per text: summed negative log-likelihood of its tokens and how many were scored (what a
    perplexity ratio's interval resamples)."""
    out = []
    for text in texts:
        ids = runner.tokenizer(text, return_tensors="pt").input_ids[:, :PERPLEXITY_MAX_TOKENS]
        log_probs = torch.log_softmax(logits(runner, ids)[0, :-1], dim=-1)
        out.append((-float(log_probs.gather(1, ids[0, 1:, None]).sum()), ids.shape[1] - 1))
    return out


def perplexity(runner: Runner | None = None, texts: list[str] | None = None,
               nll: list[tuple[float, int]] | None = None) -> float:
    """Over `texts` with `runner`, or from per-text (summed NLL, tokens) already measured."""
    nll = nll if nll is not None else text_nll(runner, texts)
    return math.exp(sum(n for n, _ in nll) / sum(c for _, c in nll))


def validation_paragraphs() -> list[str] | None:
    """`PERPLEXITY_PARAGRAPHS` paragraphs spread evenly over the reading set's articles, which no
    generation model was trained, tuned or chosen on; None without that data."""
    if not reading.available():
        log.warning("SQuAD data not found at %s: perplexity not measured", squad.MORE_DEV_PATH)
        return None
    paragraphs = list(dict.fromkeys(e.context for e in reading.questions()))
    step = len(paragraphs) / PERPLEXITY_PARAGRAPHS
    return [paragraphs[int(i * step)] for i in range(min(PERPLEXITY_PARAGRAPHS, len(paragraphs)))]


def generation_accuracy(runner: Runner, reference_path: Path, load_reference: Callable[[], Runner],
                        promise: str = "pruned", stop_below_gate: bool = False, preset_name: str | None = None,
                        reading_questions: int | None = None) -> dict:
    """`load_reference` is called only when the reference side is not cached for `reference_path`.
    `stop_below_gate`: an export's measurement stops as soon as it cannot pass its agreement gate.
    `preset_name`: reading comprehension is measured too (recorded per model: optimize/evaluate/reading.py),
    on the first `reading_questions` held-out questions (default all)."""
    exact = promise == "exact"
    paragraphs = validation_paragraphs()

    def reference_side() -> dict:
        reference = load_reference()
        return {"sequences": [s.tolist() for s in greedy_continuations(reference)],
                "paragraph_nll": text_nll(reference, paragraphs) if paragraphs else None}

    kind = f"generation-v3-{_prompts_key(paragraphs)}"
    cached = reference_cache(reference_path, kind, reference_side)
    sequences = [torch.tensor(s) for s in cached["sequences"]]
    prompt_lengths = [chat_prompt(runner.tokenizer, p).shape[1] for p in PROMPTS]
    # agreement gates an exact export, and a lossy one where reading comprehension is not measured (optimize/evaluate/gates.py)
    reads = preset_name is not None and reading.available()
    floor = Gates().exact_agreement_pct if exact else Gates().lossy_agreement_pct if promise == "lossy" and not reads else None
    try:
        agreement = next_token_agreement(runner, sequences, prompt_lengths, floor if stop_below_gate else None)
    except AgreementBelowGate as stopped:
        return {"prompts": len(PROMPTS), "agreement_pct": stopped.upper_bound_pct, "agreement_stopped": stopped.stopped}
    metrics = {"prompts": len(PROMPTS), "agreement_pct": round(agreement, 2), **recorded_side(reference_path, kind)}
    # an export below its agreement gate is rejected whatever else it scores: the text-level
    # measures below (minutes of decoding on 2 cores) are spent only on exports that can ship
    rejected = floor is not None and metrics["agreement_pct"] < floor
    if exact and not rejected:
        # an export of its source's exact weights promises the same text, not just the same next token
        metrics["identical_continuations_pct"] = round(identical_continuations(runner, sequences, prompt_lengths), 2)
    if paragraphs and cached["paragraph_nll"]:
        nll = text_nll(runner, paragraphs)
        metrics["perplexity"] = round(perplexity(nll=nll), 3)
        metrics["reference_perplexity"] = round(perplexity(nll=cached["paragraph_nll"]), 3)
        ratio = paired_ratio(cached["paragraph_nll"], nll)  # paragraphs resampled: the ratio's interval
        metrics["perplexity_ratio"], metrics["perplexity_ratio_ci95"] = ratio["ratio"], ratio["ci95"]
    # a lossy rung already over its perplexity budget is rejected: no minutes of decoding spent on it
    over_budget = promise == "lossy" and metrics.get("perplexity_ratio", 1) > Gates().lossy_perplexity_ratio
    if over_budget and reads:
        metrics["reading_skipped"] = "perplexity over its budget"  # agreement stays ungated (optimize/evaluate/gates.py)
    if rejected or over_budget:
        return metrics
    if getattr(getattr(runner.model, "decoder", None), "lookup", None) is not None:  # it ships exact lookup
        metrics.update(lookup_keeps_texts(runner, PROMPTS))
    # the public instruction set through the app's decoding path: shown for every variant, recorded per model
    metrics.update(instructions_against(preset_name, runner, reference_path, load_reference))
    if reads:
        metrics.update(reading_against(preset_name, runner, reference_path, load_reference, reading_questions, promise))
    return metrics


def instructions_against(preset_name: str | None, runner: Runner, reference_path: Path,
                         load_reference: Callable[[], Runner]) -> dict:
    """The instruction-set score (shown, not gated) and, for a PyTorch variant (a pruned model, held
    to its baseline), its source's and the paired difference. Each side is read from the instruction
    record when its exact files were scored on this set (optimize/evaluate/instructions.py)."""
    def score(directory: Path, load: Callable[[], Runner]) -> dict:
        if preset_name is not None:
            return instructions.recorded(preset_name, directory, load)
        if directory == reference_path:  # a sweep's or recovery's many students share one source
            return reference_cache(directory, f"instructions-v3-{instructions.set_key()}", lambda: instructions.scored(load()))
        return instructions.scored(load())

    own = score(runner.path, lambda: runner)
    metrics = {"instruction_pct": own["instruction_pct"], **({"instruction_recorded": own["recorded"]} if "recorded" in own else {})}
    if runner.runtime == "torch":
        source = score(reference_path, load_reference)
        metrics["reference_instruction_pct"] = source["instruction_pct"]
        metrics["instruction_of_baseline_pct"] = round(100 * own["instruction_pct"] / max(source["instruction_pct"], 1e-9), 1)
        metrics["instruction_delta"] = paired_delta(  # points, prompts resampled
            {item: float(ok) for item, ok in source["passed_by_prompt"].items()},
            {item: float(ok) for item, ok in own["passed_by_prompt"].items()})
        if "recorded" in source:
            metrics["reference_instruction_recorded"] = source["recorded"]
    return metrics


def reading_against(preset_name: str, runner: Runner, reference_path: Path, load_reference: Callable[[], Runner],
                    limit: int | None, promise: str) -> dict:
    """Reading-comprehension F1 with its interval, its source's, and the paired difference: what the
    lossy gate reads (within 1 point of the source) and the pruned one (≥ 90 % of the baseline's, the
    interval's lower end ≥ 85 %). Intervals resample paragraphs with all their questions."""
    from optimize.evaluate.intervals import grouped_mean_interval, grouped_ratio

    own = reading.recorded(preset_name, runner.path, lambda: runner, limit)
    source = reading.recorded(preset_name, reference_path, load_reference, limit)
    groups = reading.paragraph_groups(limit)
    metrics = {"reading_f1": own["reading_f1"], "reading_f1_ci95": grouped_mean_interval(own["per_question"], groups),
               "reading_questions": own["questions"], "reference_reading_f1": source["reading_f1"],
               "reference_reading_f1_ci95": grouped_mean_interval(source["per_question"], groups),
               }
    compared = grouped_ratio(source["per_question"], own["per_question"], groups)
    metrics["reading_f1_delta"] = {key: compared[key] for key in ("delta", "ci95", "items", "groups")}
    if promise == "pruned":  # held to a share of its baseline's score; 0 of 0 keeps it
        metrics["reading_of_baseline_pct"] = round(100 * compared["ratio"], 1) if source["reading_f1"] else 100.0
        metrics["reading_of_baseline_ci95"] = [round(100 * end, 1) for end in compared["ratio_ci95"]]
    if "recorded" in own:
        metrics["reading_recorded"] = own["recorded"]
    if "recorded" in source:
        metrics["reference_reading_recorded"] = source["recorded"]
    return metrics


def qa_reference_kind(split: squad.ArticleSplit) -> str:
    """The reference cache's name for a QA model's per-question scores on `split` (every build and check shares it)."""
    return f"qa-per-question-v3-{_everyday_key()}-v{''.join(map(str, split.validation))}"  # v3: validation spans


def _everyday_key() -> str:
    import hashlib

    return hashlib.sha256(squad.EVERYDAY_PATH.read_bytes()).hexdigest()[:8]


def _prompts_key(paragraphs: list[str] | None) -> str:
    """The reference side depends on the held-out prompts, their length and the perplexity paragraphs, not just the weights."""
    return content_key([PROMPTS, CONTINUATION_TOKENS, paragraphs, PERPLEXITY_MAX_TOKENS])


def threshold_split(source: Path) -> squad.ArticleSplit:
    """Where a QA variant tunes its null threshold: the four articles before the test ones (1,563
    questions, as the default models' training does; one article of 364 decided a threshold that
    did not transfer), unless its source trained on some of them: then its training's own split."""
    return split_of(training_record(source))


def split_of(training: dict | None) -> squad.ArticleSplit:
    """`threshold_split` from an already-read training record, so a caller that also shows the
    record's scores reads the file once."""
    split = training.get("split") if training is not None else None
    if split and set(split["train"]) & set(squad.WIDE_VALIDATION.validation):
        return squad.ArticleSplit(tuple(split["train"]), tuple(split["validation"]), tuple(split["test"]))
    return squad.WIDE_VALIDATION


def measure(preset: Preset, directory: Path, variant_name: str, reference: Path, promise: str,
            stop_below_gate: bool = False) -> dict:
    """`promise` (optimize/evaluate/gates.py) decides what is gated. `stop_below_gate` (a strict build): an
    exact export is measured only until it cannot pass its agreement gate; its metrics are then
    that bound and where it stopped. A lossy one is measured in full: its gate is task quality."""
    variant = preset.variant(variant_name)
    source = preset.variant(variant.built_from)
    exact = promise == "exact"
    runner = load_runner(preset.task, variant_name, variant.runtime, directory)

    def load_reference() -> Runner:
        return load_runner(preset.task, source.name, source.runtime, reference)

    if preset.task == "generation":
        return generation_accuracy(runner, reference, load_reference, promise, stop_below_gate, preset.name,
                                   preset.reading_questions)
    if not squad.DEFAULT_SQUAD_PATH.exists():  # HeldOut.load reads it once
        log.warning("SQuAD data not found at %s: accuracy not measured", squad.DEFAULT_SQUAD_PATH)
        return {"note": "SQuAD data not found: accuracy not measured"}
    split = threshold_split(reference)
    held_out = HeldOut.load(split=split)
    kind = qa_reference_kind(split)
    reference_metrics = reference_cache(reference, kind, lambda: qa_accuracy(load_reference(), held_out))
    spans = reference_metrics["_validation_spans"]
    guard = (AgreementGuard(len(spans), Gates().exact_agreement_pct, "answerable validation questions")
             if stop_below_gate and exact else None)
    try:
        metrics = qa_accuracy(runner, held_out, guard, spans)
    except AgreementBelowGate as stopped:
        return {"validation_agreement_pct": stopped.upper_bound_pct, "agreement_stopped": stopped.stopped}
    return {**qa_against(save_null_decision(directory, metrics), reference_metrics),
            **recorded_side(reference, kind)}


def recorded_side(reference: Path, kind: str) -> dict:
    """{"reference_recorded": when and where} when the source's side of a comparison was read from a committed record."""
    recorded = reference_recorded(reference, kind)
    return {} if recorded is None else {"reference_recorded": recorded}
