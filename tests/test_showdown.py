"""First start: missing variants are built in the background while the status says so."""
from models.showdown import Showdown
from tests.tiny import tiny_preset


def test_first_start_builds_missing_variants_and_reports_progress(tiny_qa_dir):
    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-first-start")
    showdown = Showdown(presets={"qa": preset}, measure_builds=False)
    assert showdown.variant_status("qa", "optimized")["status"] == "unavailable"
    assert showdown.missing_builds() == [("qa", "optimized")]
    seen = []
    showdown.build_missing(progress=lambda m: seen.append((m, showdown.variant_status("qa", "optimized")["status"])))
    assert any("exporting" in message and status == "building" for message, status in seen)
    assert showdown.variant_status("qa", "optimized")["status"] == "ready"
    assert showdown.missing_builds() == []


def test_run_order_rotates_so_no_variant_always_goes_first(tiny_qa_dir):
    showdown = Showdown(presets={"qa": tiny_preset("qa", tiny_qa_dir)})
    firsts = [showdown.run_order(["baseline", "optimized", "pruned"])[0] for _ in range(3)]
    assert sorted(firsts) == ["baseline", "optimized", "pruned"]


def test_a_failed_build_is_reported_and_does_not_stop_the_others(tmp_path):
    (tmp_path / "config.json").write_text("{not json")  # weights that look present but cannot load
    preset = tiny_preset("qa", tmp_path, name="tiny-broken")
    showdown = Showdown(presets={"qa": preset}, measure_builds=False)
    showdown.build_missing(progress=lambda m: None)
    status = showdown.variant_status("qa", "optimized")
    assert status["status"] == "unavailable" and "build failed" in status["detail"]
