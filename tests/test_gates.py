import pytest

from optimize.gates import GateFailed, check, failures


def test_onnx_variant_must_agree_with_its_source_and_keep_f1():
    assert failures("qa", "onnxruntime", {"agreement_pct": 99.0, "overall_f1": 61.0, "reference_overall_f1": 61.5}) == []
    missed = failures("qa", "onnxruntime", {"agreement_pct": 97.0, "overall_f1": 59.0, "reference_overall_f1": 61.0})
    assert len(missed) == 2 and "97.0%" in missed[0] and "2.00 below" in missed[1]


def test_pruned_generation_gates_on_agreement_and_perplexity():
    assert failures("generation", "torch", {"agreement_pct": 90, "perplexity_ratio": 1.2}) == []
    with pytest.raises(GateFailed, match=r"agreement 80.0%.*perplexity 1.400x"):
        check("gen/pruned", "generation", "torch", {"agreement_pct": 80, "perplexity_ratio": 1.4})
