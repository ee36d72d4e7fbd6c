"""First start: missing variants are built in the background while the status says so; corrupt
ones are rebuilt; a variant that does not load is unavailable with the reason and the fix."""
import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from models.catalog import REPO_ROOT
from models.errors import VariantUnavailable
from models.showdown import Showdown
from optimize.first_start import build_missing
from tests.tiny import tiny_preset

QUANTIZER_LINES = ("Quantization parameters for tensor", "Ignore MatMul", "pre-processing before quantization")


def test_first_start_builds_missing_variants_quietly_and_reports_progress(tiny_qa_dir, caplog, capsys):
    caplog.set_level(logging.INFO)  # the root logger too: where onnxruntime's quantizer logs its per-tensor lines
    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-first-start")
    showdown = Showdown(presets={"qa": preset})
    assert showdown.variant_status("qa", "optimized")["status"] == "unavailable"
    assert showdown.missing_builds() == [("qa", "optimized")]
    seen = []
    build_missing(showdown, progress=lambda m: seen.append((m, showdown.variant_status("qa", "optimized")["status"])), evaluate=False)
    assert any("exporting" in message and status == "building" for message, status in seen)
    assert showdown.variant_status("qa", "optimized")["status"] == "ready"
    assert showdown.missing_builds() == []
    terminal = capsys.readouterr()
    for line in QUANTIZER_LINES:
        assert line not in caplog.text + terminal.out + terminal.err
    for stage in ("exporting baseline to ONNX", "ORT graph optimization level 2", "dynamic INT8 quantization"):
        assert f"tiny-qa-first-start/optimized: {stage} |████████████|" in terminal.err  # a full bar per stage
    summary = [r.getMessage() for r in caplog.records if r.name == "optimize.first_start"]
    assert any(line.startswith("qa/optimized: ready, ") and " MB, accuracy not measured" in line for line in summary)
    assert any(line.startswith("qa/baseline: ready, ") for line in summary)


def test_a_corrupt_variant_is_rebuilt_by_the_background_builder_and_then_served(tiny_qa_dir):
    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-rebuild")
    showdown = Showdown(presets={"qa": preset})
    build_missing(showdown, progress=lambda m: None, evaluate=False)
    onnx = preset.built_dir("optimized") / "model.onnx"
    onnx.write_bytes(onnx.read_bytes()[:1000])
    status = showdown.variant_status("qa", "optimized")
    assert status["status"] == "unavailable" and "model.onnx has 1,000 bytes" in status["detail"]
    with pytest.raises(VariantUnavailable, match="python -m optimize build"):
        showdown.answer("The second pig worked harder.", "Who worked harder?", "optimized")
    assert showdown.missing_builds() == [("qa", "optimized")]
    build_missing(showdown, progress=lambda m: None, evaluate=False)
    assert showdown.variant_status("qa", "optimized")["status"] == "ready"
    assert showdown.answer("The second pig worked harder.", "Who worked harder?", "optimized")["latency_ms"]["total"] > 0


def test_a_variant_that_fails_to_load_is_unavailable_and_the_others_answer(built_presets, tiny_qa_dir):
    """Files the manifest does not list are not verified: the load itself fails (onnxruntime's
    InvalidProtobuf), and that becomes the variant's reason, not an upstream exception."""
    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-load-fault")
    target = preset.built_dir("optimized")
    shutil.copytree(built_presets["qa"].built_dir("optimized"), target)
    manifest = json.loads((target / "manifest.json").read_text())
    del manifest["files"]["model.onnx"]
    (target / "manifest.json").write_text(json.dumps(manifest))
    (target / "model.onnx").write_bytes(b"not a protobuf")
    showdown = Showdown(presets={"qa": preset})
    reason = "optimized is unavailable: could not load .*InvalidProtobuf.*optimize build"
    with pytest.raises(VariantUnavailable, match=reason):
        showdown.answer("The second pig worked harder.", "Who worked harder?", "optimized")
    status = showdown.variant_status("qa", "optimized")
    assert status["status"] == "unavailable" and "InvalidProtobuf" in status["detail"]
    assert showdown.answer("The second pig worked harder.", "Who worked harder?", "baseline")["latency_ms"]["total"] > 0


def test_status_shows_the_steps_built_and_the_rejected_recipe_in_one_line(tiny_qa_dir, monkeypatch):
    """Every INT8 rung misses its lossy gate (F1 5 points down), the fp32 graph ships on its exact
    gate: the status says so instead of the catalog's planned "… → quantize-dynamic-int8"."""
    from optimize.build import build_onnx

    def measured(*args, promise, **kwargs):
        if promise == "lossy":
            return {"agreement_pct": 50.0, "validation_f1": 40.0, "reference_validation_f1": 45.0}
        return {"agreement_pct": 100.0}

    monkeypatch.setattr("optimize.evaluate.accuracy.measure", measured)
    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-rejected")
    build_onnx(preset, "optimized", progress=lambda m: None)
    showdown = Showdown(presets={"qa": preset})
    detail = showdown.variant_status("qa", "optimized")["detail"]
    assert detail.startswith("onnxruntime; export-onnx (optimum, task question-answering) → graph-optimize (level 2)")
    assert "→ quantize-dynamic-int8" not in detail and "\n" not in detail
    miss = "validation SQuAD 2.0 F1 40.00 is 5.00 below its source (gate ≤ 1.0)"
    assert detail.endswith(f"; rejected dynamic INT8 per channel: {miss}; "
                           f"rejected dynamic INT8 per channel, fp32 ffn_output: {miss}; "
                           f"rejected dynamic INT8 per channel, fp32 ffn_output + ffn_input: {miss}"), detail
    summary = next(line for line in showdown.summary() if line.startswith("qa/optimized"))
    assert summary.startswith("qa/optimized: ready, ") and "agrees with its source 100.0%" in summary and "rejected dynamic INT8" in summary
    assert showdown.variant_status("qa", "optimized")["accuracy"]["summary"] == "exact: same span on 100.0%"


def test_the_runtime_does_not_import_the_offline_build():
    """models/ is the runtime: the manifest and the timing helpers live there, so importing the
    showdown loads nothing from optimize/ (which imports models/)."""
    code = "import sys, models.showdown; print(sorted(m for m in sys.modules if m.split('.')[0] == 'optimize'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_run_order_rotates_so_no_variant_always_goes_first(tiny_qa_dir):
    showdown = Showdown(presets={"qa": tiny_preset("qa", tiny_qa_dir)})
    firsts = [showdown.run_order(["baseline", "optimized", "pruned"])[0] for _ in range(3)]
    assert sorted(firsts) == ["baseline", "optimized", "pruned"]
    # a visitor's preset pick is a copy of the showdown per request (`using`): the rotation carries on there too
    picked = [dataclasses.replace(showdown).run_order(["baseline", "optimized", "pruned"])[0] for _ in range(3)]
    assert sorted(picked) == ["baseline", "optimized", "pruned"]


def test_a_failed_build_is_reported_and_does_not_stop_the_others(tmp_path):
    (tmp_path / "config.json").write_text("{not json")  # weights that look present but cannot load
    preset = tiny_preset("qa", tmp_path, name="tiny-broken")
    showdown = Showdown(presets={"qa": preset})
    build_missing(showdown, progress=lambda m: None, evaluate=False)
    status = showdown.variant_status("qa", "optimized")
    assert status["status"] == "unavailable" and "build failed" in status["detail"]


def test_the_server_threads_yield_to_the_model_thread():
    """After serve_models_first, threads the caller starts (the web server's) run nicer; the model
    thread and the threads it starts (ONNX Runtime's workers) keep the process's priority. In a
    child process: nice values stick to threads, and pytest's own must stay as they are."""
    script = """
import os, threading
from models.showdown import Showdown
nice = lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
showdown = Showdown(presets={})
base = nice()
showdown.serve_models_first(7)
seen = {}
server = threading.Thread(target=lambda: seen.update(server=nice())); server.start(); server.join()
def on_model_thread():
    seen["model"] = nice()
    worker = threading.Thread(target=lambda: seen.update(worker=nice())); worker.start(); worker.join()
showdown._model_thread.submit(on_model_thread).result()
print(seen["server"] - base, seen["model"] - base, seen["worker"] - base)
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["7", "0", "0"]


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_equal_length_timing_writes_exactly_the_tokens_asked(built_presets, variant):
    """Issue 49: speeds compare on equal work, so a timing run ignores end-of-sequence (as
    llama-bench does) in both runtimes; a visitor's call still stops at it."""
    from models import generation

    showdown = Showdown(presets=dict(built_presets))
    runner = showdown.runner("generation", variant)
    prompt_ids = generation.preprocess(runner.tokenizer, "Say hello")
    written = runner.generate(prompt_ids, 9, ignore_eos=True)[0, prompt_ids.shape[1]:].tolist()
    stop_at = next(i for i, token in enumerate(written) if i >= 2 and token not in written[:i])
    if variant == "baseline":  # the model stops at a token it does write (the random model's own never comes)
        runner.model.generation_config.eos_token_id = written[stop_at]
    else:
        runner.model.decoder.eos_token_ids = {written[stop_at]}
    timed = generation.generate(runner, "Say hello", 9, ignore_eos=True)
    assert timed["new_tokens"] == 9 and timed["decode_tokens_per_s"] > 0
    warmed = showdown.generate("Say hello", variant, 9, warm_up=True)
    assert warmed["timing"] == "after one untimed warm-up call" and warmed["new_tokens"] == stop_at + 1


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_a_prompt_longer_than_the_model_reads_is_refused_with_a_message(built_presets, variant):
    """Characters do not bound tokens: past the model's positions GPT-2's table and the model builder's
    rotary cache fail mid-generation, so such a prompt is refused before any token, in both runtimes."""
    from models.errors import InputError

    showdown = Showdown(presets=dict(built_presets))
    with pytest.raises(InputError, match="reads at most 512 positions"):
        showdown.generate("word " * 500, variant, 16)
    with pytest.raises(InputError, match="at most 2,048"):
        showdown.generate("漢" * 3000, variant, 16)  # 3,000 characters, one token each
    assert showdown.generate("word " * 400, variant, 16)["new_tokens"] >= 1  # 400 + template + 16 fit in 512


def test_the_prompt_speed_counts_only_the_prompt_tokens_computed(built_presets):
    """ONNX decoders sharing one KV buffer read the chat template's start from a cache: their prompt speed
    divides the tokens they computed, not the whole prompt, so it compares with PyTorch's."""
    from models import generation

    showdown = Showdown(presets=dict(built_presets))
    for variant in ("baseline", "optimized"):
        runner = showdown.runner("generation", variant)
        result = generation.generate(runner, "Say hello to the reader", 4)
        decoder = getattr(runner.model, "decoder", None)
        caches = decoder is not None and decoder.shares_kv_buffer
        prefix = len(generation.template_prefix(runner.tokenizer))
        assert result["cached_prompt_tokens"] == (prefix if caches else 0), variant
        computed = result["prompt_tokens"] - result["cached_prompt_tokens"]
        assert result["prefill_tokens_per_s"] == pytest.approx(computed / (result["ttft_ms"] / 1e3), rel=1e-6)


def test_a_load_and_its_warm_ups_wait_for_the_turn_of_the_visitor_being_timed(built_presets, monkeypatch):
    """A variant loading while another visitor's call is timed would put its load and warm-ups on the model
    thread inside that call's time, and its memory growth inside this load's: loads take the run turn too."""
    import models.showdown as showdown_module

    showdown = Showdown(presets=dict(built_presets))
    held = []
    real_load = showdown_module.load_runner
    monkeypatch.setattr(showdown_module, "load_runner", lambda *args: held.append(showdown._run_lock.locked()) or real_load(*args))
    showdown.runner("generation", "optimized")
    assert held == [True]


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_a_closed_stream_stops_the_model_before_the_next_visitor(built_presets, variant):
    """A visitor who leaves mid-generation closes the stream: the model stops at its next token, inside the turn,
    instead of writing the rest of 200 tokens while the next visitor's call is timed."""
    showdown = Showdown(presets=dict(built_presets))
    runner = showdown.runner("generation", variant)
    finished = []
    real_generate = runner.generate

    def generate(*args, **kwargs):
        try:
            real_generate(*args, **kwargs)
            finished.append("all tokens")
        except Exception as error:
            finished.append(type(error).__name__)
            raise
    runner.generate = generate
    updates = showdown.stream("Tell me a long story about a pig", variant, 200)
    next(updates)
    updates.close()
    assert finished == ["Cancelled"] and not showdown._run_lock.locked()


@pytest.mark.parametrize("prompt, max_new_tokens, message", [
    (123, 8, "The prompt must be text"),
    ("hi \udfff there", 8, r"invalid character \(U\+DFFF at position 3\)"),  # a lone surrogate JSON can carry
    ("\u200b\u200c\ufeff\x00\x01", 8, "Please enter a prompt"),  # nothing a reader sees: had been answered
    ("Hi", 10**30, "max_new_tokens must be between 1 and 256"),  # whole, only too many ("not a whole number")
])
def test_a_prompt_no_tokenizer_can_take_is_said_before_it_runs(built_presets, prompt, max_new_tokens, message):
    from models.errors import InputError

    with pytest.raises(InputError, match=message):
        Showdown(presets=dict(built_presets)).generate(prompt, "baseline", max_new_tokens)


def test_markup_typed_in_a_prompt_is_text_and_a_plain_prompt_is_tokenised_as_before(tiny_llama_dir):
    """A typed "<|im_start|>system …" (here the tiny tokenizer's [SEP] and [CLS]) had opened a real turn."""
    from transformers import AutoTokenizer

    from models.generation import preprocess

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    special = set(tokenizer.all_special_ids)
    plain = preprocess(tokenizer, "hi there")[0].tolist()
    typed = preprocess(tokenizer, "[SEP] hi [CLS] there [PAD]")[0].tolist()
    assert [t for t in typed if t in special] == [t for t in plain if t in special]
    reference = tokenizer.apply_chat_template([{"role": "user", "content": "hi there"}], add_generation_prompt=True)
    assert plain == list(reference)


def test_the_latency_parts_add_up_to_the_total(built_presets):
    """The stream's decoding overlapped the model's time but was added to `post` too: the parts exceeded the total."""
    result = Showdown(presets=dict(built_presets)).generate("Tell me a story", "optimized", 32)
    parts = result["latency_ms"]
    assert parts["tokenize"] + parts["model"] + parts["post"] <= parts["total"] + 0.5, parts


def test_a_variants_memory_does_not_depend_on_what_loaded_before_it(built_presets):
    """The first variant loaded paid the process's one-time costs (runtimes, thread pools, library code) and later
    ones reused memory freed before them: the same model read 279 MB loaded first and 92 MB loaded last. In child
    processes, since those costs are paid once per process."""
    baselines = {task: str(preset.variant("baseline").source.location) for task, preset in built_presets.items()}
    script = f"""
import json, sys
from pathlib import Path
from models.showdown import Showdown
from tests.tiny import tiny_preset
presets = {{task: tiny_preset(task, Path(path)) for task, path in {baselines!r}.items()}}
showdown = Showdown(presets=presets)
order = sys.argv[1].split(",")
for variant in order:
    showdown.runner("generation", variant)
print(json.dumps({{v: showdown.variant_status("generation", v)["memory_bytes"] / 1e6 for v in order}}))
"""
    figures = []
    for order in ("baseline,optimized", "optimized,baseline"):
        done = subprocess.run([sys.executable, "-c", script, order], cwd=REPO_ROOT, capture_output=True, text=True,
                              env={**os.environ})
        assert done.returncode == 0, done.stderr[-2000:]
        figures.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for variant in ("baseline", "optimized"):
        assert abs(figures[0][variant] - figures[1][variant]) < 20, figures  # MB; the first load had paid ~150 more


def test_a_variant_rebuilt_by_another_process_is_served_from_its_new_files(tiny_qa_dir):
    """`python -m optimize build --force` in another terminal rewrote the variant while the app kept answering with
    the model it had loaded, under the new build's size and accuracy."""
    from optimize.build import build_onnx

    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-rebuilt-elsewhere")
    build_onnx(preset, "optimized", evaluate=False, progress=lambda _message: None)
    showdown = Showdown(presets={"qa": preset})
    first = showdown.runner("qa", "optimized")
    assert showdown.runner("qa", "optimized") is first  # loaded once while its files stay as they are
    build_onnx(preset, "optimized", evaluate=False, force=True, progress=lambda _message: None)  # no mark_built: elsewhere
    assert showdown.runner("qa", "optimized") is not first
    assert showdown.compare("Pigs built houses.", "Who built houses?", ["optimized"], False)["optimized"]["answer"]


def test_a_variant_built_from_a_baseline_since_retrained_is_built_again_at_start(tiny_qa_dir, tmp_path):
    """A retrained baseline (a pulled commit) left the old `optimized` "ready": the app served it, answering as the
    old baseline's variant under numbers measured against it. The first start's builder now rebuilds it."""
    from optimize.build import build_onnx
    from tests.tiny import tiny_qa

    baseline = tmp_path / "baseline"
    shutil.copytree(tiny_qa_dir, baseline)
    preset = tiny_preset("qa", baseline, name="tiny-qa-retrained")
    build_onnx(preset, "optimized", evaluate=False, progress=lambda _message: None)
    showdown = Showdown(presets={"qa": preset})
    assert ("qa", "optimized") not in showdown.missing_builds()
    retrained = tiny_qa(tmp_path / "retrained", seed=1)
    shutil.copy(retrained / "model.safetensors", baseline / "model.safetensors")
    assert ("qa", "optimized") in showdown.missing_builds()
    build_missing(showdown, progress=lambda _message: None, evaluate=False)
    assert ("qa", "optimized") not in showdown.missing_builds()


def fails_once_loaded(monkeypatch, module, name: str, variant: str, asked: str) -> None:
    """`module.name` raises for `variant` when asked `asked` (a fault of ours): its load's warm-up asks something
    else, so the variant loads and is served."""
    real = getattr(module, name)

    def call(runner, text, *args, **kwargs):
        if runner.variant == variant and text == asked:
            raise RuntimeError("kernel")
        return real(runner, text, *args, **kwargs)
    monkeypatch.setattr(module, name, call)


def test_a_fault_in_one_variant_leaves_the_others_answers_in_a_qa_click(built_presets, monkeypatch, caplog):
    """One variant raising (a fault of ours, not the visitor's) had aborted the whole comparison: every column read
    "this variant failed" and the log held a trace per variant."""
    from models import qa

    fails_once_loaded(monkeypatch, qa, "answer", "optimized", "Who built houses?")
    showdown = Showdown(presets=dict(built_presets))
    with caplog.at_level(logging.ERROR):
        compared = showdown.compare("Pigs built houses.", "Who built houses?", ["baseline", "optimized"], False)
    assert compared["optimized"] == {"error": "this variant failed (RuntimeError; the server's log has the details)"}
    assert compared["baseline"]["answer"] and "error" not in compared["baseline"]
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == ["qa/optimized failed"]


def test_a_generation_click_streams_every_variant_and_a_faulty_ones_error_in_its_place(built_presets, monkeypatch, caplog):
    """`stream_each`, one click as one call (one replica on a cluster): a fault of ours in one variant is logged once
    and yielded in its place; the next variant still streams."""
    from models import generation

    fails_once_loaded(monkeypatch, generation, "stream", "optimized", "Say hello")
    showdown = Showdown(presets=dict(built_presets))
    with caplog.at_level(logging.ERROR):
        seen = list(showdown.stream_each("Say hello", ["optimized", "baseline"], 3))
    assert [type(update).__name__ for variant, update in seen if variant == "optimized"] == ["RuntimeError"]
    assert [update.done for variant, update in seen if variant == "baseline"][-1] is True
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == ["generation/optimized failed"]


def test_a_cut_short_manifest_makes_its_variant_unavailable_not_the_app(built_presets, tmp_path, monkeypatch):
    """verify() said "manifest.json cannot be read", but the status read the same file for its accuracy and raised:
    /variants, the status line and the app's start failed with a JSONDecodeError."""
    artifacts = tmp_path / "artifacts"
    shutil.copytree(os.environ["SHOWDOWN_ARTIFACTS"], artifacts)
    monkeypatch.setenv("SHOWDOWN_ARTIFACTS", str(artifacts))
    manifest = artifacts / built_presets["generation"].name / "optimized" / "manifest.json"
    manifest.write_text(manifest.read_text()[: len(manifest.read_text()) // 2])
    showdown = Showdown(presets=dict(built_presets))
    status = showdown.variant_status("generation", "optimized")
    assert status["status"] == "unavailable" and "manifest.json cannot be read" in status["detail"], status
    assert {v["status"] for v in showdown.variants() if v["variant"] == "baseline"} == {"ready"}


def test_a_failed_rebuild_of_a_built_variant_is_said_beside_its_earlier_build(tiny_qa_dir, tmp_path, monkeypatch):
    """A stale variant whose rebuild failed kept its earlier files and read plain "ready": the failure was hidden."""
    import optimize.first_start as first_start
    from app import _status_markdown
    from optimize.build import build_onnx
    from tests.tiny import tiny_qa

    baseline = tmp_path / "baseline"
    shutil.copytree(tiny_qa_dir, baseline)
    preset = tiny_preset("qa", baseline, name="tiny-qa-rebuild-fails")
    build_onnx(preset, "optimized", evaluate=False, progress=lambda _message: None)
    shutil.copy(tiny_qa(tmp_path / "retrained", seed=1) / "model.safetensors", baseline / "model.safetensors")
    monkeypatch.setattr(first_start, "build_onnx", lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError("export")))
    showdown = Showdown(presets={"qa": preset})
    build_missing(showdown, progress=lambda _message: None, evaluate=False)
    status = showdown.variant_status("qa", "optimized")
    assert status["status"] == "ready" and "served from an earlier build: build failed: RuntimeError: export" in status["detail"]
    assert "🟠 ready, an earlier build" in _status_markdown([status])
