"""`python -m optimize report`: measure every ready variant side by side in one run.

Protocol: load each variant once, warm it up, then time rounds in which every variant runs
once, the order rotating each round so none is favoured; report p50/p95 and speedup vs baseline.
QA: one question over contexts of ~384 tokens (one window: the headline column), ~550 (two windows)
and ~1,000 (four windows), batch 1: visitors paste paragraphs longer than one window, and a
speedup measured on one window alone hid what they saw (issue 31). Generation: a fixed one-sentence
prompt (its token count in the workload line), greedy 64 new tokens; tokens/s and time to first token.
"""
from __future__ import annotations

import functools
import logging
import sys
import time
from dataclasses import dataclass

import numpy as np

from models import generation, qa
from models.errors import VariantUnavailable
from models.reports import Report, Row
from models.runners import cpu_threads
from models.showdown import SEED_CONTEXT_LONG, Showdown
from models.timing import percentile, timed_rounds
from models.machine import describe

log = logging.getLogger("optimize.publish.report")
QA_QUESTION = "Who worked a little bit harder?"
GENERATION_PROMPT = "Write a short story about a robot who learns to bake bread."


@dataclass(frozen=True)
class ReportConfig:
    qa_tokens: int = 384
    qa_longer_tokens: tuple[int, ...] = (550, 1000)  # two and four windows, timed beside the headline
    qa_rounds: int = 30
    qa_longer_rounds: int = 10
    generation_rounds: int = 5
    new_tokens: int = 64
    warmup: int = 3


def machine() -> dict:
    return describe(cpu_threads())


def qa_context(tokenizer, tokens: int) -> str:
    """The seed story repeated until question + context fill ~`tokens` tokens (one window)."""
    words = SEED_CONTEXT_LONG.split()

    def length(count: int) -> int:
        context = " ".join(words[i % len(words)] for i in range(count))
        return len(tokenizer(QA_QUESTION, context)["input_ids"])

    count = 1
    while length(count + 1) <= tokens:
        count += 1
    return " ".join(words[i % len(words)] for i in range(count))


def parameters(runner, source=None) -> int:
    """The network's weights. An ONNX export carries its source's weights at another precision (4-bit
    codes two to a byte, block scales and minimums, an untied LM head), so it counts as its source
    (`source`, its runner): its initializers said 122 M for SmolLM2's 4-bit export and 169 M for the
    pruned 133 M model's INT8 one. Without its source loaded, the initializers are counted."""
    if runner.runtime == "torch":
        return sum(p.numel() for p in runner.model.parameters())
    if source is not None:
        return parameters(source)
    import onnx
    model = onnx.load(str(runner.path / "model.onnx"), load_external_data=False)
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer)


def measure_task(showdown: Showdown, task: str, config: ReportConfig) -> Report:
    runners, skipped = {}, {}
    for variant in (v.name for v in showdown.preset(task).variants):
        try:
            runners[variant] = showdown.runner(task, variant)
        except VariantUnavailable as error:
            skipped[variant] = str(error)
    if not runners:  # why the first one did not: "build them first" had hidden a Hub preset's unreachable repos
        why = next(iter(skipped.values()), "")
        raise VariantUnavailable(f"no variant of {showdown.preset(task).name} loads ({why}); if they are not built, "
                                 f"build them first (python -m optimize build --task {task} --variant …)")
    tokenizer = next(iter(runners.values())).tokenizer  # every variant of a preset shares its baseline's
    if task == "qa":
        context = qa_context(tokenizer, config.qa_tokens)
        call = lambda runner: qa.answer(runner, QA_QUESTION, context)  # noqa: E731
        rounds, workload = config.qa_rounds, f"QA, {config.qa_tokens} tokens (1 window), batch 1"
        if config.qa_longer_tokens:
            workload += "; longer contexts in the table below"
    else:
        # exactly new_tokens each (end-of-sequence ignored): speeds over different lengths do not compare
        call = lambda runner: generation.generate(runner, GENERATION_PROMPT, config.new_tokens, ignore_eos=True)  # noqa: E731
        # the prompt's length says what TTFT means here: the bench's ~128-token prompt prefills longer
        prompt_tokens = generation.preprocess(tokenizer, GENERATION_PROMPT).shape[1]
        rounds = config.generation_rounds
        workload = (f"generation, {prompt_tokens}-token chat prompt, greedy, exactly {config.new_tokens} new tokens "
                    "(end-of-sequence ignored)")
    contenders = {v: functools.partial(call, runner) for v, runner in runners.items()}
    progress = lambda index: log.info("%s round %d/%d", task, index + 1, rounds)  # noqa: E731
    runs = showdown.on_model_thread(timed_rounds, contenders, rounds, config.warmup, on_round=progress)
    timings: dict[str, list[dict]] = {v: [value for _, value in calls] for v, calls in runs.items()}

    by_length = qa_latency_by_length(showdown, runners, tokenizer, config) if task == "qa" else {}

    def p50(variant: str) -> float:
        return percentile([t["latency_ms"]["total"] for t in timings[variant]], 50)

    baseline = p50("baseline") if "baseline" in timings else None
    report = Report(task=task, preset=showdown.preset(task).name, workload=workload, machine=machine(),
                    created=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), skipped=skipped)
    for variant, runs in timings.items():
        status = showdown.variant_status(task, variant)
        totals = [t["latency_ms"]["total"] for t in runs]
        source = runners.get(showdown.preset(task).variant(variant).built_from or "")
        row = Row(variant=variant, runtime=runners[variant].runtime, parameters=parameters(runners[variant], source),
                  size_mb=status["size_bytes"] / 1e6, accuracy=status["accuracy"],
                  memory_mb=status["memory_bytes"] / 1e6 if status.get("memory_bytes") is not None else None,
                  latency_p50_ms=percentile(totals, 50), latency_p95_ms=percentile(totals, 95),
                  speedup_p50=(baseline / p50(variant)) if baseline else float("nan"))
        if variant in by_length:
            row.latency_by_length = by_length[variant]
        if task == "generation":
            row.tokens_per_s = percentile([t["tokens_per_s"] for t in runs], 50)
            row.ttft_ms = percentile([t["ttft_ms"] for t in runs], 50)
            row.decode_tokens_per_s = percentile([t["decode_tokens_per_s"] for t in runs], 50)
            row.prefill_tokens_per_s = percentile([t["prefill_tokens_per_s"] for t in runs], 50)
            row.new_tokens = int(percentile([t["new_tokens"] for t in runs], 50))
        report.rows.append(row)
    return report


def qa_latency_by_length(showdown: Showdown, runners: dict, tokenizer, config: ReportConfig) -> dict[str, list[dict]]:
    """Per variant, model-call p50 and speedup over the baseline at each longer context, all variants
    interleaved per length on the model thread (the headline one-window column is timed with the rest of the report)."""
    out: dict[str, list[dict]] = {variant: [] for variant in runners}
    for tokens in config.qa_longer_tokens:
        context = qa_context(tokenizer, tokens)
        windows = len(qa.preprocess(tokenizer, QA_QUESTION, context, next(iter(runners.values())).qa_config).offsets)
        contenders = {v: functools.partial(qa.answer, r, QA_QUESTION, context) for v, r in runners.items()}
        progress = lambda index: log.info("qa ~%d tokens round %d/%d", tokens, index + 1, config.qa_longer_rounds)  # noqa: E731
        runs = showdown.on_model_thread(timed_rounds, contenders, config.qa_longer_rounds, config.warmup, on_round=progress)
        p50 = {v: percentile([value["latency_ms"]["total"] for _, value in calls], 50) for v, calls in runs.items()}
        for variant, ms in p50.items():
            out[variant].append({"tokens": tokens, "windows": windows, "p50_ms": ms,
                                 "speedup": p50["baseline"] / ms if "baseline" in p50 else float("nan")})
    return out


def run(config: ReportConfig = ReportConfig(), tasks: tuple[str, ...] = ("qa", "generation")) -> list[Report]:
    showdown = Showdown.from_environment()
    reports = []
    for task in tasks:
        report = measure_task(showdown, task, config)
        report.save()
        print(report.markdown())
        for variant, why in report.skipped.items():
            print(f"warning: {task}/{variant} not measured: {why}", file=sys.stderr)
        reports.append(report)
    return reports
