"""Catalog entries and the loading code for every kind of source, Hub included (against a local
server that plays the Hub's download protocol: the real Hub cannot be reached here)."""
import subprocess
import sys

import pytest

from models import qa
from models.catalog import PRESETS, VARIANTS, Preset, Source, Variant, default_preset, preset
from models.errors import InputError, VariantUnavailable
from models.runners import load_runner
from models.sources import resolve
from tests.fake_hub import FakeHub


def test_every_preset_offers_the_four_variants_and_defaults_are_offline():
    for p in PRESETS:
        assert tuple(v.name for v in p.variants) == VARIANTS
    assert default_preset("qa").variant("baseline").source.kind == "local"
    assert default_preset("generation").variant("baseline").source.kind == "package"
    assert preset("qa-bert-large-squad2").variant("pruned").source.location.startswith("madlag/")
    assert preset("generation-gpt2").variant("baseline").source.location == "gpt2"
    with pytest.raises(InputError, match="Unknown preset"):
        preset("nope")


def test_unbuilt_variant_says_how_to_build_it():
    generation = default_preset("generation")
    with pytest.raises(VariantUnavailable, match="python -m optimize build --task generation"):
        resolve(generation, generation.variant("pruned-optimized"))


def run_with_hub(code: str, endpoint: str, cache) -> subprocess.CompletedProcess:
    """huggingface_hub reads HF_ENDPOINT at import time: load in a fresh interpreter."""
    env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(cache), "HF_HUB_DISABLE_TELEMETRY": "1",
           "PATH": "/usr/bin:/bin", "HF_HUB_DISABLE_XET": "1"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(__import__("models.catalog").catalog.REPO_ROOT))


def test_hub_preset_downloads_through_huggingface_hub_and_answers(tiny_qa_dir, tmp_path):
    with FakeHub() as hub:
        hub.add_folder("madlag/bert-large-uncased-whole-word-masking-finetuned-squadv2", tiny_qa_dir)
        code = (
            "from models.catalog import preset\nfrom models.sources import resolve\n"
            "from models.runners import load_runner\nfrom models import qa\n"
            "p = preset('qa-bert-large-squad2')\npath = resolve(p, p.variant('baseline'))\n"
            "r = load_runner('qa', 'baseline', 'torch', path)\n"
            "print('ANSWER', repr(qa.answer(r, 'Who?', 'The second pig worked.')['answer']))\n"
            "try:\n    resolve(p, p.variant('pruned'))\nexcept Exception as e:\n    print('PRUNED', type(e).__name__, e)\n"
        )
        done = run_with_hub(code, hub.url, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ANSWER" in done.stdout
    assert "PRUNED VariantUnavailable Could not fetch 'madlag/bert-large-uncased-wwm" in done.stdout
    assert any(r.startswith("GET /madlag/bert-large-uncased-whole-word-masking-finetuned-squadv2/resolve/")
               for r in hub.requests)


def test_a_hub_repo_is_fetched_without_other_frameworks_copies_of_its_weights(tiny_qa_dir, tmp_path):
    """A repo such as gpt2 carries its weights for TensorFlow, Flax, Rust, ONNX and as pickles beside safetensors:
    every copy was downloaded (GBs) and counted in the variant's size. A repo with pickled weights only still loads."""
    import shutil

    from transformers import AutoModelForQuestionAnswering

    many = tmp_path / "many"
    shutil.copytree(tiny_qa_dir, many)
    for copy in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "rust_model.ot", "onnx/model.onnx"):
        (many / copy).parent.mkdir(exist_ok=True)
        (many / copy).write_bytes(b"another copy of the weights")
    pickled = tmp_path / "pickled"
    AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).save_pretrained(pickled, safe_serialization=False)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (tiny_qa_dir / name).exists():
            shutil.copy(tiny_qa_dir / name, pickled / name)
    with FakeHub() as hub:
        hub.add_folder("someone/many-copies", many)
        hub.add_folder("someone/pickled", pickled)
        code = (
            "from models.sources import hub_snapshot\nfrom models.manifest import size_bytes\n"
            "from models.runners import load_runner\nfrom models import qa\n"
            "for repo in ('someone/many-copies', 'someone/pickled'):\n"
            "    path = hub_snapshot(repo)\n"
            "    answered = 'answer' in qa.answer(load_runner('qa', 'baseline', 'torch', path), 'Who?', 'The pig worked.')\n"
            "    weights = sum(p.stat().st_size for p in path.glob('*.safetensors')) or (path / 'pytorch_model.bin').stat().st_size\n"
            "    print('FILES', repo, sorted(p.name for p in path.rglob('*') if p.is_file()), answered, size_bytes(path) == weights)\n"
        )
        done = run_with_hub(code, hub.url, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    files = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("FILES")}
    assert all(line.endswith("True True") for line in files.values()), done.stdout  # answers; size counts one copy
    assert "model.safetensors" in files["someone/many-copies"], done.stdout
    for copy in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "rust_model.ot", "'model.onnx'"):
        assert copy not in files["someone/many-copies"], done.stdout
    assert "pytorch_model.bin" in files["someone/pickled"], done.stdout


def test_local_source_loads_into_both_runtimes(built_presets, tiny_qa_dir):
    p = built_presets["qa"]
    for variant in ("baseline", "optimized"):
        spec = p.variant(variant)
        runner = load_runner("qa", variant, spec.runtime, resolve(p, spec))
        assert runner.runtime == spec.runtime
        assert isinstance(qa.answer(runner, "Who?", "The pig.")["answer"], str)


def test_missing_local_weights_are_unavailable_with_the_command(tmp_path):
    p = Preset("x", "qa", "x", (Variant("baseline", "torch", Source("local", str(tmp_path / "none"))),))
    with pytest.raises(VariantUnavailable, match="train-qa"):
        resolve(p, p.variant("baseline"))


@pytest.mark.parametrize("catalog, message", [
    ("format: 1\npresets: [{name: mine, model: ./m}]\n", "preset 1 needs name, task (qa or generation) and model; it lacks task"),
    ("format: 1\npresets: [{name: mine, task: vision, model: ./m}]\n", "its task is 'vision'"),
    ("format: 1\npresets: [unclosed\n", "is not valid YAML"),
    ("format: 1\npresets: 5\n", "presets must be a list"),  # a TypeError traceback
    ("format: 1\npresets: [{name: mine, task: qa, model: ./m, prune: [1]}]\n", "preset 1's prune must map"),  # AttributeError
])
def test_a_hand_edited_catalog_is_named_where_it_broke(tmp_path, monkeypatch, capsys, catalog, message):
    """The user catalog (<artifacts>/catalog.yaml) is read by every command and by the app: a broken entry is one
    line naming the file and the entry, not a KeyError or a YAML traceback."""
    from models.user_presets import FORMAT
    from optimize.__main__ import main

    monkeypatch.setenv("SHOWDOWN_ARTIFACTS", str(tmp_path))
    (tmp_path / "catalog.yaml").write_text(catalog.replace("format: 1", f"format: {FORMAT}"))
    assert main(["build", "--task", "qa", "--preset", "qa-minilm-squad2", "--no-eval"]) == 2
    err = capsys.readouterr().err
    assert f"error: {tmp_path / 'catalog.yaml'}" in err and message in err and "Traceback" not in err
