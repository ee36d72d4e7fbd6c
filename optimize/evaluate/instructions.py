"""`python -m optimize instructions`: the public instruction set (optimize/evaluate/instruction_set.json), scored
for every ready generation variant, each as a share of the baseline's own score.

Why: a pruned model is a different, smaller model by design, so greedy agreement with the baseline
is the wrong test for it (issue 13); what it keeps of the baseline's usefulness is. Each prompt has
an exact check (a regular expression) or expected keywords, so the score needs no judge model.
Greedy decoding through the app's own path (models/generation.py), so it measures what a visitor gets
(PyTorch variants decode the same tokens in batches).
Not yet a build gate: it is measured and reported beside perplexity and agreement.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

SET_PATH = Path(__file__).with_name("instruction_set.json")
SHORT_ANSWER_TOKENS = 32  # facts, arithmetic, formats; "long" prompts say their own max_new_tokens
RECORD = Path(__file__).with_name("instruction_record.json")


def load(path: Path = SET_PATH) -> list[dict]:
    return json.loads(path.read_text())["prompts"]


def passes(text: str, check: dict) -> bool:
    """Every condition of `check` holds: `all` keywords present, at least one of `any`, none of
    `none`, `regex` found (case-insensitive unless `case_sensitive`)."""
    sensitive = check.get("case_sensitive", False)
    haystack = text if sensitive else text.lower()
    if not all(word in haystack for word in check.get("all", ())):
        return False
    if "any" in check and not any(word in haystack for word in check["any"]):
        return False
    if any(word in haystack for word in check.get("none", ())):
        return False
    return "regex" not in check or re.search(check["regex"], text, 0 if sensitive else re.IGNORECASE) is not None


def measure(runner, prompts: list[dict] | None = None) -> dict:
    """The variant's score on the set: % passed, overall and per kind, and its answers."""
    prompts = prompts or load()
    texts = _batched_texts(runner, prompts)
    passed, per_kind, totals, answers = 0, Counter(), Counter(), {}
    for item in prompts:
        text = texts[item["id"]]
        ok = passes(text, item["check"])
        passed += ok
        per_kind[item["kind"]] += ok
        totals[item["kind"]] += 1
        answers[item["id"]] = {"text": text, "passed": ok}
    return {"instruction_pct": round(100 * passed / len(prompts), 1), "passed": passed, "prompts": len(prompts),
            "by_kind": {kind: f"{per_kind[kind]}/{total}" for kind, total in totals.items()}, "answers": answers}


def set_key() -> str:
    """What a score depends on besides the model: the set's prompts and checks, the answer length."""
    return hashlib.sha256(SET_PATH.read_bytes() + str(SHORT_ANSWER_TOKENS).encode()).hexdigest()[:10]


def recorded(preset_name: str, directory: Path, load: Callable[[], object]) -> dict:
    """The instruction-set score of the model in `directory`: {"instruction_pct", "passed_by_prompt"},
    plus "recorded" (when and where) if it came from the record (`instruction_record.json` beside this
    file for the built-in presets, `<artifacts>/instruction-record.json` for yours), as reading
    comprehension is (optimize/evaluate/records.py); measured with `load()`'s runner otherwise."""
    from optimize.evaluate.records import model_record

    keep = lambda result: {"instruction_pct": result["instruction_pct"], "passed_by_prompt": result["passed_by_prompt"]}  # noqa: E731
    return model_record(preset_name, directory, RECORD, "instruction-record.json", set_key(), lambda: scored(load()), keep, keep)


def scored(runner) -> dict:
    """`measure` without the answers' texts: {"instruction_pct", "passed_by_prompt": {prompt id: passed}}."""
    result = measure(runner)
    return {"instruction_pct": result["instruction_pct"],
            "passed_by_prompt": {item: answer["passed"] for item, answer in result["answers"].items()}}


def _batched_texts(runner, prompts: list[dict], batch_size: int = 16) -> dict[str, str]:
    texts = {}
    for new_tokens in sorted({item.get("max_new_tokens", SHORT_ANSWER_TOKENS) for item in prompts}):
        group = [item for item in prompts if item.get("max_new_tokens", SHORT_ANSWER_TOKENS) == new_tokens]
        answers = greedy_texts(runner, [item["prompt"] for item in group], new_tokens, batch_size)
        texts.update({item["id"]: text for item, text in zip(group, answers)})
    return texts


def greedy_texts(runner, prompts: list[str], new_tokens: int, batch_size: int = 16) -> list[str]:
    """What `generation.generate` answers to each prompt. A PyTorch runner decodes the same greedy
    tokens in left-padded batches: minutes less per PyTorch variant on two cores
    (tests/test_instructions.py checks the texts against the app's path); ONNX ones one by one."""
    from models import generation
    from optimize.evaluate.continuations import batched_torch_continuations

    asked = [generation.validate(prompt, new_tokens)[0] for prompt in prompts]
    if runner.runtime != "torch":
        return [generation.generate(runner, prompt, new_tokens)["text"] for prompt in asked]
    sequences = batched_torch_continuations(runner, asked, new_tokens, batch_size)
    return [runner.tokenizer.decode(sequence[0, generation.preprocess(runner.tokenizer, prompt).shape[1]:].tolist(),
                                    skip_special_tokens=True) for prompt, sequence in zip(asked, sequences)]


def run(output: Path | None = None, showdown=None) -> dict:
    """Every ready generation variant of the default preset (or `showdown`'s), the baseline first; writes
    reports/instructions.{json,md}."""
    import logging
    import time

    from models.errors import VariantUnavailable
    from models.reports import REPORTS_DIR
    from models.catalog import VARIANTS
    from models.showdown import Showdown

    output = output or REPORTS_DIR
    showdown = showdown or Showdown.from_environment()
    results = {}
    names = {variant.name for variant in showdown.preset("generation").variants}
    for variant in (name for name in VARIANTS if name in names):  # the baseline first
        try:
            runner = showdown.runner("generation", variant)
        except VariantUnavailable as error:
            logging.getLogger("optimize.evaluate.instructions").info("generation/%s not measured: %s", variant, error)
            continue
        results[variant] = measure(runner)
    if not results:  # a report of nothing had replaced the committed one, and the command exited 0
        raise VariantUnavailable(f"no generation variant of {showdown.preset('generation').name} loads: build them "
                                 "first (python -m optimize build --task generation …); no report written")
    baseline = results.get("baseline")
    base = baseline["instruction_pct"] if baseline else 0  # no share of a baseline that passed nothing
    for result in results.values():
        result["of_baseline_pct"] = round(100 * result["instruction_pct"] / base, 1) if base else None
        result["vs_baseline"] = _paired(baseline, result) if baseline and result is not baseline else None
    report = {"created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "set": str(SET_PATH.name), "variants": results}
    output.mkdir(parents=True, exist_ok=True)
    (output / "instructions.json").write_text(json.dumps(report, indent=2) + "\n")
    (output / "instructions.md").write_text(markdown(report))
    print(markdown(report))
    return report


def _paired(baseline: dict, result: dict) -> dict:
    """The variant's passes minus the baseline's, prompt by prompt, in points with a 95 % interval (prompts
    resampled): at 60 prompts the interval is about ±13 points, so a few prompts' difference is noise."""
    from optimize.evaluate.intervals import paired_delta

    passed = lambda answers: {item: float(answer["passed"]) for item, answer in answers.items()}  # noqa: E731
    return paired_delta(passed(baseline["answers"]), passed(result["answers"]))


def markdown(report: dict) -> str:
    lines = [f"# Instruction set — {report['created']}", "",
             f"`python -m optimize instructions`: {next(iter(report['variants'].values()), {}).get('prompts', 0)} prompts "
             f"of `optimize/evaluate/{report['set']}`, greedy, "
             "scored by exact checks or expected keywords; every variant measured in this run (no record read). "
             "The interval resamples the prompts: at 60 prompts a few prompts' difference is inside it.", "",
             "| variant | passed | score | of baseline's | vs baseline, points (95 % CI, prompts resampled) | by kind |",
             "|---|---|---|---|---|---|"]
    for variant, result in report["variants"].items():
        share = f"{result['of_baseline_pct']:.1f} %" if result.get("of_baseline_pct") is not None else "—"
        paired = result.get("vs_baseline")
        delta = f"{paired['delta']:+.1f} ({paired['ci95'][0]:+.1f} to {paired['ci95'][1]:+.1f})" if paired else "—"
        kinds = ", ".join(f"{kind} {count}" for kind, count in result["by_kind"].items())
        lines.append(f"| {variant} | {result['passed']}/{result['prompts']} | {result['instruction_pct']:.1f} % | {share} | {delta} | {kinds} |")
    return "\n".join(lines) + "\n"
