"""A corrupt artifact makes only its own variant unavailable, with the reason and the fix, through
the real app: `/variants` says so, `/qa` on it answers with that message (never an upstream
exception), and the other variants keep answering."""
import json
import shutil

import pytest
from gradio_client import Client

from models.catalog import Preset, Source, Variant, optimized_variant
from models.showdown import Showdown
from tests.conftest import serve_app

SEED = "The first little pig was very lazy. The second little pig worked a little bit harder."
FIX = "python -m optimize build --task qa --preset tiny-qa-faults"


def _truncate_onnx(directory):
    onnx = directory / "model.onnx"
    onnx.write_bytes(onnx.read_bytes()[: onnx.stat().st_size // 2])


def _remove_tokenizer_file(directory):
    (directory / "tokenizer.json").unlink()


def _edit_manifest_hash(directory):
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["files"]["model.onnx"]["sha256"] = "0" * 64
    (directory / "manifest.json").write_text(json.dumps(manifest))


# variant -> (how its copy of the built ONNX variant is broken, what /variants must say)
FAULTS = {
    "optimized": (_truncate_onnx, "model.onnx has"),
    "pruned": (_remove_tokenizer_file, "tokenizer.json is missing"),
    "pruned-optimized": (_edit_manifest_hash, "model.onnx does not match its sha256"),
}


@pytest.fixture(scope="module")
def faulty_preset(built_presets, tiny_qa_dir) -> Preset:
    """Three copies of the tiny built QA variant, each broken in its own way, under a preset of
    their own: the session's built presets stay intact."""
    name = "tiny-qa-faults"
    preset = Preset(name, "qa", "tiny qa, corrupt artifacts", variants=(
        Variant("baseline", "torch", Source("local", str(tiny_qa_dir))),
        *(optimized_variant(name, "qa", name=variant) for variant in FAULTS),
    ))
    for variant, (corrupt, _) in FAULTS.items():
        shutil.copytree(built_presets["qa"].built_dir("optimized"), preset.built_dir(variant))
        corrupt(preset.built_dir(variant))
    return preset


@pytest.fixture(scope="module")
def client(faulty_preset, built_presets):
    with serve_app(Showdown(presets={"qa": faulty_preset, "generation": built_presets["generation"]})) as url:
        yield Client(url, verbose=False)


@pytest.mark.parametrize("variant", list(FAULTS))
def test_a_corrupt_variant_is_unavailable_with_its_reason_and_the_others_answer(client, variant):
    reason = FAULTS[variant][1]
    status = next(v for v in client.predict(api_name="/variants") if (v["task"], v["variant"]) == ("qa", variant))
    assert status["status"] == "unavailable"
    assert reason in status["detail"] and f"{FIX} --variant {variant}" in status["detail"]
    with pytest.raises(Exception, match=f"{variant} is unavailable: .*{reason}.*python -m optimize build"):
        client.predict(SEED, "Who worked harder?", variant, api_name="/qa")
    assert client.predict(SEED, "Who worked harder?", "baseline", api_name="/qa")["latency_ms"]["total"] > 0
    assert client.predict("Say hello", "optimized", 3, api_name="/generate")["new_tokens"] == 3
