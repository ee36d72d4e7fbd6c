"""Accuracy gates the build checks before it publishes a variant. A miss fails the build with a
message that says which gate, by how much, and what to try."""
from __future__ import annotations

from dataclasses import dataclass

from optimize.evaluate.intervals import delta_text


class GateFailed(RuntimeError):
    """A built variant missed an accuracy gate; nothing was published. `missed`: which gates."""

    def __init__(self, message: str, missed: list[str] | None = None):
        super().__init__(message)
        self.missed = missed or []


class AgreementBelowGate(Exception):
    """An export's measurement was stopped: its disagreements with its source already exceed what
    its agreement gate allows (`upper_bound_pct`: its agreement if everything left had agreed)."""

    def __init__(self, upper_bound_pct: float, stopped: str):
        super().__init__(stopped)
        self.upper_bound_pct = upper_bound_pct
        self.stopped = stopped


@dataclass
class AgreementGuard:
    """Counts an export's agreement with its source as it is measured, and raises AgreementBelowGate
    as soon as even full agreement on the rest could not reach `floor_pct`. Why: the build tries
    the fastest recipe first, and a strict build spends minutes on 2 cores measuring a rung that
    is already lost (QA INT8 agrees on ~89 % of spans: decided within the first fifth)."""

    total: int  # questions or tokens the agreement is over
    floor_pct: float
    unit: str
    misses: int = 0
    seen: int = 0

    def count(self, agreeing: int, measured: int = 1) -> None:
        self.seen += measured
        self.misses += measured - agreeing
        best = round(100 * (self.total - self.misses) / max(self.total, 1), 2)  # rounded as the gate reads it
        if best < self.floor_pct:
            so_far = 100 * (self.seen - self.misses) / self.seen
            raise AgreementBelowGate(best, f"stopped after {self.seen} of {self.total} {self.unit}, {so_far:.1f}% agreeing "
                                           f"so far: {self.misses} disagreements already exceed what the gate allows")


PROMISES = {
    "exact": "the source's weights and arithmetic: the same model, gated on agreeing with it",
    "lossy": "quantization or lower-precision compute: the same quality, gated on task measures within a budget",
    "pruned": "a smaller model: gated on measured quality against the baseline",
}


@dataclass(frozen=True)
class Gates:
    """One gate per promise (issue 26). QA quality is gated two ways, so that neither abstaining
    nor always answering passes: SQuAD 2.0 F1 (tuned null threshold) and forced-span F1."""

    # exact: an fp32 graph of the same weights, or a GGUF's own codes at fp32 compute
    exact_agreement_pct: float = 99.5  # same forced QA span / same teacher-forced greedy token
    exact_identical_pct: float = 90.0  # generation: prompts whose 64-token greedy text is the source's
    # lossy: INT8, re-quantized 4-bit, int8 compute; agreement is measured and shown, never gated
    lossy_f1_drop: float = 1.0  # QA both measures; generation reading-comprehension F1, points
    lossy_perplexity_ratio: float = 1.03
    lossy_agreement_pct: float = 98.0  # generation, only until its reading-comprehension F1 is measured
    # pruned: a smaller model by design
    pruned_f1_drop: float = 3.0  # QA both measures vs baseline
    pruned_perplexity_ratio: float = 1.5
    pruned_reading_pct: float = 90.0  # generation reading-comprehension F1 as a share of the baseline's
    pruned_reading_low_pct: float = 85.0  # ... and the lower end of that share's 95 % interval (paragraphs resampled)
    pruned_instruction_pct: float = 90.0  # only where reading comprehension was not measured (older builds)


def gate_descriptions(gates: Gates = Gates()) -> dict[str, str]:
    """Each promise's gate in words, from the values the build checks: the app's About tab and the
    README say what the code does because they are generated from it."""
    return {
        "exact": (f"the same forced QA span / greedy next token as its source on ≥ {gates.exact_agreement_pct:g} % of "
                  f"held-out inputs (QA: the validation articles' answerable questions; generation: and the same 64-token text on ≥ {gates.exact_identical_pct:g} % of "
                  "prompts)"),
        "lossy": (f"QA SQuAD 2.0 F1 and forced-span F1 on the validation articles each within {gates.lossy_f1_drop:g} "
                  "point of its source; "
                  f"generation perplexity ≤ {gates.lossy_perplexity_ratio:g}x its source's and reading-comprehension F1 "
                  f"within {gates.lossy_f1_drop:g} point; agreement with the source shown beside, not gated (where reading "
                  f"comprehension was not measured: ≥ {gates.lossy_agreement_pct:g} % of greedy tokens)"),
        "pruned": (f"QA within {gates.pruned_f1_drop:g} points of the baseline on both measures, on validation; "
                   "generation perplexity "
                   f"≤ {gates.pruned_perplexity_ratio:g}x the baseline's and reading-comprehension F1 ≥ "
                   f"{gates.pruned_reading_pct:g} % of the baseline's, the lower end of its 95 % interval (paragraphs "
                   f"resampled) ≥ {gates.pruned_reading_low_pct:g} %; the instruction set and agreement shown, not gated (where "
                   f"reading comprehension was not measured: an instruction-set score ≥ {gates.pruned_instruction_pct:g} % of "
                   "the baseline's)"),
    }


def promise_of(runtime: str, metrics: dict) -> str:
    """What a variant promises: the build records it; a manifest from before promises were
    recorded is read by what it measured."""
    if "promise" in metrics:
        return metrics["promise"]
    return "pruned" if runtime == "torch" else "exact"


def failures(task: str, runtime: str, metrics: dict, gates: Gates = Gates()) -> list[str]:
    """The gates `metrics` misses under the variant's promise (empty when all pass, or when
    nothing could be measured), and, for a decoder that ships exact prompt lookup, that lookup's own
    promise: the same text with and without drafts."""
    missed = _promise_misses(task, runtime, metrics, gates)
    if metrics.get("lookup_prompts") and metrics["lookup_identical"] < metrics["lookup_prompts"]:
        changed = metrics["lookup_prompts"] - metrics["lookup_identical"]
        missed.append(f"prompt lookup changed {changed} of {metrics['lookup_prompts']} held-out texts (exact lookup "
                      "promises the same text with and without drafts)")
    return missed


def _promise_misses(task: str, runtime: str, metrics: dict, gates: Gates) -> list[str]:
    promise = promise_of(runtime, metrics)
    if promise == "exact":
        return _exact_misses(task, metrics, gates)
    if promise == "lossy":
        if task == "qa":
            return _qa_drops(metrics, gates.lossy_f1_drop, "its source")
        missed = _perplexity_miss(metrics, gates.lossy_perplexity_ratio, "its source")
        if ("reading_f1" not in metrics and "reading_skipped" not in metrics
                and metrics.get("agreement_pct", 100) < gates.lossy_agreement_pct):
            missed.append(f"agrees with its source on {metrics['agreement_pct']:.1f}% of greedy tokens (gate ≥ "
                          f"{gates.lossy_agreement_pct}% where reading comprehension was not measured)")
        if "reading_f1" in metrics and metrics["reference_reading_f1"] - metrics["reading_f1"] > gates.lossy_f1_drop:
            interval = f", difference {delta_text(metrics['reading_f1_delta'])}" if "reading_f1_delta" in metrics else ""
            missed.append(f"reading-comprehension F1 {metrics['reading_f1']:.2f} is "
                          f"{metrics['reference_reading_f1'] - metrics['reading_f1']:.2f} below its source "
                          f"(gate ≤ {gates.lossy_f1_drop}{interval})")
        return missed
    if task == "qa":
        return _qa_drops(metrics, gates.pruned_f1_drop, "baseline")
    missed = _perplexity_miss(metrics, gates.pruned_perplexity_ratio, "baseline")
    if "reading_of_baseline_pct" in metrics:
        interval = metrics.get("reading_of_baseline_ci95")
        share = f"{metrics['reading_of_baseline_pct']:.1f}%" + (f" (95% CI {interval[0]:.1f}-{interval[1]:.1f}%)" if interval else "")
        if metrics["reading_of_baseline_pct"] < gates.pruned_reading_pct:
            missed.append(f"reading-comprehension F1 {share} of baseline's (gate ≥ {gates.pruned_reading_pct:g}%)")
        elif interval and interval[0] < gates.pruned_reading_low_pct:
            missed.append(f"reading-comprehension F1 {share} of baseline's: the interval's lower end is under "
                          f"{gates.pruned_reading_low_pct:g}%, too uncertain to pass")
    elif metrics.get("instruction_of_baseline_pct", 100) < gates.pruned_instruction_pct:
        missed.append(f"instruction-set score {metrics['instruction_of_baseline_pct']:.1f}% of baseline's "
                      f"(gate ≥ {gates.pruned_instruction_pct}%)")
    return missed


def _exact_misses(task: str, metrics: dict, gates: Gates) -> list[str]:
    missed = []
    floor = gates.exact_agreement_pct
    key = "validation_agreement_pct" if task == "qa" else "agreement_pct"  # QA: validation decides, test is shown
    if key in metrics and metrics[key] < floor:
        unit = "answerable validation questions' forced spans" if task == "qa" else "greedy tokens"
        stopped = metrics.get("agreement_stopped")
        missed.append(f"agrees with its source on {'at most ' if stopped else ''}{metrics[key]:.2f}% of "
                      f"{unit} (gate ≥ {floor}%, an exact export" + (f"; {stopped}" if stopped else "") + ")")
    if task == "generation" and metrics.get("identical_continuations_pct", 100) < gates.exact_identical_pct:
        missed.append(f"its greedy continuation is the source's on {metrics['identical_continuations_pct']:.1f}% of "
                      f"prompts (gate ≥ {gates.exact_identical_pct}%, an exact export)")
    return missed


def _perplexity_miss(metrics: dict, allowed: float, reference: str) -> list[str]:
    if metrics.get("perplexity_ratio", 1) > allowed:
        return [f"perplexity {metrics['perplexity_ratio']:.3f}x {reference} (gate ≤ {allowed}x)"]
    return []


def promise_line(task: str, runtime: str, metrics: dict) -> str:
    """The variant's promise and its measures in one line, as /variants and the app show it: the gated
    ones with their intervals, then what is shown ("lossy: validation F1 −0.4 (95% CI −0.9 to +0.1),
    validation forced F1 −0.2 (…), test F1 −0.3, forced F1 +0.1, same span on 88.0%")."""
    from optimize.evaluate.intervals import ratio_text, signed

    if not metrics or "note" in metrics:
        return ""
    promise = promise_of(runtime, metrics)
    parts = []
    for label, key in (("validation F1", "validation_f1_delta"), ("validation forced F1", "validation_forced_f1_delta"),
                       ("reading F1", "reading_f1_delta")):
        if key in metrics:
            parts.append(f"{label} {delta_text(metrics[key])}")
    test = [f"{label} {signed(metrics[key]['delta'])}" for label, key in (("F1", "overall_f1_delta"),
                                                                           ("forced F1", "forced_f1_delta")) if key in metrics]
    if test:  # shown, never gated
        parts.append("test " + ", ".join(test))
    if "perplexity_ratio_ci95" in metrics:
        parts.append("perplexity " + ratio_text({"ratio": metrics["perplexity_ratio"], "ci95": metrics["perplexity_ratio_ci95"]}))
    elif "perplexity_ratio" in metrics:
        parts.append(f"perplexity {metrics['perplexity_ratio']:.3f}x")
    if "instruction_delta" in metrics:
        parts.append(f"instruction set {delta_text(metrics['instruction_delta'])} points")
    if "agreement_pct" in metrics:
        parts.append(f"same {'span' if task == 'qa' else 'greedy token'} "
                     f"on {metrics['agreement_pct']:.1f}%")
    if metrics.get("lookup_prompts"):
        parts.append(f"the same text with and without lookup on {metrics['lookup_identical']}/{metrics['lookup_prompts']} prompts")
    return f"{promise}: " + ", ".join(parts) if parts else promise


# SQuAD 2.0 F1 (tuned threshold) and forced-span F1 on the validation articles: what QA gates read.
# The test articles' two are measured and shown beside them, and decide nothing (issue 48).
QA_GATED = ("validation_f1", "validation_forced_f1")
QA_SHOWN = ("overall_f1", "forced_f1")


def beside_reference(metrics: dict, reference: dict) -> dict:
    """A QA variant's metrics with its reference's gated and shown measures as `reference_<name>`, as
    `failures` reads them (the source for an export, the baseline for a pruned model)."""
    return {**metrics, **{f"reference_{key}": reference[key] for key in QA_GATED + QA_SHOWN if key in reference}}


NOT_GATED = "nothing (built without measuring: --no-eval)"


def serves(built: dict | None, wanted: dict) -> bool:
    """Whether a build made from `built` inputs is the one `wanted` asks for. A build that measured and passed its
    gates serves a request not to measure (`--no-eval` rebuilt it and dropped its measures)."""
    if built and wanted.get("gated_on") == NOT_GATED:
        built = {**built, "gated_on": NOT_GATED}
    located = lambda inputs: {k: v for k, v in inputs.items() if k != "source"}  # noqa: E731 - the fingerprint says
    return bool(built) and located(built) == located(wanted)  # which weights; the path moves with the checkout


def gate_inputs(task: str, evaluate: bool = True, reading_questions: int | None = None) -> dict:
    """What a build's manifest records about what its gates read, so that a variant gated before a change
    of gated set is built and measured again (QA moved from the test articles to validation, issue 48;
    generation's perplexity from the QA test articles' paragraphs to the reading set's:
    experiments/perplexity-on-validation/RULE.md). Without that data, without measuring (`--no-eval`) or on fewer
    reading questions, the build says so: a variant built so is built and gated again by a build that measures all."""
    from optimize.evaluate import squad

    if not evaluate:
        return {"gated_on": NOT_GATED}
    if task == "qa":
        gated = "validation articles" if squad.DEFAULT_SQUAD_PATH.exists() else "nothing (SQuAD 2.0 dev data absent)"
    elif squad.MORE_DEV_PATH.exists():
        gated = "reading-set paragraphs (squad-v2-dev-more)" + (
            f", the first {reading_questions} reading questions" if reading_questions else "")
    else:
        gated = "held-out prompts and the instruction set only (squad-v2-dev-more absent)"
    return {"gated_on": gated}


def _qa_drops(metrics: dict, allowed: float, reference: str) -> list[str]:
    missed = []
    for label, key in zip(("SQuAD 2.0 F1", "forced-span F1"), QA_GATED):
        if key not in metrics or f"reference_{key}" not in metrics:
            if "overall_f1" in metrics:  # measured, but not on validation (a record or a build from before)
                missed.append(f"validation {label} not measured for it and {reference} (measure again: "
                              "python -m optimize verify)")
            continue
        drop = metrics[f"reference_{key}"] - metrics[key]
        if drop > allowed:
            missed.append(f"validation {label} {metrics[key]:.2f} is {drop:.2f} below {reference} (gate ≤ {allowed})")
    return missed


BUILD_ADVICE = "Try a gentler recipe (per-channel INT8, fewer quantized layers, less pruning) or rebuild with --force."


def check(name: str, task: str, runtime: str, metrics: dict, advice: str = BUILD_ADVICE) -> None:
    missed = failures(task, runtime, metrics)
    if missed:
        raise GateFailed(f"{name} missed its accuracy gate: " + "; ".join(missed) + ". " + advice, missed)
