"""The public instruction set (issue 13): well formed, and its checks pass what they should and only that."""
from optimize.evaluate.instructions import load, passes


def test_the_set_has_about_sixty_prompts_of_four_kinds_each_with_a_check():
    prompts = load()
    assert 55 <= len(prompts) <= 70 and len({p["id"] for p in prompts}) == len(prompts)
    assert {p["kind"] for p in prompts} == {"fact", "arithmetic", "format", "long"}
    assert all(set(p["check"]) <= {"all", "any", "none", "regex", "case_sensitive"} and p["check"] for p in prompts)


def check_of(prompt_id: str) -> dict:
    return next(p["check"] for p in load() if p["id"] == prompt_id)


def test_keyword_checks_ignore_case_and_need_every_keyword():
    assert passes("The capital of France is Paris.", check_of("fact-capital-france"))
    assert not passes("The capital of France is Lyon.", check_of("fact-capital-france"))
    water = check_of("long-water-cycle")
    assert passes("Water evaporates, then condenses into clouds and falls as rain.", water)
    assert not passes("Water evaporates.", water)  # one of the `any` words is needed too


def test_exact_checks_read_the_number_and_the_format_not_a_substring():
    assert passes("12", check_of("arith-7-plus-5")) and not passes("112", check_of("arith-7-plus-5"))
    assert passes("Yes.", check_of("format-yes-no-fire")) and not passes("No, yes.", check_of("format-yes-no-fire"))
    assert passes("HELLO", check_of("format-uppercase")) and not passes("hello", check_of("format-uppercase"))
    assert passes('{"name": "Ada"}', check_of("format-json-name")) and not passes("name: Ada", check_of("format-json-name"))
    assert passes("- red\n- green\n- blue", check_of("format-list-three-colors"))
    assert not passes("red, green, blue", check_of("format-list-three-colors"))


def test_pytorch_variants_are_scored_on_the_apps_own_answers(tmp_path):
    """A PyTorch variant's answers are decoded in batches: each text must be what the app answers."""
    from models import generation
    from models.runners import load_runner
    from optimize.evaluate import instructions
    from tests.tiny import tiny_llama

    runner = load_runner("generation", "baseline", "torch", tiny_llama(tmp_path / "varied", init_range=0.2))
    items = [item for item in instructions.load() if item["kind"] in ("format", "long")][:20]
    assert {item.get("max_new_tokens") for item in items} > {None}  # both answer lengths
    scored = instructions.measure(runner, items)
    for item in items:
        app = generation.generate(runner, item["prompt"], item.get("max_new_tokens", instructions.SHORT_ANSWER_TOKENS))
        assert scored["answers"][item["id"]]["text"] == app["text"], item["id"]


def test_a_models_score_is_recorded_once_then_read_and_marked_as_read_and_verify_measures_again(tmp_path, monkeypatch):
    """The same files give the same greedy answers: a user preset's score is measured once, written
    to `<artifacts>/instruction-record.json` with the day and CPU, read (and said to be read) the
    next time; changed files or `optimize verify` (no record read) measure again."""
    from datetime import date

    from models.runners import load_runner
    from optimize.evaluate import instructions
    from optimize.verify import no_records
    from tests.tiny import tiny_llama

    monkeypatch.setenv("SHOWDOWN_ARTIFACTS", str(tmp_path / "artifacts"))
    items = instructions.load()[:3]
    monkeypatch.setattr(instructions, "load", lambda path=None: items)
    model = tiny_llama(tmp_path / "yours", init_range=0.2)
    loads = []

    def load():
        loads.append(1)
        return load_runner("generation", "baseline", "torch", model)

    first = instructions.recorded("tiny-yours", model, load)
    assert "recorded" not in first and set(first["passed_by_prompt"]) == {item["id"] for item in items}
    assert (tmp_path / "artifacts" / "instruction-record.json").exists()
    again = instructions.recorded("tiny-yours", model, load)
    assert again["recorded"].startswith(str(date.today())) and len(loads) == 1
    assert {k: again[k] for k in first} == first
    with no_records():
        assert "recorded" not in instructions.recorded("tiny-yours", model, load) and len(loads) == 2
        assert instructions.recorded("tiny-yours", model, load) and len(loads) == 2  # once per verify run
    (model / "extra.json").write_text("{}")  # other files: another model
    assert "recorded" not in instructions.recorded("tiny-yours", model, load) and len(loads) == 3


def test_the_report_shows_each_variants_paired_difference_to_the_baseline_with_its_interval(built_presets, tmp_path,
                                                                                             monkeypatch):
    """60 prompts resolve about ±13 points: the report puts the interval beside every share of the baseline's."""
    from models.showdown import Showdown
    from optimize.evaluate import instructions

    items = [item for item in instructions.load() if item["kind"] != "long"][:4]
    monkeypatch.setattr(instructions, "load", lambda path=None: items)
    report = instructions.run(tmp_path, Showdown(presets=built_presets))
    variants = report["variants"]
    assert list(variants)[:2] == ["baseline", "optimized"] and variants["baseline"]["vs_baseline"] is None
    paired = variants["optimized"]["vs_baseline"]
    assert paired["items"] == 4 and paired["ci95"][0] <= paired["delta"] <= paired["ci95"][1]
    table = (tmp_path / "instructions.md").read_text()
    assert "vs baseline, points (95 % CI, prompts resampled)" in table
    assert f"| optimized | {variants['optimized']['passed']}/4 |" in table and "| baseline | " in table


def test_no_variant_that_loads_is_an_error_that_writes_no_report(tmp_path, generation_preset):
    """A preset with nothing built had replaced the committed reports/instructions.json with an empty table, exit 0."""
    import dataclasses

    import pytest

    from models.errors import VariantUnavailable
    from models.showdown import Showdown
    from optimize.__main__ import user_message
    from optimize.evaluate import instructions

    gone = tuple(dataclasses.replace(v, source=dataclasses.replace(v.source, location=str(tmp_path / "moved")))
                 if v.name == "baseline" else v for v in generation_preset.variants)  # the source folder moved away
    nothing_built = dataclasses.replace(generation_preset, name="tiny-generation-unbuilt", variants=gone)
    (tmp_path / "instructions.json").write_text("earlier report")
    with pytest.raises(VariantUnavailable) as error:
        instructions.run(tmp_path, Showdown(presets={"generation": nothing_built}))
    assert "no generation variant of tiny-generation-unbuilt loads" in user_message(error.value)
    assert (tmp_path / "instructions.json").read_text() == "earlier report"
