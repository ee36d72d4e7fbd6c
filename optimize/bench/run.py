"""`python -m optimize bench`: the project against what users would pick instead, in one run.

Contenders, all from the project's own baseline weights:
- `pipeline-fp32`: transformers `pipeline` in fp32 (what a new user writes);
- `optimum-int8`: optimum's default ONNX export + `AutoQuantizationConfig.avx512_vnni(is_static=False)`
  dynamic quantization, inside optimum's pipeline (what an informed user writes);
- `llama.cpp` on the GGUF a generation baseline came from (optional: requirements-bench.txt), in a
  process of its own (see `llama_cpp_contender`);
- every ready project variant, through the app's own pre/post-processing (models/qa.py,
  models/generation.py);
- the app itself through gradio_client (round trip minus the latency the app reports = overhead).

Protocol as in `report`: load once, warm up, rounds with a rotating order, p50/p95, ratios against
the two outside contenders. Writes reports/bench.json and reports/bench.md.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from models import generation, qa
from models.errors import InputError, VariantUnavailable
from models.manifest import write_atomically
from models.reports import REPORTS_DIR
from models.runners import Runner, cpu_threads, load_runner  # the same ORT settings for every contender
from models.showdown import Showdown
from models.timing import percentile, timed_rounds
from optimize.bench.app_timing import FLOOR, bench_app
from optimize.bench.contenders import exact_rung_dir, generation_contenders, llama_cpp_contender, qa_pipelines
from optimize.bench.tables import (
    GENERATION_PROMPT_WORDS,
    LOOKUP_ROWS,
    LOOKUP_PROMPTS,
    LOOKUP_WORKLOAD,
    Bench,
    EXACT_RUNG,
    BenchConfig,
    Result,
    carry_other_tasks,
    compared,
    fastest,
    fastest_built,
    markdown,
    outside_f1,
    ratios,
)
from optimize.export.gguf_graft import source_gguf
from optimize.publish.report import QA_QUESTION, machine, qa_context

log = logging.getLogger(__name__)


def long_document(words: int) -> str:
    """~`words` words of held-out Wikipedia (SQuAD test articles) with the seed story in the middle."""
    from models.showdown import SEED_CONTEXT_LONG as SEED_CONTEXT
    from optimize.evaluate.accuracy import test_examples

    data = test_examples() or []
    paragraphs = list(dict.fromkeys(e.context for e in data)) or [SEED_CONTEXT]
    text: list[str] = []
    while len(text) < words:
        for paragraph in paragraphs:
            text.extend(paragraph.split())
            if len(text) >= words // 2 and SEED_CONTEXT.split()[0] not in text:
                text.extend(SEED_CONTEXT.split())
            if len(text) >= words:
                break
    return " ".join(text[:words])


def generation_prompt(tokenizer, tokens: int) -> str:
    words = GENERATION_PROMPT_WORDS.split()
    count = len(words)
    while len(tokenizer(" ".join(words[i % len(words)] for i in range(count + 1))).input_ids) <= tokens:
        count += 1
    return " ".join(words[i % len(words)] for i in range(count))


def _result(workload: str, name: str, runs: list) -> Result:
    ms = [1000 * seconds for seconds, _ in runs]
    value = runs[-1][1]
    result = Result(workload, name, percentile(ms, 50), percentile(ms, 95))
    if isinstance(value, dict) and "tokens_per_s" in value:
        result.tokens_per_s = percentile([v["tokens_per_s"] for _, v in runs], 50)
        result.ttft_ms = percentile([v["ttft_ms"] for _, v in runs], 50)
        result.decode_tokens_per_s = percentile([decode_rate(v) for _, v in runs], 50)
        result.new_tokens = int(percentile([v["new_tokens"] for _, v in runs], 50))
        if "prompt_tokens" in value:
            computed = [v["prompt_tokens"] - v.get("cached_prompt_tokens", 0) for _, v in runs]  # ours cache the template
            result.prefill_tokens_per_s = percentile([1e3 * n / v["ttft_ms"] for n, (_, v) in zip(computed, runs)], 50)
        result.answer = value["text"][:80]
        if "draft" in value:  # prompt lookup: what its drafts bought
            draft = value["draft"]
            result.notes = f"lookup kept {draft['accepted']} of {draft['drafted']} drafted tokens ({draft['passes']} passes)"
    elif isinstance(value, dict):
        result.answer = value.get("answer", "")
    else:
        result.answer = str(value)
    return result


def decode_rate(generated: dict) -> float:
    """Tokens/s after the first token: what reading the weights once per token bounds. The project's
    variants report it (generation.phase_speeds); llama.cpp's worker reports its times only."""
    if "decode_tokens_per_s" in generated:
        return generated["decode_tokens_per_s"]
    decode_s = (generated["latency_ms"]["model"] - generated["ttft_ms"]) / 1e3
    return (generated["new_tokens"] - 1) / decode_s if decode_s > 0 else 0.0


def built_runners(showdown: Showdown, task: str) -> dict[str, Runner]:
    """The preset's variants that are built, each loaded once; a missing one is logged and left out."""
    runners = {}
    for variant in (v.name for v in showdown.preset(task).variants):
        try:
            runners[variant] = showdown.runner(task, variant)
        except VariantUnavailable as error:
            log.info("%s/%s not benchmarked: %s", task, variant, error)
    return runners


def bench_qa(showdown: Showdown, config: BenchConfig, outside: dict[str, Callable[[str, str], str]]) -> list[Result]:
    project = built_runners(showdown, "qa")
    tokenizer = project["baseline"].tokenizer
    workloads = [(f"QA ~{n} tokens", qa_context(tokenizer, n), config.qa_rounds) for n in config.qa_tokens]
    if config.long_document_words:
        workloads.append((f"QA {config.long_document_words}-word document (stride)",
                          long_document(config.long_document_words), config.long_rounds))
    results, best = [], fastest(project)
    for workload, context, rounds in workloads:
        contenders = {name: (lambda f: lambda: f(QA_QUESTION, context))(f) for name, f in outside.items()}
        contenders.update({variant: (lambda r: lambda: qa.answer(r, QA_QUESTION, context))(runner)
                           for variant, runner in project.items()})
        if best and workload == "QA ~384 tokens":  # the context cache (models/qa.py) missed on every call
            contenders[f"{best}, new context each call"] = _cold_context(project[best], context)
        timings = showdown.on_model_thread(timed_rounds, contenders, rounds, config.warmup)  # as the app runs them
        results += [_result(workload, name, runs) for name, runs in timings.items()]
        log.info("%s done", workload)
    return results


def _cold_context(runner, context: str) -> Callable[[], dict]:
    """Each call asks about a context the cache has not seen (one more trailing space: the same
    tokens), so tokenisation is paid in full, as for a visitor's first question."""
    calls = itertools.count(1)
    return lambda: qa.answer(runner, QA_QUESTION, context + " " * next(calls))


Decoders = dict[str, Callable[[str, int], dict]]  # name -> (prompt, max new tokens) -> generate's result


@contextlib.contextmanager
def _llama_cpp(showdown: Showdown, about: dict) -> Iterator[Decoders]:
    """llama.cpp started once per bench run and shared by the timing and the greedy agreement, its build written into
    `about` (the bench's memory); none where the generation preset does not come from a GGUF (llama.cpp runs that
    same file)."""
    gguf = source_gguf(showdown.preset("generation"), "optimized")
    if gguf is None:
        yield {}
        return
    with llama_cpp_contender(gguf, showdown.runner("generation", "baseline").tokenizer, about=about) as decoders:
        yield decoders


def project_runners(showdown: Showdown, config: BenchConfig) -> dict[str, Runner]:
    """The generation variants that are built, then `optimized`'s exact rung where the bench shows
    it (a preset from a GGUF: its ladder has one), each loaded once for the timing, the agreement
    and the decode-step figures."""
    runners = built_runners(showdown, "generation")
    directory = exact_rung_dir(showdown.preset("generation")) if config.exact_rung else None
    if directory:
        runners[EXACT_RUNG] = load_runner("generation", "optimized", "onnxruntime", directory)
    return runners


def bench_generation(showdown: Showdown, config: BenchConfig, llama_cpp: Decoders, runners: dict[str, Runner]) -> list[Result]:
    baseline = showdown.runner("generation", "baseline")
    prompt = generation_prompt(baseline.tokenizer, config.generation_prompt_tokens)
    workload = (f"generation, ~{config.generation_prompt_tokens}-token prompt, exactly {config.new_tokens} new tokens "
                f"greedy (end-of-sequence ignored), p50 of {config.generation_rounds} rounds")
    outside = showdown.on_model_thread(generation_contenders, baseline.path)  # as the QA pipelines are
    return _timed_generation(showdown, workload, prompt, config, {**outside, **llama_cpp}, runners)


def _timed_generation(showdown: Showdown, workload: str, prompt: str, config: BenchConfig, outside: Decoders,
                      runners: dict[str, Runner]) -> list[Result]:
    """One generation workload in rotating rounds on the model thread: every contender writes exactly `new_tokens`
    (end-of-sequence ignored, as llama-bench times). `optimized` and `pruned-optimized`, where ONNX, run twice:
    plain (their rows) and with exact prompt lookup, whichever of the two they ship (models/decoding.py)."""
    new_tokens = config.new_tokens
    contenders = {name: (lambda f: lambda: f(prompt, new_tokens, True))(f) for name, f in outside.items()}
    contenders |= {name: (lambda r: lambda: _decoded(r, prompt, new_tokens, lookup=False))(runner)
                   for name, runner in runners.items()}
    not_shipped = set()
    for variant, name in LOOKUP_ROWS.items():
        if variant in runners and runners[variant].runtime == "onnxruntime":
            contenders[name] = (lambda r: lambda: _decoded(r, prompt, new_tokens, lookup=True))(runners[variant])
            not_shipped.add(variant if runners[variant].model.decoder.lookup is not None else name)
    timings = showdown.on_model_thread(timed_rounds, contenders, config.generation_rounds, 1)
    results = [_result(workload, name, runs) for name, runs in timings.items()]
    for result in results:
        result.shipped = result.contender not in not_shipped
        if result.contender in LOOKUP_ROWS.values() and result.shipped:
            result.notes = f"its default decoding; {result.notes}"
        elif result.contender in LOOKUP_ROWS and not result.shipped:
            result.notes = f"lookup off (it ships with lookup; its graph stays the filled one); {result.notes}".rstrip("; ")
    return results


def _decoded(runner: Runner, prompt: str, new_tokens: int, lookup: bool) -> dict:
    """An ONNX variant plain or with exact prompt lookup (models/decoding.py `use_lookup`), whichever it ships,
    set back after; a PyTorch variant as it is."""
    decoder = getattr(runner.model, "decoder", None)
    if decoder is None:
        return generation.generate(runner, prompt, new_tokens, ignore_eos=True)
    before = decoder.lookup, decoder.wide_steps
    decoder.use_lookup(lookup)
    try:
        return generation.generate(runner, prompt, new_tokens, ignore_eos=True)
    finally:
        decoder.lookup, decoder.wide_steps = before


REWRITE_PROMPT = "Rewrite the following paragraph in plain words, keeping every fact:\n\n{context}"


def bench_lookup(showdown: Showdown, config: BenchConfig, llama_cpp: Decoders, runners: dict[str, Runner]) -> list[Result]:
    """Issue 53's prompt-lookup comparison where an answer copies its prompt, on the first reading-set paragraph
    (never trained or chosen on): its reading-comprehension question (the bars) and a request to rewrite it.
    llama.cpp plain and with its own lookup, `optimized` and `pruned-optimized` plain and with lookup, the same
    prompt tokens and exactly `new_tokens` each."""
    from optimize.evaluate import reading

    optimized = runners.get("optimized")
    if optimized is None or optimized.runtime != "onnxruntime" or not reading.available():
        return []
    question = reading.questions()[0]
    prompts = {"reading": reading.PROMPT.format(context=question.context, question=question.question),
               "rewrite": REWRITE_PROMPT.format(context=question.context)}
    onnx = {name: runners[name] for name in ("optimized", "pruned-optimized")
            if name in runners and runners[name].runtime == "onnxruntime"}
    results = []
    for kind, prompt in prompts.items():
        workload = (f"{LOOKUP_WORKLOAD}, {LOOKUP_PROMPTS[kind]} ({len(optimized.tokenizer(prompt).input_ids)} tokens), "
                    f"exactly {config.new_tokens} new tokens greedy (end-of-sequence ignored), p50 of {config.generation_rounds} rounds")
        results += _timed_generation(showdown, workload, prompt, config, llama_cpp, onnx)
    return results


def greedy_agreement(showdown: Showdown, config: BenchConfig, llama_cpp: Decoders, runners: dict[str, Runner]) -> dict[str, dict]:
    """How close each decoder's greedy text stays to PyTorch fp32's (`baseline`) on held-out prompts:
    the share of its new tokens equal to the baseline's at the same position, and of identical texts.
    llama.cpp (its own Q4_1 × Q8_1 dot products) stands beside the project's variants."""
    from optimize.evaluate.heldout import PROMPTS

    baseline = showdown.runner("generation", "baseline")
    prompts = PROMPTS[: config.agreement_prompts]
    decoders = {"baseline": lambda p, n: generation.generate(baseline, p, n), **llama_cpp}
    decoders |= {name: (lambda r: lambda p, n: generation.generate(r, p, n))(runner)
                 for name, runner in runners.items() if name != "baseline"}

    def tokens(text: str) -> list[int]:
        return baseline.tokenizer(text, add_special_tokens=False).input_ids

    reference = [tokens(decoders["baseline"](prompt, config.new_tokens)["text"]) for prompt in prompts]
    agreement = {}
    for name, decode in decoders.items():
        if name == "baseline":
            continue
        same = total = identical = 0
        for prompt, expected in zip(prompts, reference):
            produced = tokens(decode(prompt, config.new_tokens)["text"])
            same += sum(a == b for a, b in zip(produced, expected))
            total += max(len(produced), len(expected))
            identical += produced == expected
        agreement[name] = {"same_tokens_pct": round(100 * same / max(total, 1), 1),
                           "identical_pct": round(100 * identical / len(prompts), 1), "prompts": len(prompts),
                           "new_tokens": config.new_tokens}  # carried with its rows into a later run's table
    return agreement


# --- the app through gradio_client ------------------------------------------------------------------



def memory_bandwidth_gbs(megabytes: int = 512, repeats: int = 5) -> float:
    """Measured copy bandwidth (read + write) with this process's threads: the roof for decoding,
    which reads every weight once per token."""
    source = torch.ones(megabytes * 2**20 // 4)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - started)
    return 2 * source.numel() * 4 / best / 1e9


def decode_graph(path: Path) -> tuple[int, int]:
    """(bytes of weights a decode step reads, nodes it runs): a step's cost is the bytes over the
    memory bandwidth plus a per-node overhead, so both are reported beside the roof."""
    import onnx

    model = onnx.load(str(path / "model.onnx"), load_external_data=False)
    total = 0
    for tensor in model.graph.initializer:
        if "embed_tokens" in tensor.name:
            continue
        total += int(np.prod(tensor.dims)) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    return total, len(model.graph.node)


# --- the run --------------------------------------------------------------------------------------



def run(config: BenchConfig = BenchConfig(), tasks: tuple[str, ...] = ("qa", "generation"),
        output: Path = REPORTS_DIR) -> Bench:
    torch.set_num_threads(cpu_threads())
    showdown = Showdown.from_environment()
    bench = Bench(machine=machine(), config=asdict(config), created=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    if "qa" in tasks:
        log.info("QA: loading the transformers pipeline and optimum's INT8 (exported once, the first time)")
        # loaded, timed and scored on the model thread, with the variants: PyTorch work on a second thread would
        # slow every PyTorch contender (models/showdown.py on_model_thread)
        outside = showdown.on_model_thread(qa_pipelines, showdown.runner("qa", "baseline").path)
        bench.results += bench_qa(showdown, config, outside)
        accuracy = {v: showdown.variant_status("qa", v)["accuracy"] for v in ("baseline", "optimized", "pruned", "pruned-optimized")}
        bench.memory["f1"] = {**(showdown.on_model_thread(outside_f1, outside) if config.outside_f1 else {}),
                              **{v: a["overall_f1"] for v, a in accuracy.items() if a.get("overall_f1") is not None}}
        bench.memory["forced_f1"] = {v: a["forced_f1"] for v, a in accuracy.items() if a.get("forced_f1") is not None}
        if config.app:
            best = fastest_built(bench.results, "QA ~384") or "optimized"
            context = qa_context(showdown.runner("qa", "baseline").tokenizer, 384)
            app_results, overheads = bench_app(best, context, config)
            bench.results += app_results
            bench.memory["app_overhead_p50_ms"] = overheads["app (gradio_client)"]
            bench.memory["http_api_overhead_p50_ms"] = overheads["app (HTTP API, keep-alive)"]
            bench.memory["gradio_client_floor_p50_ms"] = overheads[FLOOR]
    if "generation" in tasks:
        runners = project_runners(showdown, config)
        with _llama_cpp(showdown, bench.memory) as llama_cpp:  # each step's line is the app's progress (models/measure_here.py)
            log.info("generation: every decoder writes exactly %d tokens", config.new_tokens)
            bench.results += bench_generation(showdown, config, llama_cpp, runners)
            log.info("generation: prompt lookup on a reading and a rewrite prompt")
            bench.results += bench_lookup(showdown, config, llama_cpp, runners)
            if config.agreement_prompts:
                log.info("generation: greedy tokens against PyTorch fp32's")
                bench.memory["agreement"] = greedy_agreement(showdown, config, llama_cpp, runners)
        bandwidth = memory_bandwidth_gbs()
        bench.memory.update(bandwidth_gbs=bandwidth, decode={})
        for r in bench.results:
            runner = runners.get(r.contender)
            if r.workload.startswith("generation") and r.decode_tokens_per_s and runner and runner.runtime == "onnxruntime":
                weights, nodes = decode_graph(runner.path)
                mb = weights / 1e6
                gbs = mb * r.decode_tokens_per_s / 1e3
                bench.memory["decode"][r.contender] = {"weight_mb": mb, "nodes": nodes,
                                                       "tokens_per_s": r.decode_tokens_per_s, "gbs": gbs,
                                                       "pct_of_roof": 100 * gbs / bandwidth}
    carried = carry_other_tasks(bench, tasks, output / "bench.json")
    if carried:
        bench.memory["carried"] = carried
    return _written(bench, output)


def render(output: Path = REPORTS_DIR) -> Bench:
    """The ratios and the table again from the rows of `output`/bench.json, timing nothing: after a change to how
    rows are compared, the last run reads under the new rule (its date and rows unchanged)."""
    if not (output / "bench.json").exists():
        raise FileNotFoundError(f"no {output / 'bench.json'} to render: run `python -m optimize bench` first")
    try:
        stored = json.loads((output / "bench.json").read_text())
        bench = Bench(**{**stored, "results": [Result(**r) for r in stored["results"]]})
    except (ValueError, TypeError, KeyError):  # cut short, edited by hand, or another tool's file
        raise InputError(f"{output / 'bench.json'} is not a bench run's record: run `python -m optimize bench` "
                         "again to write one") from None
    return _written(bench, output)


def _written(bench: Bench, output: Path) -> Bench:
    bench.ratios = ratios(bench.results)
    bench.memory["compared"] = compared(bench.results)
    output.mkdir(parents=True, exist_ok=True)
    write_atomically(output / "bench.json", json.dumps(asdict(bench), indent=2) + "\n")  # a later run carries from it
    write_atomically(output / "bench.md", markdown(bench))
    print(markdown(bench))
    return bench
