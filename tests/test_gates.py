import pytest

from optimize.gates import AgreementBelowGate, AgreementGuard, GateFailed, check, failures


def test_onnx_variant_must_agree_with_its_source_and_keep_f1():
    assert failures("qa", "onnxruntime", {"agreement_pct": 99.0, "overall_f1": 61.0, "reference_overall_f1": 61.5}) == []
    missed = failures("qa", "onnxruntime", {"agreement_pct": 97.0, "overall_f1": 59.0, "reference_overall_f1": 61.0})
    assert len(missed) == 2 and "97.0%" in missed[0] and "2.00 below" in missed[1]


def test_an_export_with_its_sources_exact_weights_promises_the_same_text():
    """The gguf-q4 recipe carries the baseline's weights bit for bit: 98% agreement is not enough, and
    the 64-token continuations must match too; an ordinary export keeps the 98% gate."""
    exact = {"weights_exact": True, "agreement_pct": 99.6, "identical_continuations_pct": 92.0}
    assert failures("generation", "onnxruntime", exact) == []
    missed = failures("generation", "onnxruntime", {**exact, "agreement_pct": 99.46, "identical_continuations_pct": 80.0})
    assert len(missed) == 2 and "99.46% of greedy tokens (gate ≥ 99.5%" in missed[0] and "80.0% of prompts (gate ≥ 90.0%" in missed[1]
    assert failures("generation", "onnxruntime", {"agreement_pct": 98.2, "identical_continuations_pct": 40.0}) == []


def test_pruned_generation_gates_on_quality_not_on_copying():
    """Issue 13: a pruned decoder is a different, smaller model by design. Low greedy agreement
    alone no longer fails it; perplexity over 1.5x or an instruction score under 90 % of the
    baseline's does."""
    assert failures("generation", "torch", {"agreement_pct": 60, "perplexity_ratio": 1.45,
                                            "instruction_of_baseline_pct": 92.3}) == []
    with pytest.raises(GateFailed, match=r"instruction-set score 87.2% of baseline's.*perplexity 1.600x"):
        check("gen/pruned", "generation", "torch", {"agreement_pct": 99, "perplexity_ratio": 1.6,
                                                    "instruction_of_baseline_pct": 87.2})
    # exports still promise their source's model: agreement stays their gate
    assert failures("generation", "onnxruntime", {"agreement_pct": 97.0, "instruction_of_baseline_pct": 100})


def test_qa_pruned_cannot_pass_by_abstaining():
    """Abstaining keeps SQuAD 2.0 F1 (no answer scores on unanswerable questions) but loses the
    forced-span F1: the gate reads both."""
    abstainer = {"overall_f1": 56.0, "reference_overall_f1": 55.0, "forced_f1": 52.0, "reference_forced_f1": 66.0}
    missed = failures("qa", "torch", abstainer)
    assert len(missed) == 1 and "forced-span F1 52.00 is 14.00 below baseline" in missed[0]
    assert failures("qa", "torch", {**abstainer, "forced_f1": 63.5}) == []


def test_qa_onnx_variant_is_gated_on_both_measures_within_one_point():
    metrics = {"agreement_pct": 98.5, "overall_f1": 55.0, "reference_overall_f1": 55.4,
               "forced_f1": 64.0, "reference_forced_f1": 65.5}
    missed = failures("qa", "onnxruntime", metrics)
    assert len(missed) == 1 and "forced-span F1" in missed[0] and "its source" in missed[0]


def test_a_hopeless_export_is_stopped_as_soon_as_its_gate_is_out_of_reach():
    """A strict build measures a rejected ladder rung only until its agreement gate is out of reach;
    the bound it reports is the agreement it would have had if everything left had agreed."""
    guard = AgreementGuard(total=200, floor_pct=98.0, unit="answerable questions")
    for _ in range(4):
        guard.count(0)  # 4 of 200 wrong: 98.0 % is still reachable
    guard.count(50, 50)
    with pytest.raises(AgreementBelowGate) as stopped:
        guard.count(0)
    assert stopped.value.upper_bound_pct == 97.5
    assert "stopped after 55 of 200 answerable questions, 90.9% agreeing so far: 5 disagreements" in stopped.value.stopped
    missed = failures("qa", "onnxruntime", {"agreement_pct": 97.5, "agreement_stopped": stopped.value.stopped})
    assert len(missed) == 1 and "on at most 97.5% of answerable questions' forced spans" in missed[0]
    assert "stopped after 55 of 200" in missed[0]
