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
