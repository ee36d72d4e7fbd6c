"""`python -m optimize verify` (issue 49): measured here with no record read, compared with the records."""
import json

from optimize.evaluate import records
from optimize.verify import compare, no_records


def test_a_measure_outside_its_recorded_interval_or_tolerance_disagrees():
    recorded = {"reading_f1": 16.6, "reading_f1_ci95": [14.9, 18.4], "overall_f1": 59.7, "perplexity": 25.68}
    here = {"reading_f1": 18.0, "overall_f1": 61.2, "perplexity": 25.70}
    verdicts = {f.measure: f.verdict for f in compare("pruned", recorded, here)}
    assert verdicts == {"reading_f1": "agrees", "overall_f1": "disagrees", "perplexity": "agrees"}
    assert {f.measure: f.verdict for f in compare("pruned", recorded, {"reading_f1": 14.0})} == {"reading_f1": "disagrees"}
    gated = {"validation_f1": 70.2, "validation_forced_f1": 84.9}  # what QA's gates read is compared too
    verdicts = {f.measure: f.verdict for f in compare("optimized", gated, {"validation_f1": 70.4, "validation_forced_f1": 83.1})}
    assert verdicts == {"validation_f1": "agrees", "validation_forced_f1": "disagrees"}


def test_no_record_is_read_while_verifying(tmp_path, monkeypatch):
    """A committed reference record would answer for the source; under verify it is measured again."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "config.json").write_text("{}")
    name = "probe"
    from models.manifest import source_fingerprint

    record = tmp_path / "record"
    record.mkdir()
    (record / f"{name}-{source_fingerprint(source)[:16]}.json").write_text(json.dumps({"from": "record"}))
    monkeypatch.setattr(records, "REFERENCE_RECORD", record)
    assert records.reference_cache(source, name, lambda: {"from": "measured"}) == {"from": "record"}
    with no_records():
        assert records.records_off()
        assert records.reference_cache(source, name, lambda: {"from": "measured"}) == {"from": "measured"}
    assert not records.records_off()


def test_verify_measures_only_the_variants_named_and_says_when_one_cannot_be(monkeypatch, tmp_path, capsys):
    """`verify --variant V` re-measures V alone (a rebuilt variant, without the hour the others take); a variant
    named but not built with its gates is an error that leaves its earlier report alone (a stub had replaced the
    committed one), and an unknown name is an error, never a pass."""
    from optimize import verify
    from optimize.evaluate import accuracy

    class Spec:
        def __init__(self, name, built):
            self.name, self.built_from, self.runtime = name, "baseline" if name != "baseline" else None, "onnxruntime"
            self.source = type("Source", (), {"kind": "built" if built else "local"})()

    class Preset:
        name, task, default = "probe", "generation", True
        variants = (Spec("baseline", False), Spec("optimized", True), Spec("pruned-optimized", True))

        def built_dir(self, name):
            return tmp_path / name

        def variant(self, name):
            return next(spec for spec in self.variants if spec.name == name)

    measured, unbuilt = [], set()
    recorded = {"perplexity": 25.0, "promise": "lossy"}
    monkeypatch.setattr(verify, "read_manifest", lambda directory: None if directory.name in unbuilt else {"metrics": recorded})
    monkeypatch.setattr(verify, "resolve", lambda preset, spec: tmp_path)
    monkeypatch.setattr(verify, "chosen_preset", lambda task: Preset())
    monkeypatch.setattr(verify.gates, "failures", lambda *args: [])
    monkeypatch.setattr(accuracy, "measure", lambda preset, directory, name, source, promise: measured.append(name) or {"perplexity": 25.0})
    findings = verify.verify_preset(Preset(), print, ("optimized",))
    assert measured == ["optimized"] and {f.verdict for f in findings} == {"agrees"}
    assert verify.run(["generation"], tmp_path, ("optimized",)) == 0
    assert (tmp_path / "verify-generation-optimized.md").read_text().startswith("### Verify — generation (probe, optimized only)")
    assert not (tmp_path / "verify-generation.md").exists()  # the whole-preset report is left as it was
    assert verify.run(["generation"], tmp_path) == 0 and measured[-2:] == ["optimized", "pruned-optimized"]  # all
    unbuilt.add("pruned-optimized")
    (tmp_path / "verify-generation-pruned-optimized.md").write_text("earlier report")
    capsys.readouterr()
    assert verify.run(["generation"], tmp_path, ("pruned-optimized",)) == 1  # named, not built: not verified
    assert "pruned-optimized of probe built with its gates measured here: build it first" in capsys.readouterr().err
    assert (tmp_path / "verify-generation-pruned-optimized.md").read_text() == "earlier report"  # not replaced by a stub
    assert verify.run(["generation"], tmp_path, ("optimised",)) == 2
    assert "has no variant optimised" in capsys.readouterr().err
    assert verify.run(["generation"], tmp_path, ("baseline",)) == 2  # had written a report of one "not verified" row
    assert "baseline of probe has no gate of its own" in capsys.readouterr().err
    assert not (tmp_path / "verify-generation-baseline.md").exists()
    # nothing built at all: an error, and the whole-preset report of an earlier run is not overwritten by an empty one
    unbuilt.update({"optimized"})
    (tmp_path / "verify-generation.md").write_text("earlier report")
    assert verify.run(["generation"], tmp_path) == 1
    assert "nothing of probe built with its gates measured here" in capsys.readouterr().err
    assert (tmp_path / "verify-generation.md").read_text() == "earlier report"


def test_a_trained_pruned_model_without_a_promise_record_is_reported_as_measured_not_as_unbuilt(monkeypatch, tmp_path):
    """Its promise measured here with no record to compare with read "nothing to verify: build it first"."""
    from optimize import verify

    class Preset:
        name, task, default = "probe", "qa", True
        variants = (type("Spec", (), {"name": "pruned", "built_from": None, "runtime": "torch"})(),)

        def variant(self, name):
            return self.variants[0]

    monkeypatch.setattr(verify, "chosen_preset", lambda task: Preset())
    monkeypatch.setattr(verify.pruned_promise, "trained_pruned", lambda preset: ("pruned",))
    monkeypatch.setattr(verify, "resolve", lambda preset, spec: tmp_path)
    monkeypatch.setattr(verify, "promise_record", lambda *args: None)
    monkeypatch.setattr(verify.pruned_promise, "measure", lambda preset, variant: {"validation_f1": 66.0, "validation_forced_f1": 80.0})
    assert verify.run(["qa"], tmp_path) == 1  # measured, not verified against anything: never a pass
    report = (tmp_path / "verify-qa.md").read_text()
    assert "validation_f1 (no promise record to compare with)" in report and "66" in report, report


def test_verify_measures_the_preset_the_app_serves_and_writes_its_report_apart(monkeypatch, tmp_path):
    """SHOWDOWN_QA_PRESET named another preset (a user's `build --model` one); verify measured, and rewrote the
    report of, the default one."""
    from optimize import verify

    measured = []
    monkeypatch.setattr(verify, "verify_preset", lambda preset, progress, variants: measured.append(preset.name) or [
        verify.Finding("optimized", "overall_f1", 50.0, 50.0, "agrees")])
    assert verify.run(["qa"], tmp_path) == 0 and (tmp_path / "verify-qa.md").exists()
    monkeypatch.setenv("SHOWDOWN_QA_PRESET", "qa-bert-large-squad2")
    assert verify.run(["qa"], tmp_path) == 0 and (tmp_path / "verify-qa-bert-large-squad2.md").exists()
    assert measured == ["qa-minilm-squad2", "qa-bert-large-squad2"]
