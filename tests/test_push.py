"""`optimize push` and pulling a preset back from the Hub, against a local server that plays the
Hub's endpoints (the real Hub cannot be reached here); we assert on what arrived."""
import json
import os
from pathlib import Path

from tests.fake_hub import FakeHub

TOKEN = "hf_showdownSecretToken123"


def test_push_uploads_every_ready_variant_with_card_and_report_and_pull_loads_them(built_presets, tmp_path):
    setup = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "from tests.tiny import tiny_preset\nfrom models.showdown import Showdown\nfrom pathlib import Path\n"
        f"presets = {{t: tiny_preset(t, Path(p)) for t, p in {json.dumps({t: str(p.variant('baseline').source.location) for t, p in built_presets.items()})}.items()}}\n"
    )
    push = setup + (
        "from optimize.publish.push import push\n"
        "print('PUSHED', push('showdown-org/demo', Showdown(presets=presets), allow_unmeasured=True))\n"
    )
    with FakeHub() as hub:
        done = hub.run_python(push, tmp_path, HF_TOKEN=TOKEN,
                          SHOWDOWN_ARTIFACTS=os.environ["SHOWDOWN_ARTIFACTS"])
        assert done.returncode == 0, done.stderr[-3000:]
        assert TOKEN not in done.stdout + done.stderr  # never printed
        assert all(a == f"Bearer {TOKEN}" for a in hub.authorizations)
        for task in ("qa", "generation"):
            for variant in ("baseline", "optimized"):
                files = hub.repos[f"showdown-org/demo-{task}-{variant}"]
                assert "config.json" in files and "README.md" in files
                card = files["README.md"].decode()
                assert "inference-showdown" in card and f"`{variant}`" in card and TOKEN not in card
                assert ("model.onnx" in files) == (variant == "optimized")
                assert not any(TOKEN.encode() in content for content in files.values())
            assert "manifest.json" in hub.repos[f"showdown-org/demo-{task}-optimized"]
            uploaded = json.loads(hub.repos[f"showdown-org/demo-{task}-optimized"]["manifest.json"])
            assert not uploaded["inputs"]["source"].startswith("/"), uploaded["inputs"]  # no local path on the Hub
        # a second push removes what the variant no longer has (a Space fetching the repo would read it)
        hub.repos["showdown-org/demo-generation-optimized"]["decoding.json"] = b'{"prompt_lookup": true}'
        again = hub.run_python(push, tmp_path, HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=os.environ["SHOWDOWN_ARTIFACTS"])
        assert again.returncode == 0, again.stderr[-3000:]
        assert "decoding.json" not in hub.repos["showdown-org/demo-generation-optimized"]
        assert "model.onnx" in hub.repos["showdown-org/demo-generation-optimized"]

        pull = (
            "from models.showdown import Showdown\n"
            "s = Showdown.from_environment()\n"
            "print('QA', s.answer('The second pig worked.', 'Who worked?', 'optimized')['latency_ms']['total'] > 0)\n"
            "print('GEN', s.generate('Hello', 'optimized', 3)['new_tokens'])\n"
            "print('STATUS', {v['variant']: v['status'] for v in s.variants() if v['task'] == 'qa'})\n"
        )
        pulled = hub.run_python(pull, tmp_path / "pull", SHOWDOWN_HUB_PREFIX="showdown-org/demo")
        # each card's own "Load" snippet runs as written (the generation card had named an optimum class that
        # cannot drive ONNX Runtime GenAI's decoder)
        for task in ("qa", "generation"):
            card = hub.repos[f"showdown-org/demo-{task}-optimized"]["README.md"].decode()
            snippet = card.split("## Load")[1].split("```python\n")[1].split("```")[0]
            ran = hub.run_python(snippet, tmp_path / f"card-{task}")
            assert ran.returncode == 0 and ran.stdout.strip(), (snippet, ran.stderr[-3000:])
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    assert "QA True" in pulled.stdout and "GEN 3" in pulled.stdout
    assert "'pruned': 'unavailable'" in pulled.stdout


def test_a_card_says_what_the_app_says_a_pruned_model_missed_and_that_it_was_pruned(tmp_path):
    """The committed QA `pruned` misses its promise on validation (issue 48): its card states the miss and the cut."""
    from models.catalog import default_preset
    from models.sources import resolve
    from optimize.publish.push import variant_card

    preset = default_preset("qa")
    pruned = preset.variant("pruned")
    missed = ("validation SQuAD 2.0 F1 67.27 is 3.66 below baseline (gate ≤ 3.0)",)
    card = str(variant_card(preset, pruned, resolve(preset, pruned), None, "org/demo", missed))
    assert f"**Missed its accuracy gate:** {missed[0]}" in card
    assert "pruned and distilled from" in card and "(pruned: 4 heads, 512 FFN neurons" in card
    assert "No report yet" in card
    # what the app shows beside it (its promise, forced-span and everyday scores): the card had left them out
    shown = {"overall_f1": 59.68, "forced_f1": 78.99, "everyday_f1": 75.11, "summary": "pruned: validation F1 −3.7"}
    card = str(variant_card(preset, pruned, resolve(preset, pruned), None, "org/demo", missed, shown))
    assert "- Promise and its gated measures: pruned: validation F1 −3.7" in card
    assert "forced f1 78.99" in card and "everyday f1 75.11" in card
    header = card.split("---")[1]  # the committed card's license, base model and data stay on the pushed one
    assert "license: apache-2.0" in header and "base_model:" in header and "inference-showdown" in header


def test_a_variant_whose_source_changed_since_its_build_is_not_pushed(built_presets, tmp_path):
    """A retrained baseline leaves the old `optimized` loadable and "ready": pushing it would publish numbers measured
    against another model."""
    import shutil

    from models.manifest import read_manifest, stale_source, write_manifest

    built = built_presets["qa"].built_dir("optimized")
    assert stale_source(built) is None  # as built
    copy = tmp_path / "optimized"
    shutil.copytree(built, copy)
    manifest = read_manifest(copy)
    source = tmp_path / "retrained"
    shutil.copytree(manifest["inputs"]["source"], source)
    (source / "config.json").write_text((source / "config.json").read_text() + "\n")  # other bytes
    write_manifest(copy, source=manifest["source"], steps=manifest["steps"], metrics=manifest["metrics"],
                   inputs={**manifest["inputs"], "source": str(source)}, size_bytes=manifest["size_bytes"],
                   preset=manifest["preset"], variant=manifest["variant"])
    assert "changed since it was built" in stale_source(copy)
    # the checkout moved: the path the build recorded is gone, the source variant's folder now is the one to compare
    moved = tmp_path / "moved"
    shutil.copytree(built, moved)
    write_manifest(moved, source=manifest["source"], steps=manifest["steps"], metrics=manifest["metrics"],
                   inputs={**manifest["inputs"], "source": str(tmp_path / "gone")}, size_bytes=manifest["size_bytes"],
                   preset=manifest["preset"], variant=manifest["variant"])
    assert stale_source(moved, Path(manifest["inputs"]["source"])) is None
    assert "changed since it was built" in stale_source(moved, source)


def test_a_push_the_hub_refuses_or_cannot_hear_is_one_line(built_presets, tmp_path):
    """A wrong token and an unreachable Hub were tracebacks from `python -m optimize push`; each is one line now."""
    setup = (
        "from tests.tiny import tiny_preset\nfrom models.showdown import Showdown\nfrom pathlib import Path\n"
        "from optimize.__main__ import user_message\nfrom optimize.publish.push import push\n"
        f"presets = {{t: tiny_preset(t, Path(p)) for t, p in {json.dumps({t: str(p.variant('baseline').source.location) for t, p in built_presets.items()})}.items()}}\n"
        "try:\n    push('showdown-org/demo', Showdown(presets=presets), allow_unmeasured=True)\n"
        "except Exception as error:\n    print('MESSAGE', user_message(error))\n"
    )
    with FakeHub() as hub:
        hub.write_token = TOKEN
        refused = hub.run_python(setup, tmp_path, HF_TOKEN="hf_wrongToken", SHOWDOWN_ARTIFACTS=os.environ["SHOWDOWN_ARTIFACTS"])
        unreachable = hub.run_python(setup, tmp_path, HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=os.environ["SHOWDOWN_ARTIFACTS"],
                                     HF_ENDPOINT="http://127.0.0.1:9")  # nothing listens on port 9
    assert f"MESSAGE the Hub answered 401 for {hub.url}/api/repos/create: is HF_TOKEN set" in refused.stdout, refused.stderr[-2000:]
    assert "MESSAGE could not reach http://127.0.0.1:9: check the network" in unreachable.stdout, unreachable.stderr[-2000:]
    assert "hf_wrongToken" not in refused.stdout + refused.stderr


def tiny_push_script(built_presets, call: str) -> str:
    """A script that pushes the tiny built presets with `call` (push's arguments after the showdown) and prints what
    came back, or the one line a user reads."""
    return (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "from tests.tiny import tiny_preset\nfrom models.showdown import Showdown\nfrom pathlib import Path\n"
        "from optimize.__main__ import user_message\nfrom optimize.publish.push import push\n"
        f"presets = {{t: tiny_preset(t, Path(p)) for t, p in {json.dumps({t: str(p.variant('baseline').source.location) for t, p in built_presets.items()})}.items()}}\n"
        f"try:\n    print('PUSHED', push({call}))\n"
        "except Exception as error:\n    print('MESSAGE', user_message(error))\n"
    )


def test_a_push_checks_every_repo_name_and_the_measures_before_it_uploads(built_presets, tmp_path):
    """A prefix the Hub refuses ("org/demo-" makes "org/demo--qa-baseline") was a traceback, or a partial upload when
    only the longest names were too long; a variant built with --no-eval was published with no measure at all."""
    artifacts = os.environ["SHOWDOWN_ARTIFACTS"]
    with FakeHub() as hub:
        for prefix in ("org/demo-", "org/" + "d" * 80, "a/b/c", "demo"):
            bad = hub.run_python(tiny_push_script(built_presets, f"{prefix!r}, Showdown(presets=presets)"), tmp_path,
                                 HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=artifacts)
            expected = "must look like ORG/NAME" if prefix == "demo" else f"{prefix!r} makes the repo name"
            assert f"MESSAGE --repo-prefix {expected}" in bad.stdout, bad.stdout + bad.stderr[-2000:]
        assert hub.requests == [] and hub.repos == {}  # refused before the first request
        unmeasured = hub.run_python(tiny_push_script(built_presets, "'org/demo', Showdown(presets=presets)"), tmp_path,
                                    HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=artifacts)
        assert "PUSHED []" in unmeasured.stdout and "its accuracy was never measured" in unmeasured.stdout, unmeasured.stdout
        assert hub.repos == {}


def test_a_variant_built_without_the_squad_data_is_not_pushed_as_measured(built_presets, tmp_path):
    """A QA build where the SQuAD data is absent measured nothing, but its manifest holds a note: push took that for
    a measure and uploaded it, where the same variant built with --no-eval was held back."""
    import shutil

    artifacts = tmp_path / "artifacts"
    shutil.copytree(os.environ["SHOWDOWN_ARTIFACTS"], artifacts)
    manifest_path = artifacts / built_presets["qa"].name / "optimized" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["inputs"]["gated_on"] = "nothing (SQuAD 2.0 dev data absent)"  # what gate_inputs records without the data
    manifest["metrics"] = {"note": "SQuAD data not found: accuracy not measured", "promise": "lossy", "summary": ""}
    manifest_path.write_text(json.dumps(manifest))
    with FakeHub() as hub:
        done = hub.run_python(tiny_push_script(built_presets, "'org/demo', Showdown(presets=presets)"), tmp_path,
                              HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=str(artifacts))
        said = "qa/optimized not pushed: its accuracy was never measured (nothing (SQuAD 2.0 dev data absent))"
        assert said in done.stdout, done.stdout + done.stderr[-2000:]
        assert "org/demo-qa-optimized" not in hub.repos


def test_private_makes_existing_repos_private_and_a_partial_in_the_path_keeps_the_weights(built_presets, tmp_path):
    """create_repo(exist_ok=True) leaves a public repo public; and a staging-folder filter on the absolute path took
    every file for a leftover when the artifacts folder's own name had ".partial" in it (the weights were deleted)."""
    import shutil

    artifacts = tmp_path / "my.partial.d"
    shutil.copytree(os.environ["SHOWDOWN_ARTIFACTS"], artifacts)
    call = "'org/demo', Showdown(presets=presets), allow_unmeasured=True"
    with FakeHub() as hub:
        public = hub.run_python(tiny_push_script(built_presets, call), tmp_path, HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=str(artifacts))
        assert "PUSHED ['org/demo-qa-baseline'" in public.stdout, public.stdout + public.stderr[-2000:]
        assert hub.private == set() and "model.onnx" in hub.repos["org/demo-qa-optimized"]
        private = hub.run_python(tiny_push_script(built_presets, call + ", private=True"), tmp_path, HF_TOKEN=TOKEN,
                                 SHOWDOWN_ARTIFACTS=str(artifacts))
        assert "PUSHED" in private.stdout, private.stdout + private.stderr[-2000:]
        assert hub.private == {f"org/demo-{t}-{v}" for t in ("qa", "generation") for v in ("baseline", "optimized")}
        assert "model.onnx" in hub.repos["org/demo-qa-optimized"]


def test_a_trained_models_promise_travels_in_its_repo_and_is_read_there(tmp_path):
    """The QA `pruned`'s misses vanished on a Space: its promise record lived in the local artifacts folder only, under
    fingerprints of files a Space downloads with others beside them."""
    from models.catalog import default_preset
    from models.recorded import PROMISE_RECORD, recorded_accuracy

    repo = tmp_path / "pruned"
    repo.mkdir()
    (repo / PROMISE_RECORD).write_text(json.dumps({"measured": "2026-11-29, here", "metrics": {
        "summary": "pruned: SQuAD 2.0 F1 3.7 below", "gates_missed": ["validation SQuAD 2.0 F1 is 3.66 below"]}}))
    shown = recorded_accuracy(default_preset("qa"), "pruned", repo, lambda variant: tmp_path / "baseline")
    assert shown["gates_missed"] == ["validation SQuAD 2.0 F1 is 3.66 below"] and shown["promise"] == "pruned"


def test_push_never_reads_the_hubs_own_presets(monkeypatch):
    """With SHOWDOWN_HUB_PREFIX still set (the README sets it to serve the pushed repos), push tried the Hub presets'
    variants and advised pushing them first: nothing was pushed, and it exited 0."""
    from models.catalog import default_preset, presets_from_environment

    monkeypatch.setenv("SHOWDOWN_HUB_PREFIX", "org/demo")
    assert presets_from_environment()["qa"].name.endswith("-hub")
    assert presets_from_environment(hub=False) == {t: default_preset(t) for t in ("qa", "generation")}


def test_a_second_preset_pushed_to_the_same_prefix_is_refused(built_presets, tmp_path):
    """Repo names carry no preset: pushing another model to the same prefix replaced the first one's repos, and the
    Space served the new baseline beside the old `optimized` under the old title."""
    other = ("import dataclasses\n"
             "presets = {t: dataclasses.replace(p, name=p.name + '-other') for t, p in presets.items()}\n")
    call = "'org/demo', Showdown(presets=presets), allow_unmeasured=True"
    artifacts = os.environ["SHOWDOWN_ARTIFACTS"]
    with FakeHub() as hub:
        first = hub.run_python(tiny_push_script(built_presets, call), tmp_path, HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=artifacts)
        before = {repo: dict(files) for repo, files in hub.repos.items()}
        script = tiny_push_script(built_presets, call).replace("try:\n", other + "try:\n")
        second = hub.run_python(script, tmp_path, HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=artifacts)
        again = hub.run_python(tiny_push_script(built_presets, call), tmp_path, HF_TOKEN=TOKEN, SHOWDOWN_ARTIFACTS=artifacts)
    assert "PUSHED ['org/demo-qa-baseline'" in first.stdout, first.stdout + first.stderr[-2000:]
    assert "PUSHED []" in second.stdout and "holds preset" in second.stdout, second.stdout + second.stderr[-2000:]
    assert "PUSHED ['org/demo-qa-baseline'" in again.stdout  # the same preset pushes again
    assert {repo: files["config.json"] for repo, files in before.items()} == \
           {repo: files["config.json"] for repo, files in hub.repos.items()}


def test_the_card_loads_an_onnx_variant_with_the_session_settings_its_build_measured(built_presets, tmp_path):
    """A variant whose build kept its layer norms apart is gated with ONNX Runtime's fusion off: the card's optimum
    snippet must load it so (run here on a local copy), not with the kernel and arithmetic the build rejected."""
    import re
    import shutil

    from optimize.export.layer_norm import KEPT_APART
    from optimize.publish.push import load_text

    preset = built_presets["qa"]
    folder = shutil.copytree(preset.built_dir("optimized"), tmp_path / "optimized")
    (folder / "session.json").write_text(json.dumps(KEPT_APART))
    card = load_text(preset, preset.variant("optimized"), folder, str(folder), "me")
    snippet = re.search(r"With optimum alone:\n```python\n(.*?)```", card, re.S).group(1)
    assert "session_options=options" in snippet, card
    scope: dict = {}
    exec(snippet, scope)  # noqa: S102 - the card's own code, on a local folder
    options = scope["model"].model.get_session_options()
    assert options.get_session_config_entry("optimization.disable_specified_optimizers") == "SkipLayerNormFusion"
