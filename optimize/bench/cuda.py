"""`python -m optimize bench-cuda`: the four variants on a GPU, each beside PyTorch fp32 eager on the same GPU.

What runs on CUDA (the catalog's choice when a GPU is present): the PyTorch variants in fp16 with SDPA
attention (generation with its KV cache), the ONNX variants as their CUDA builds (FP16 graphs, made
by `build` on a GPU machine) on the CUDA execution provider with IO binding. The reference row is the
baseline's weights in PyTorch fp32 with eager attention, what a new user runs first.

Accuracy keeps the CPU promises: each CUDA variant against its CPU source in fp32 (QA: the same
answer on validation questions, and SQuAD 2.0 F1 beside; generation: the same greedy tokens on the
held-out prompts). Writes reports/qa-cuda.{md,json} and reports/generation-cuda.{md,json}.
"""
from __future__ import annotations

import json
import logging
import math
import platform
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from models import generation, qa
from models.catalog import Task, default_preset
from models.reports import REPORTS_DIR
from models.runners import Runner, load_qa_config, load_runner, torch_device
from models.timing import percentile, timed_rounds
from optimize.bench.cuda_tables import EAGER, NO_GRAPH, markdown

log = logging.getLogger(__name__)
SOURCE_OF = {"baseline": "baseline", "optimized": "baseline", "pruned": "pruned", "pruned-optimized": "pruned"}


@dataclass
class CudaBenchConfig:
    qa_tokens: tuple[int, ...] = (128, 384, 550)
    qa_rounds: int = 100
    warmup: int = 10
    qa_questions: int = 400  # validation questions (articles 9-12) for agreement with the CPU source
    generation_prompt_tokens: int = 128
    new_tokens: int = 64
    generation_rounds: int = 5
    agreement_prompts: int = 8
    agreement_tokens: int = 32
    out: Path = REPORTS_DIR


def gpu_facts() -> dict:
    """The GPU, driver, CUDA and runtime versions behind the numbers."""
    import onnxruntime

    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, check=False).stdout.strip()
    except FileNotFoundError:
        driver = "none"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU (a rehearsal on the CPU)"
    return {"gpu": gpu, "driver": driver, "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "onnxruntime": onnxruntime.__version__, "providers": [p for p in onnxruntime.get_available_providers() if p != "TensorrtExecutionProvider"],  # its library is not carried
            "python": platform.python_version(), "cpu": platform.processor() or platform.machine()}


def build_on_gpu(task: Task) -> dict[str, str]:
    """Every variant built here, on the GPU machine (the ONNX ones in FP16), each after the one it is
    built from; their accuracy is measured by this bench instead of the build's CPU gates."""
    from optimize.build import build_preset

    return build_preset(default_preset(task), evaluate=False)


def cuda_runners(task: Task) -> tuple[dict[str, Runner], dict[str, str]]:
    """Each variant as the catalog loads it on this machine, and the fp32 eager reference."""
    from models.showdown import Showdown

    showdown, runners, failures = Showdown(presets={task: default_preset(task)}), {}, {}
    for variant in ("baseline", "optimized", "pruned", "pruned-optimized"):
        try:
            runners[variant] = showdown.runner(task, variant)
        except Exception as error:
            failures[variant] = f"{type(error).__name__}: {str(error)[:300]}"
    if task == "qa":  # what the CUDA graph buys: the same ONNX variants on the dynamic session beside them
        for variant in ("optimized", "pruned-optimized"):
            if variant in runners and getattr(runners[variant].model, "cuda_graph", False):
                runners[f"{variant}{NO_GRAPH}"] = without_cuda_graph(runners[variant])
    if "baseline" in runners:
        runners = {EAGER: eager_fp32(task, runners["baseline"]), **runners}
    return runners, failures


def without_cuda_graph(runner: Runner) -> Runner:
    from models.runners import OnnxQA, session_options

    return replace(runner, model=OnnxQA(Path(runner.path), session_options(), "CUDAExecutionProvider", cuda_graph=False))


def cuda_graphs(runners: dict[str, Runner]) -> dict[str, str]:
    """Per ONNX QA variant: replayed as a CUDA graph, or why not (ONNX Runtime's words)."""
    return {name: "CUDA graph" if runner.model.cuda_graph else f"no CUDA graph: {runner.model.cuda_graph_error or 'disabled'}"
            for name, runner in runners.items() if hasattr(runner.model, "cuda_graph")}


def eager_fp32(task: Task, baseline: Runner) -> Runner:
    from transformers import AutoModelForCausalLM, AutoModelForQuestionAnswering

    loader = AutoModelForQuestionAnswering if task == "qa" else AutoModelForCausalLM
    model = loader.from_pretrained(baseline.path, dtype=torch.float32, attn_implementation="eager").eval().to(torch_device())
    return Runner(task=task, variant=EAGER, runtime="torch", path=baseline.path, tokenizer=baseline.tokenizer,
                  model=model, qa_config=load_qa_config(baseline.path))


def cpu_sources(task: Task, runners: dict[str, Runner]) -> dict[str, Runner]:
    """The CPU fp32 models each CUDA variant promises to stay with."""
    return {name: load_runner(task, name, "torch", runners[name].path, device="cpu")
            for name in ("baseline", "pruned") if name in runners}


def wilson(hits: int, total: int) -> tuple[float, float]:
    """95 % interval of a share (Wilson): small sets say how little they know."""
    if total == 0:
        return (0.0, 1.0)
    z, share = 1.96, hits / total
    centre = (share + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return (centre - half, centre + half)


def qa_timings(runners: dict[str, Runner], config: CudaBenchConfig) -> list[dict]:
    from optimize.publish.report import QA_QUESTION, qa_context

    rows = []
    for tokens in config.qa_tokens:
        context = qa_context(runners[EAGER].tokenizer, tokens)
        contenders = {name: (lambda r: lambda: qa.answer(r, QA_QUESTION, context))(runner) for name, runner in runners.items()}
        timings = timed_rounds(contenders, config.qa_rounds, config.warmup)
        for name, runs in timings.items():
            model_ms = [v["latency_ms"]["model"] for _, v in runs]
            rows.append({"tokens": tokens, "variant": name, "device": runners[name].device,
                         "model_p50_ms": percentile(model_ms, 50), "model_p95_ms": percentile(model_ms, 95),
                         "total_p50_ms": percentile([1e3 * s for s, _ in runs], 50), "answer": runs[-1][1]["answer"]})
        eager = next(r for r in rows if r["tokens"] == tokens and r["variant"] == EAGER)
        for row in rows:
            if row["tokens"] == tokens:
                row["speedup_model"] = eager["model_p50_ms"] / row["model_p50_ms"]
                row["speedup_total"] = eager["total_p50_ms"] / row["total_p50_ms"]
        log.info("QA ~%d tokens timed", tokens)
    return rows


def qa_agreement(runners: dict[str, Runner], sources: dict[str, Runner], config: CudaBenchConfig) -> dict[str, dict]:
    """Each CUDA variant's answers ("no answer" allowed, as SQuAD 2.0 scores) against its CPU source's."""
    from optimize.evaluate import squad

    data = squad.examples(squad.load_articles(), squad.WIDE_VALIDATION.validation)
    data = data[:: max(1, len(data) // config.qa_questions)][: config.qa_questions]  # spread over the four articles

    def predictions(runner: Runner) -> dict[str, str]:
        return {e.id: qa.answer(runner, e.question, e.context, handle_impossible_answer=True)["answer"] for e in data}

    source_answers = {name: predictions(runner) for name, runner in sources.items()}
    out = {}
    for name, runner in runners.items():
        source = "baseline" if name == EAGER else SOURCE_OF.get(name)
        if source not in source_answers:
            continue
        mine, theirs = predictions(runner), source_answers[source]
        same = sum(mine[i] == theirs[i] for i in mine)
        low, high = wilson(same, len(mine))
        out[name] = {"source": f"{source} (CPU, PyTorch fp32)", "questions": len(mine), "same_answer": same / len(mine),
                     "same_answer_interval": [low, high], "f1": squad.evaluate(data, mine)["overall_f1"],
                     "source_f1": squad.evaluate(data, theirs)["overall_f1"]}
        log.info("QA agreement of %s: %.3f", name, same / len(mine))
    return out


def generation_timings(runners: dict[str, Runner], config: CudaBenchConfig) -> list[dict]:
    from optimize.bench.run import decode_rate, generation_prompt

    prompt = generation_prompt(runners[EAGER].tokenizer, config.generation_prompt_tokens)
    contenders = {name: (lambda r: lambda: generation.generate(r, prompt, config.new_tokens, ignore_eos=True))(runner)
                  for name, runner in runners.items()}
    timings = timed_rounds(contenders, config.generation_rounds, 2)
    rows = []
    for name, runs in timings.items():
        values = [v for _, v in runs]
        rows.append({"variant": name, "device": runners[name].device, "new_tokens": values[-1]["new_tokens"],
                     "total_p50_ms": percentile([1e3 * s for s, _ in runs], 50),
                     "tokens_per_s": percentile([v["tokens_per_s"] for v in values], 50),
                     "decode_tokens_per_s": percentile([decode_rate(v) for v in values], 50),
                     "ttft_ms": percentile([v["ttft_ms"] for v in values], 50), "text": values[-1]["text"][:80]})
    eager = next(r for r in rows if r["variant"] == EAGER)
    for row in rows:
        row["speedup_decode"] = row["decode_tokens_per_s"] / eager["decode_tokens_per_s"]
        row["speedup_total"] = eager["total_p50_ms"] / row["total_p50_ms"]
    return rows


def generation_agreement(runners: dict[str, Runner], sources: dict[str, Runner], config: CudaBenchConfig) -> dict[str, dict]:
    """Perplexity on the validation paragraphs against the CPU source's (the paired ratio and its interval: FP16,
    like INT8, promises its source's quality, not its texts), and beside it the share of greedy new tokens
    equal to the source's at the same position, and identical texts."""
    from optimize.evaluate.accuracy import perplexity, text_nll, validation_paragraphs
    from optimize.evaluate.heldout import PROMPTS
    from optimize.evaluate.intervals import paired_ratio

    prompts = PROMPTS[: config.agreement_prompts]
    paragraphs = validation_paragraphs() or []
    source_nll = {name: text_nll(runner, paragraphs) for name, runner in sources.items()} if paragraphs else {}

    def continuation(runner: Runner, prompt: str) -> list[int]:
        text = generation.generate(runner, prompt, config.agreement_tokens)["text"]
        return runner.tokenizer(text, add_special_tokens=False).input_ids

    references = {name: [continuation(runner, p) for p in prompts] for name, runner in sources.items()}
    out = {}
    for name, runner in runners.items():
        source = "baseline" if name == EAGER else SOURCE_OF.get(name)
        if source not in references:
            continue
        equal = total = identical = 0
        for prompt, reference in zip(prompts, references[source]):
            mine = continuation(runner, prompt)
            equal += sum(a == b for a, b in zip(mine, reference))
            total += max(len(mine), len(reference))
            identical += mine == reference
        out[name] = {"source": f"{source} (CPU, PyTorch fp32)", "prompts": len(prompts), "token_agreement": equal / total,
                     "identical_texts": identical}
        if source in source_nll:
            nll = text_nll(runner, paragraphs)
            ratio = paired_ratio(source_nll[source], nll)
            out[name] |= {"paragraphs": len(paragraphs), "perplexity": perplexity(nll=nll),
                          "source_perplexity": perplexity(nll=source_nll[source]),
                          "perplexity_ratio": ratio["ratio"], "perplexity_ratio_ci95": ratio["ci95"]}
        log.info("generation agreement of %s: %.3f", name, equal / total)
    return out


def run_task(task: Task, config: CudaBenchConfig) -> dict:
    """Build, time and check one task on this GPU; the record that the report is written from."""
    record: dict = {"task": task, "config": {k: str(v) for k, v in asdict(config).items()}, "machine": gpu_facts()}
    record["builds"] = build_on_gpu(task)
    runners, record["load_failures"] = cuda_runners(task)
    sources = cpu_sources(task, runners)
    if task == "qa":
        record["cuda_graphs"] = cuda_graphs(runners)
        record["timings"] = qa_timings(runners, config)
        record["agreement"] = qa_agreement(runners, sources, config)
    else:
        record["timings"] = generation_timings(runners, config)
        record["agreement"] = generation_agreement(runners, sources, config)
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / f"{task}-cuda.json").write_text(json.dumps(record, indent=1, default=str))

    (config.out / f"{task}-cuda.md").write_text(markdown(record))
    return record
