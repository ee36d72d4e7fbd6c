import numpy as np
import pytest

from optimize.evaluate.gates import AgreementBelowGate, AgreementGuard, GateFailed, check, failures, promise_line
from optimize.evaluate.intervals import delta_text, paired_delta, paired_ratio
from tests.conftest import requires_squad


def test_an_exact_export_is_gated_on_agreeing_with_its_source():
    """The fp32 graph promises its source's model: 99.5 % of forced spans on the validation articles, whatever F1
    says; its agreement on the test articles is shown and decides nothing."""
    exact = {"promise": "exact", "overall_f1": 61.0, "reference_overall_f1": 61.5}
    assert failures("qa", "onnxruntime", {**exact, "validation_agreement_pct": 99.7, "agreement_pct": 90.0}) == []
    missed = failures("qa", "onnxruntime", {**exact, "validation_agreement_pct": 99.0, "agreement_pct": 100.0})
    assert len(missed) == 1 and ("99.00% of answerable validation questions' forced spans (gate ≥ 99.5%, an exact export"
                                 in missed[0])


def test_a_lossy_export_is_gated_on_task_quality_within_a_point_and_never_on_agreement():
    """Issue 26: INT8 changes the arithmetic by design; 88 % same spans is shown, not gated, and
    SQuAD 2.0 F1 and forced-span F1 on validation must each stay within 1.0 point of the source."""
    lossy = {"promise": "lossy", "agreement_pct": 88.0, "validation_f1": 55.0, "reference_validation_f1": 55.4,
             "validation_forced_f1": 64.8, "reference_validation_forced_f1": 65.5}
    assert failures("qa", "onnxruntime", lossy) == []
    missed = failures("qa", "onnxruntime", {**lossy, "validation_forced_f1": 64.0})
    assert len(missed) == 1 and "validation forced-span F1 64.00 is 1.50 below its source (gate ≤ 1.0)" in missed[0]


def test_qa_gates_read_validation_and_the_test_articles_decide_nothing():
    """Issue 48: a test article never decides whether a variant ships. Test F1s far below the
    source's change nothing; a measurement with test scores but none on validation is a miss that
    says how to measure again, never a silent pass."""
    passing = {"promise": "lossy", "validation_f1": 70.0, "reference_validation_f1": 70.2,
               "validation_forced_f1": 84.0, "reference_validation_forced_f1": 84.5}
    assert failures("qa", "onnxruntime", {**passing, "overall_f1": 40.0, "reference_overall_f1": 62.0,
                                          "forced_f1": 50.0, "reference_forced_f1": 81.0}) == []
    old = {"promise": "lossy", "overall_f1": 62.0, "reference_overall_f1": 62.0, "forced_f1": 81.0, "reference_forced_f1": 81.0}
    missed = failures("qa", "onnxruntime", old)
    assert len(missed) == 2 and all("not measured" in m and "optimize verify" in m for m in missed), missed


def test_a_decoder_that_ships_exact_lookup_is_gated_on_the_same_text_with_and_without_drafts():
    """Exact prompt lookup promises the text of the same decoding without drafts, on top of the variant's own
    promise: one changed held-out text is a miss, however small the lossy measures' drops."""
    lossy = {"promise": "lossy", "perplexity_ratio": 1.004, "reading_f1": 12.9, "reference_reading_f1": 12.9}
    assert failures("generation", "onnxruntime", {**lossy, "lookup_prompts": 16, "lookup_identical": 16}) == []
    missed = failures("generation", "onnxruntime", {**lossy, "lookup_prompts": 16, "lookup_identical": 15})
    assert missed == ["prompt lookup changed 1 of 16 held-out texts (exact lookup promises the same text with and "
                      "without drafts)"], missed
    assert "the same text with and without lookup on 16/16 prompts" in promise_line(
        "generation", "onnxruntime", {**lossy, "lookup_prompts": 16, "lookup_identical": 16})
    assert failures("generation", "onnxruntime", lossy) == []  # a variant without lookup is not asked


def test_an_export_with_its_sources_exact_weights_promises_the_same_text():
    """The gguf-q4 recipe carries the baseline's weights bit for bit: 99.5 % of greedy tokens and
    90 % identical 64-token continuations."""
    exact = {"promise": "exact", "weights_exact": True, "agreement_pct": 99.6, "identical_continuations_pct": 92.0}
    assert failures("generation", "onnxruntime", exact) == []
    missed = failures("generation", "onnxruntime", {**exact, "agreement_pct": 99.46, "identical_continuations_pct": 80.0})
    assert len(missed) == 2 and "99.46% of greedy tokens (gate ≥ 99.5%" in missed[0] and "80.0% of prompts (gate ≥ 90.0%" in missed[1]


def test_a_lossy_decoder_is_gated_on_perplexity_and_reading_comprehension():
    lossy = {"promise": "lossy", "agreement_pct": 95.0, "perplexity_ratio": 1.02, "reading_f1": 40.5,
             "reference_reading_f1": 41.0}
    assert failures("generation", "onnxruntime", lossy) == []
    missed = failures("generation", "onnxruntime", {**lossy, "perplexity_ratio": 1.05, "reading_f1": 39.5})
    assert len(missed) == 2 and "perplexity 1.050x its source (gate ≤ 1.03x)" in missed[0]
    assert "reading-comprehension F1 39.50 is 1.50 below its source" in missed[1]
    # until reading comprehension is measured, agreement stays the fallback gate
    assert failures("generation", "onnxruntime", {"promise": "lossy", "agreement_pct": 97.0, "perplexity_ratio": 1.0})
    # a rung whose perplexity is already over budget is not read (minutes saved): its miss is perplexity alone
    assert failures("generation", "onnxruntime", {"promise": "lossy", "agreement_pct": 94.9, "perplexity_ratio": 1.035,
                                                  "reading_skipped": "perplexity over its budget"}) == [
        "perplexity 1.035x its source (gate ≤ 1.03x)"]


def test_pruned_generation_gates_on_quality_not_on_copying():
    """Issue 13: a pruned decoder is a different, smaller model by design. Low greedy agreement
    alone does not fail it; perplexity over 1.5x or a quality score under 90 % of the baseline's does."""
    assert failures("generation", "torch", {"agreement_pct": 60, "perplexity_ratio": 1.45,
                                            "instruction_of_baseline_pct": 92.3}) == []
    with pytest.raises(GateFailed, match=r"perplexity 1.600x baseline.*instruction-set score 87.2% of baseline's"):
        check("gen/pruned", "generation", "torch", {"agreement_pct": 99, "perplexity_ratio": 1.6,
                                                    "instruction_of_baseline_pct": 87.2})
    reading = {"promise": "pruned", "perplexity_ratio": 1.2, "reading_of_baseline_pct": 91.0, "instruction_of_baseline_pct": 80}
    assert failures("generation", "torch", reading) == []  # reading comprehension gates; the instruction set is shown
    assert "reading-comprehension F1 85.0% of baseline's" in failures("generation", "torch", {**reading, "reading_of_baseline_pct": 85.0})[0]
    # issue 49: a pass inside the noise is no pass: the interval's lower end must clear 85 % too
    assert failures("generation", "torch", {**reading, "reading_of_baseline_ci95": [86.0, 96.0]}) == []
    uncertain = failures("generation", "torch", {**reading, "reading_of_baseline_ci95": [82.0, 101.0]})
    assert len(uncertain) == 1 and "91.0% (95% CI 82.0-101.0%)" in uncertain[0] and "too uncertain" in uncertain[0]


def test_paragraph_resampling_widens_the_interval_where_a_paragraph_s_questions_fail_together():
    """Questions about one paragraph succeed or fail together; resampling them one by one would
    claim more certainty than the set holds."""
    from optimize.evaluate.intervals import grouped_mean_interval, grouped_ratio

    rng = np.random.default_rng(1)
    groups, reference, candidate = {}, {}, {}
    for paragraph in range(60):
        hard = rng.random() < 0.5  # the candidate loses whole paragraphs
        for question in range(6):
            item = f"{paragraph}-{question}"
            groups[item], reference[item] = f"p{paragraph}", 0.8
            candidate[item] = 0.5 if hard else 0.8
    by_paragraph = grouped_ratio(reference, candidate, groups, samples=4000)
    by_question = grouped_ratio(reference, candidate, {item: item for item in groups}, samples=4000)
    assert by_paragraph["groups"] == 60 and by_question["groups"] == 360
    assert by_paragraph["ratio"] == by_question["ratio"]
    width = lambda r: r["ratio_ci95"][1] - r["ratio_ci95"][0]  # noqa: E731
    assert width(by_paragraph) > 2 * width(by_question)
    assert by_paragraph["ratio_ci95"][0] < by_paragraph["ratio"] < by_paragraph["ratio_ci95"][1]
    # a variant's own score beside it (the app's "reading F1 12.9 (low-high)") resamples paragraphs too
    own = grouped_mean_interval(candidate, groups, samples=4000)
    one_by_one = grouped_mean_interval(candidate, {item: item for item in groups}, samples=4000)
    assert own[1] - own[0] > 2 * (one_by_one[1] - one_by_one[0])
    assert own[0] < 100 * np.mean(list(candidate.values())) < own[1]


def test_qa_pruned_cannot_pass_by_abstaining():
    """Abstaining keeps SQuAD 2.0 F1 (no answer scores on unanswerable questions) but loses the
    forced-span F1: the gate reads both."""
    abstainer = {"validation_f1": 56.0, "reference_validation_f1": 55.0, "validation_forced_f1": 52.0,
                 "reference_validation_forced_f1": 66.0}
    missed = failures("qa", "torch", abstainer)
    assert len(missed) == 1 and "validation forced-span F1 52.00 is 14.00 below baseline" in missed[0]
    assert failures("qa", "torch", {**abstainer, "validation_forced_f1": 63.5}) == []


def test_a_hopeless_exact_export_is_stopped_as_soon_as_its_gate_is_out_of_reach():
    """A strict build measures an exact rung only until its agreement gate is out of reach; the
    bound it reports is the agreement it would have had if everything left had agreed."""
    guard = AgreementGuard(total=200, floor_pct=98.0, unit="answerable questions")
    for _ in range(4):
        guard.count(0)  # 4 of 200 wrong: 98.0 % is still reachable
    guard.count(50, 50)
    with pytest.raises(AgreementBelowGate) as stopped:
        guard.count(0)
    assert stopped.value.upper_bound_pct == 97.5
    assert "stopped after 55 of 200 answerable questions, 90.9% agreeing so far: 5 disagreements" in stopped.value.stopped
    missed = failures("qa", "onnxruntime", {"validation_agreement_pct": 97.5, "agreement_stopped": stopped.value.stopped})
    assert len(missed) == 1 and "on at most 97.50% of answerable validation questions' forced spans" in missed[0]
    assert "stopped after 55 of 200" in missed[0]


def test_a_paired_bootstrap_interval_covers_the_delta_and_narrows_with_more_items():
    reference = {f"q{i}": float(i % 2) for i in range(200)}
    candidate = {**reference, "q0": 1.0, "q2": 1.0}  # two more right answers of 200: +1.0 point
    delta = paired_delta(reference, candidate)
    assert delta["delta"] == 1.0 and delta["items"] == 200
    assert 0.0 <= delta["ci95"][0] <= 1.0 <= delta["ci95"][1]
    wide = paired_delta({k: v for k, v in list(reference.items())[:50]}, {k: v for k, v in list(candidate.items())[:50]})
    assert wide["ci95"][1] - wide["ci95"][0] > delta["ci95"][1] - delta["ci95"][0]
    assert delta_text(delta).startswith("+1.0 (95% CI ")


def test_the_promise_line_names_the_promise_and_each_gated_delta_with_its_interval():
    metrics = {"promise": "lossy", "agreement_pct": 88.04, "forced_f1": 64.0,
               "validation_f1_delta": {"delta": -0.4, "ci95": [-0.9, 0.1], "items": 1543},
               "validation_forced_f1_delta": {"delta": -0.2, "ci95": [-0.8, 0.3], "items": 780},
               "overall_f1_delta": {"delta": -0.3, "ci95": [-0.9, 0.3], "items": 1265},
               "forced_f1_delta": {"delta": 0.1, "ci95": [-0.5, 0.6], "items": 616}}
    assert promise_line("qa", "onnxruntime", metrics) == (
        "lossy: validation F1 −0.4 (95% CI −0.9 to +0.1), validation forced F1 −0.2 (95% CI −0.8 to +0.3), "
        "test F1 −0.3, forced F1 +0.1, same span on 88.0%")


def test_a_perplexity_ratio_gets_an_interval_from_resampling_paragraphs():
    reference = [(100.0 + i, 50) for i in range(24)]  # (summed NLL, tokens) per paragraph
    same = paired_ratio(reference, reference)
    assert same == {"ratio": 1.0, "ci95": [1.0, 1.0], "items": 24}
    worse = [(nll + 5.0 + (i % 3), tokens) for i, (nll, tokens) in enumerate(reference)]  # ~0.12 nats per token more
    ratio = paired_ratio(reference, worse)
    assert 1.1 < ratio["ratio"] < 1.15 and ratio["ci95"][0] < ratio["ratio"] < ratio["ci95"][1]
    with pytest.raises(ValueError):
        paired_ratio(reference, worse[:-1])


def test_a_pruned_decoders_line_shows_its_perplexity_and_instruction_intervals():
    metrics = {"promise": "pruned", "perplexity_ratio": 1.165, "perplexity_ratio_ci95": [1.121, 1.207],
               "instruction_delta": {"delta": -6.7, "ci95": [-15.0, 1.7], "items": 60}, "agreement_pct": 71.23}
    assert promise_line("generation", "torch", metrics) == (
        "pruned: perplexity 1.165x (95% CI 1.121x to 1.207x), instruction set −6.7 (95% CI −15.0 to +1.7) points, "
        "same greedy token on 71.2%")


def test_the_about_tab_states_the_gates_the_build_checks():
    """Issue 51: the About tab's gate paragraph is generated from the gates, so it cannot drift from them."""
    from app import about_text
    from optimize.evaluate.gates import Gates, gate_descriptions

    about = about_text()
    for text in gate_descriptions().values():
        assert text in about
    gates = Gates()
    assert f"≥ {gates.exact_agreement_pct:g} %" in about and f"≤ {gates.pruned_perplexity_ratio:g}x" in about
    assert f"≥ {gates.pruned_reading_pct:g} % of the baseline's" in about
    # the instruction set gates `pruned` only where reading comprehension was not measured (the old text said always),
    # and agreement gates a lossy decoder only there (the text said never)
    assert about.count("instruction-set score") == 1 and "not measured: an instruction-set score ≥ 90 %" in about
    assert f"not measured: ≥ {gates.lossy_agreement_pct:g} % of greedy tokens" in about


@requires_squad()
def test_a_build_without_its_gated_data_says_so_and_is_gated_again_when_the_data_is_there(monkeypatch, tmp_path):
    """A machine without ../shared builds what it can measure; its manifest must not claim the validation gates, or the
    variant would be taken as gated once the data appears."""
    from optimize.evaluate import squad
    from optimize.evaluate.gates import gate_inputs

    present = {task: gate_inputs(task)["gated_on"] for task in ("qa", "generation")}
    monkeypatch.setattr(squad, "DEFAULT_SQUAD_PATH", tmp_path / "absent.json")
    monkeypatch.setattr(squad, "MORE_DEV_PATH", tmp_path / "absent-more.json")
    absent = {task: gate_inputs(task)["gated_on"] for task in ("qa", "generation")}
    assert absent == {"qa": "nothing (SQuAD 2.0 dev data absent)",
                      "generation": "held-out prompts and the instruction set only (squad-v2-dev-more absent)"}
    assert all(absent[task] != present[task] for task in absent)  # a different gate input: built and gated again


@requires_squad()
def test_a_build_that_measured_less_is_built_and_gated_again_by_one_that_measures_all():
    """`--no-eval` publishes the first rung unmeasured, and a preset reading fewer questions gates on those: either
    records it, so a later build that measures all does not take the variant as gated already."""
    from optimize.evaluate.gates import gate_inputs

    full = {task: gate_inputs(task) for task in ("qa", "generation")}
    assert all(gate_inputs(task, evaluate=False) != full[task] for task in full)
    assert gate_inputs("generation", reading_questions=50) != full["generation"]
    assert "the first 50 reading questions" in gate_inputs("generation", reading_questions=50)["gated_on"]
