"""What users would pick instead of the project's variants, from the same baseline weights: the
transformers pipeline, optimum's INT8 pipeline, llama.cpp on the GGUF (optional).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing
import signal
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

from models import generation
from models.catalog import artifacts_root
from models.manifest import source_fingerprint
from models.runners import cpu_threads, session_options  # the same ORT settings for every contender
from optimize.bench.tables import LLAMA_CPP_BUILD, LLAMA_CPP_LOOKUP

log = logging.getLogger(__name__)


def optimum_int8_dir(task: str, baseline_dir: Path) -> Path:
    """optimum's default export + avx512_vnni dynamic quantization, built once per baseline into the artifacts
    cache: its `done` holds the baseline's fingerprint, so a retrained or other preset's baseline is exported again."""
    import shutil

    from optimum.onnxruntime import ORTModelForCausalLM, ORTModelForQuestionAnswering, ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    target = artifacts_root() / "bench" / f"{task}-optimum-int8"
    exported = target.with_name(target.name + "-fp32")
    fingerprint = source_fingerprint(baseline_dir)
    if (target / "done").exists() and (target / "done").read_text().strip() == fingerprint:
        return target
    for stale in (target, exported):
        shutil.rmtree(stale, ignore_errors=True)
    cls = ORTModelForQuestionAnswering if task == "qa" else ORTModelForCausalLM
    model = cls.from_pretrained(baseline_dir, export=True, **({} if task == "qa" else {"use_cache": True}))
    model.save_pretrained(exported)
    quantizer = ORTQuantizer.from_pretrained(exported)
    quantizer.quantize(save_dir=target, quantization_config=AutoQuantizationConfig.avx512_vnni(is_static=False))
    from transformers import AutoTokenizer
    AutoTokenizer.from_pretrained(baseline_dir).save_pretrained(target)
    (target / "done").write_text(fingerprint + "\n")
    return target


def qa_pipelines(baseline_dir: Path) -> dict[str, Callable[[str, str], str]]:
    from optimum.onnxruntime import ORTModelForQuestionAnswering
    from optimum.pipelines import pipeline as optimum_pipeline
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, pipeline

    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    fp32 = pipeline("question-answering", model=AutoModelForQuestionAnswering.from_pretrained(baseline_dir),
                    tokenizer=tokenizer, device="cpu")
    int8_dir = optimum_int8_dir("qa", baseline_dir)
    int8 = optimum_pipeline("question-answering", model=ORTModelForQuestionAnswering.from_pretrained(
        int8_dir, file_name="model_quantized.onnx", session_options=session_options()),
        tokenizer=tokenizer, accelerator="ort")
    # SQuAD 2.0: the pipelines may answer "no answer" too, as the project's runners do
    return {name: (lambda pipe: lambda question, context: pipe(
        question=question, context=context, handle_impossible_answer=True)["answer"])(pipe)
        for name, pipe in (("pipeline-fp32", fp32), ("optimum-int8", int8))}


@contextlib.contextmanager
def llama_cpp_contender(gguf: Path, tokenizer, worker: Callable | None = None, about: dict | None = None
                        ) -> Iterator[dict[str, Callable[[str, int], dict]]]:
    """llama.cpp (llama-cpp-python, optional: requirements-bench.txt) on the GGUF the baseline was
    dequantized from: the same prompt tokens (the project's chat template, tokenized by the same
    tokenizer, outside the timing as for every contender), the same threads, greedy, its KV cache
    cleared before every round. It runs in a process of its own, as users run it: llama.cpp's CPU
    backend meets at an OpenMP barrier after every op, and in this process it shares PyTorch's
    libgomp, which stops spin-waiting once the process holds more OpenMP threads than cores (the
    model thread's team plus the caller's). In-process it decoded far slower than in a process of its
    own (docs/measurements.md); PyTorch and ONNX Runtime contenders measured the same either way. A context manager so that a bench run loads the GGUF once for every measurement
    (timing and greedy agreement) and ends the process when they are done; without
    llama-cpp-python it yields no contender. Two processes: llama.cpp plain, and with its own prompt
    lookup (`LLAMA_CPP_LOOKUP`: llama-cpp-python's LlamaPromptLookupDecoding, 2 drafted tokens, what its
    documentation advises on a CPU), issue 53's peers. A llama.cpp that cannot compute here (its process ends
    before its first token) is left out with the reason, and the bench goes on. `worker`: the process's function;
    `about`: where its build is written (`LLAMA_CPP_BUILD`), for the bench's table."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        log.warning("llama.cpp not benchmarked: llama-cpp-python is not installed (pip install -r requirements-bench.txt)")
        yield {}
        return
    workers = {}
    try:
        for name, lookup_tokens in (("llama.cpp", 0), (LLAMA_CPP_LOOKUP, 2)):
            workers[name] = _start_llama_cpp(gguf, lookup_tokens, worker)
    except PeerFailed as error:
        _stopped(workers)
        log.warning("llama.cpp not benchmarked: %s", error)
        yield {}
        return
    try:
        if about is not None:
            about[LLAMA_CPP_BUILD] = workers["llama.cpp"][2]
        yield {name: functools.partial(_llama_cpp_generate, connection, tokenizer) for name, (_, connection, _) in workers.items()}
    finally:
        _stopped(workers)


class PeerFailed(RuntimeError):
    """The llama.cpp process ended before it answered (a crash inside llama.cpp, not a bench error)."""


# llama.cpp built for the machine (GGML_NATIVE) on a CPU with AMX computes through its AMX backend, which crashed with
# SIGSEGV on its first tokens here (llama.cpp issue 20824); built without it, the same file runs
AMX_HINT = "on a CPU with AMX, build llama-cpp-python without llama.cpp's AMX backend (requirements-bench.txt says how)"


def _start_llama_cpp(gguf: Path, lookup_tokens: int = 0, worker: Callable | None = None
                     ) -> tuple[multiprocessing.process.BaseProcess, Connection, str]:
    """Spawn the llama.cpp worker and wait until it has loaded the GGUF and written a first token, so no round pays
    the load and a llama.cpp that cannot compute on this CPU is found here, before any timing. Returns the process,
    its pipe and its build (version and the CPU features it was compiled for, which decide its speed). `worker`: the
    process's function (`_llama_cpp_worker`)."""
    spawn = multiprocessing.get_context("spawn")
    connection, child_end = spawn.Pipe()
    process = spawn.Process(target=worker or _llama_cpp_worker, args=(child_end, str(gguf), cpu_threads(), lookup_tokens),
                            daemon=True, name="llama.cpp")
    process.start()
    child_end.close()
    try:
        ready, build = connection.recv()
    except EOFError:
        ready = build = None
    if ready != "ready":
        connection.close()
        process.join(timeout=30)
        raise PeerFailed(f"its process ended before its first token ({_ended(process)}); {AMX_HINT}")
    log.info("llama.cpp: %s", build)
    return process, connection, build


def _ended(process: multiprocessing.process.BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def _stopped(workers: dict[str, tuple[multiprocessing.process.BaseProcess, Connection, str]]) -> None:
    for process, connection, _ in workers.values():
        connection.close()  # the worker reads EOF and returns
        process.join(timeout=30)


def _llama_cpp_generate(connection: Connection, tokenizer, prompt: str, max_new_tokens: int, ignore_eos: bool = False) -> dict:
    """One greedy round in the worker, reported in the shape of the project's `generation.generate`."""
    prompt_ids = generation.preprocess(tokenizer, prompt)[0].tolist()
    connection.send((prompt_ids, max_new_tokens, ignore_eos))
    try:
        answer = connection.recv()
    except EOFError:
        raise PeerFailed("llama.cpp's process ended during a round") from None
    return {"text": tokenizer.decode(answer["ids"], skip_special_tokens=True), "new_tokens": len(answer["ids"]),
            "prompt_tokens": len(prompt_ids),
            "ttft_ms": 1e3 * answer["ttft_s"], "tokens_per_s": len(answer["ids"]) / answer["model_s"],
            "latency_ms": {"model": 1e3 * answer["model_s"]}}


def _llama_cpp_worker(connection, gguf: str, threads: int, lookup_tokens: int = 0) -> None:
    """The llama.cpp process: load once, then greedy-generate each (prompt ids, max new tokens) it
    is sent, timed here (first token, last token) so that the pipe is outside the timing.
    `lookup_tokens`: drafts of that many tokens from the prompt's n-grams (0: plain)."""
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    draft = LlamaPromptLookupDecoding(num_pred_tokens=lookup_tokens) if lookup_tokens else None
    llm = llama_cpp.Llama(model_path=gguf, n_threads=threads, n_threads_batch=threads, n_ctx=1024, n_batch=512,
                          draft_model=draft, verbose=False)
    eos = llm.token_eos()
    probe = llm.tokenize(b"Is llama.cpp ready to compute on this CPU?")  # a batch of prompt tokens, then one decoded
    next(iter(llm.generate(probe, top_k=1, temp=0.0, reset=True)))
    connection.send(("ready", f"llama-cpp-python {llama_cpp.__version__}, {llama_cpp.llama_print_system_info().decode().strip()}"))
    while True:
        try:
            ids, max_new_tokens, ignore_eos = connection.recv()
        except EOFError:  # the bench is done with it
            return
        llm.reset()
        llm._ctx.kv_cache_clear()  # nothing of the previous round is reused
        new_ids, stamps = [], []
        started = time.perf_counter()
        for token in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
            stamps.append(time.perf_counter())
            new_ids.append(token)
            if (token == eos and not ignore_eos) or len(new_ids) >= max_new_tokens:
                break
        connection.send({"ids": new_ids, "ttft_s": stamps[0] - started, "model_s": stamps[-1] - started})


def exact_rung_dir(preset) -> Path | None:
    """The exact rung of a GGUF decoder's ladder (the GGUF's own 4-bit weights, fp32 compute: the
    baseline's greedy text), built once into the artifacts cache and gated on its exact promise, so
    the bench shows what the lossy `optimized` trades for its speed (issue 53). None where the
    preset has no GGUF."""
    from optimize.build import build_onnx
    from optimize.export.gguf_graft import source_gguf
    from optimize.quantize.recipes import named_recipe

    if source_gguf(preset, "optimized") is None:
        return None
    return build_onnx(preset, "optimized", named_recipe("generation", "gguf-q4"),
                      directory=artifacts_root() / "bench" / "generation-exact-rung")


def generation_contenders(baseline_dir: Path) -> dict[str, Callable[[str, int], dict]]:
    """optimum INT8 through optimum's ORTModelForCausalLM.generate, timed by the same streamer as
    the project's variants. (PyTorch fp32 with the KV cache is the project's `baseline` row:
    transformers' generate, nothing added.)"""
    from optimum.onnxruntime import ORTModelForCausalLM
    from transformers import AutoTokenizer

    from models.runners import Runner

    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    int8 = ORTModelForCausalLM.from_pretrained(optimum_int8_dir("generation", baseline_dir),
                                               file_name="model_quantized.onnx", use_cache=True,
                                               session_options=session_options())
    runner = Runner("generation", "optimum-int8", "onnxruntime", baseline_dir, tokenizer, int8)
    return {"optimum-int8": lambda prompt, n, ignore_eos=False: generation.generate(runner, prompt, n, ignore_eos)}


# --- workloads ------------------------------------------------------------------------------------
