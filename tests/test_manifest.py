"""The manifest check the app runs before loading a built variant: sizes and sha256, the hashes
cached by path, size and mtime so that a start with unchanged artifacts does not read them again."""
import os
import shutil

import pytest

from models import manifest
from models.manifest import built_steps, verify


def test_hashes_are_read_once_per_path_size_and_mtime(built_presets, tmp_path, monkeypatch):
    target = shutil.copytree(built_presets["qa"].built_dir("optimized"), tmp_path / "copy")
    hashed = []
    real_sha256 = manifest.sha256
    monkeypatch.setattr(manifest, "sha256", lambda path: hashed.append(path.name) or real_sha256(path))
    assert verify(target) == [] and "model.onnx" in hashed  # a new path: read
    hashed.clear()
    assert verify(target) == [] and hashed == []  # unchanged: only stat
    stat = (target / "model.onnx").stat()
    os.utime(target / "model.onnx", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert verify(target) == [] and hashed == ["model.onnx"]  # touched: read again


def test_a_fresh_build_seeds_the_cache(built_presets, monkeypatch):
    """The build just hashed every file for its manifest: the first check after it reads nothing."""
    def must_not_read(path):
        raise AssertionError(f"{path} was read again")

    monkeypatch.setattr(manifest, "sha256", must_not_read)
    assert verify(built_presets["generation"].built_dir("optimized")) == []


def test_built_steps_read_the_rejected_recipes_of_manifests_written_before_gates_missed():
    """The deployed QA `optimized` manifest records its rejected INT8 recipe as GateFailed's message."""
    recipe = {"quantize": True, "per_channel": True, "keep_fp32": ["ffn_output"], "weight_only_bits": None}
    missed = ("qa-minilm-squad2/optimized missed its accuracy gate: agrees with its PyTorch source on 93.0% of QA "
              "answers (gate ≥ 98.0%). Try a gentler recipe (per-channel INT8, fewer quantized layers, less pruning)")
    old = {"steps": ["export-onnx", "graph-optimize (level 2)"],
           "metrics": {"rejected_recipes": [{"recipe": recipe, "missed": missed}]}}
    assert built_steps(old) == ("export-onnx → graph-optimize (level 2); rejected dynamic INT8 per channel, fp32 "
                                "ffn_output: agrees with its PyTorch source on 93.0% of QA answers (gate ≥ 98.0%)")


def test_a_variant_folder_is_built_by_one_process_at_a_time(tmp_path):
    """The app's first-start builder and `optimize build` on the same variant deleted each other's staging folder:
    the second build now stops at once with a message naming the first, and builds once the first is done."""
    import pytest

    from models.errors import VariantUnavailable
    from models.manifest import atomic_dir

    target = tmp_path / "preset" / "optimized"
    with atomic_dir(target) as staging:
        (staging / "model.onnx").write_text("first")
        with pytest.raises(VariantUnavailable, match=r"optimized is being built by another process \(pid \d+\)"):
            with atomic_dir(target):
                pass
        assert (staging / "model.onnx").exists()  # the first build's staging is untouched
    with atomic_dir(target) as staging:
        (staging / "model.onnx").write_text("second")
    assert (target / "model.onnx").read_text() == "second"


def test_the_offline_commands_turn_a_users_mistake_into_one_line(tmp_path, capsys):
    """A path that is not there, a malformed value: `error: …` with the fix and exit status 2, never a traceback."""
    from optimize.__main__ import main

    assert main(["bench", "--render", "--output", str(tmp_path)]) == 2
    assert f"error: no {tmp_path / 'bench.json'} to render: run `python -m optimize bench` first" in capsys.readouterr().err
    assert main(["bench", "--render", "--quick", "--task", "qa", "--output", str(tmp_path)]) == 2  # ignored, silently
    assert "error: --render times nothing: --task, --quick would be ignored" in capsys.readouterr().err
    assert main(["push", "--repo-prefix", "noslash"]) == 2
    assert "error: --repo-prefix must look like ORG/NAME, not 'noslash'" in capsys.readouterr().err
    assert main(["build", "--model", str(tmp_path / "nowhere" / "mymodel"), "--task", "qa"]) == 2
    assert "is neither a model folder (with a config.json) nor a Hub id" in capsys.readouterr().err
    from models.user_presets import catalog_path
    assert not catalog_path().exists() or "mymodel" not in catalog_path().read_text()  # nothing written
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert main(["build", "--model", str(model), "--task", "qa", "--heads-kept", "5"]) == 2
    assert "heads and FFN shares kept are in (0, 1]; got 5.0 and 0.67" in capsys.readouterr().err
    assert main(["build", "--model", str(model), "--task", "generation", "--reading-questions", "-5"]) == 2
    assert "--reading-questions must be at least 1 (got -5)" in capsys.readouterr().err


def test_training_and_pruning_refuse_a_value_no_run_can_use_before_writing_anything(tmp_path, capsys):
    """`train-qa --epochs 0` ended in a KeyError after rewriting the shipped baseline's tokenizer (its default output);
    `prune` went on to tokenize or to compute teacher answers with a cut larger than the model; a folder that is not a
    model was taken for a Hub id. Each is now one line, exit status 2, before anything is written."""
    from optimize.__main__ import main

    from models.catalog import REPO_ROOT

    shipped = REPO_ROOT / "weights/qa-minilm-squad2/tokenizer.json"
    before = shipped.read_bytes()
    out = tmp_path / "out"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    onnx_variant = tmp_path / "onnx-variant"  # an ONNX variant's folder: transformers failed on it in a paragraph
    onnx_variant.mkdir()
    (onnx_variant / "config.json").write_text("{}")
    (onnx_variant / "model.onnx").write_bytes(b"")
    cases = {
        ("train-qa", "--epochs", "0"): "error: epochs 0: each must be at least 1",
        ("train-qa", "--negatives-share", "1.5", "--output", str(out)): "error: negatives 1.5: shares are between 0 and 1",
        ("train-qa", "--init-from", str(tmp_path / "none"), "--output", str(out)): "none is not a model folder (no config.json there)",
        ("diagnose-qa", "--weights", str(tmp_path)): f"error: {tmp_path} is not a model folder",
        ("remeasure-qa", "--weights", str(tmp_path)): f"error: {tmp_path} is not a model folder",
        ("diagnose-qa", "--weights", str(onnx_variant)): "has no PyTorch weights (model.safetensors) (it holds an ONNX model)",
        ("prune", "--task", "qa", "--heads-kept", "0", "--output", str(out)): "heads and FFN neurons kept must be ≥ 1",
        ("prune", "--task", "qa", "--heads-kept", "13", "--output", str(out)): "the model has 12 heads",
        ("prune", "--task", "generation", "--steps", "0", "--output", str(out)): "steps, batch size, rank and threads must be ≥ 1",
        # an --output that cannot be written was found only when the minutes (bench) or hours (training) ended
        ("train-qa", "--output", str(blocker / "model")): f"cannot write in {blocker} (Not a directory)",
        ("prune", "--task", "qa", "--output", str(blocker)): f"--output {blocker} is a file, not a folder",
        ("bench", "--task", "qa", "--output", str(blocker)): f"--output {blocker} is a file, not a folder",
    }
    for argv, message in cases.items():
        assert main(list(argv)) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert shipped.read_bytes() == before and not out.exists()
    # the generation cut is checked against the model's config before its weights load (the CLI path resolves the
    # GGUF baseline first, tens of seconds in a fresh artifacts folder)
    from types import SimpleNamespace

    from models.errors import ConfigError
    from optimize.prune.decoder import DecoderPruneConfig

    with pytest.raises(ConfigError, match="the model has 30 layers of 1536 FFN neurons; asked to drop 29 layers"):
        DecoderPruneConfig(layers_dropped=29).check_fits(SimpleNamespace(intermediate_size=1536, num_hidden_layers=30))
    # the first and last layers stay: asked for every other layer and more, the plan had dropped fewer than recorded
    import torch

    from optimize.prune.decoder import plan
    with pytest.raises(ConfigError, match="at most 28 can be dropped \\(asked 29\\)"):
        plan(torch.arange(30.0), torch.ones(30, 8), DecoderPruneConfig(layers_dropped=29, ffn_kept=8))
    assert len(plan(torch.arange(30.0), torch.ones(30, 8), DecoderPruneConfig(layers_dropped=28, ffn_kept=8))[0]) == 28
    # DistilBERT's config names its FFN width hidden_dim: `prune --task qa` on it had been an AttributeError
    from transformers import DistilBertConfig

    from optimize.prune.encoder import PruneConfig
    with pytest.raises(ConfigError, match="the model has 12 heads and 3072 FFN neurons per layer and 6 layers"):
        PruneConfig(heads_kept=4, ffn_kept=512, layers_dropped=6).check_fits(DistilBertConfig())
    PruneConfig(heads_kept=4, ffn_kept=512, layers_dropped=5).check_fits(DistilBertConfig())


def test_build_model_says_what_a_folder_lacks_before_it_writes_the_catalog(tmp_path, capsys, tiny_qa_dir, monkeypatch):
    """A QA model with --task generation, a folder without weights or without a tokenizer had printed "baseline:
    ready", then tracebacks minutes later, and had rewritten the catalog's working preset of the same name; an encoder
    with no QA head had built four "ready" variants of a random head."""
    import shutil

    from models.errors import InputError
    from models.user_presets import add_preset, catalog_path
    from optimize.__main__ import main

    monkeypatch.setenv("SHOWDOWN_ARTIFACTS", str(tmp_path / "artifacts"))
    no_weights, no_tokenizer = tmp_path / "no-weights", tmp_path / "no-tokenizer"
    shutil.copytree(tiny_qa_dir, no_weights, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    no_tokenizer.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_qa_dir / name, no_tokenizer / name)
    bare = tmp_path / "bare-encoder"  # all-MiniLM-L6-v2 itself: its head would have been random weights, gated on
    shutil.copytree(tiny_qa_dir, bare)
    (bare / "config.json").write_text((bare / "config.json").read_text().replace("BertForQuestionAnswering", "BertModel"))
    cases = {
        (str(tiny_qa_dir), "generation"): "holds a BertForQuestionAnswering, a qa model: --task qa",
        (str(bare), "qa"): "holds a BertModel, which has no question-answering head",
        (str(no_weights), "qa"): "has no weights",
        (str(no_tokenizer), "qa"): "has no tokenizer that loads",
    }
    for (model, task), message in cases.items():
        assert main(["build", "--model", model, "--task", task]) == 2, model
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert main(["build", "--model", str(tiny_qa_dir), "--task", "qa", "--variant", "optimized"]) == 2
    assert "--model builds all four variants" in capsys.readouterr().err
    assert main(["build", "--model", str(tiny_qa_dir), "--task", "qa", "--data", str(tmp_path / "none.json")]) == 2
    assert "--data" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{bad")  # it had built the baseline and optimized first, then a traceback
    assert main(["build", "--model", str(tiny_qa_dir), "--task", "qa", "--data", str(tmp_path / "bad.json")]) == 2
    assert "is not a SQuAD-style JSON file" in capsys.readouterr().err and not catalog_path().exists()  # nothing written
    # a second model under a name the catalog holds replaces it only when asked
    add_preset("/models/one/tiny", "qa")
    with pytest.raises(InputError, match="preset 'tiny' already holds /models/one/tiny \\(qa\\); pass --name"):
        add_preset("/models/two/tiny", "qa")
    assert add_preset("/models/two/tiny", "qa", replace=True).name == "tiny"
    assert add_preset("/models/two/tiny", "qa").name == "tiny"  # the same model again: no question


def test_a_write_that_fails_halfway_leaves_the_old_file_whole(tmp_path, monkeypatch):
    """Reports, bench.json and the committed records: a full disk (or a stop) mid-write had left half a file, which
    every later build or single-task bench then failed to read."""
    from pathlib import Path

    from models.manifest import write_atomically

    record = tmp_path / "bench.json"
    write_atomically(record, '{"runs": 1}\n')
    real_write = Path.write_text

    def disk_full(self, text, *args, **kwargs):
        real_write(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError):
        write_atomically(record, '{"runs": 2, "rows": []}\n')
    monkeypatch.undo()
    assert record.read_text() == '{"runs": 1}\n' and [p.name for p in tmp_path.iterdir()] == ["bench.json"]


def test_an_artifacts_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    """SHOWDOWN_ARTIFACTS on a file (or a read-only mount) had ended `build` in a NotADirectoryError traceback."""
    from optimize.__main__ import main

    blocker = tmp_path / "artifacts"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SHOWDOWN_ARTIFACTS", str(blocker))
    assert main(["build", "--task", "qa", "--no-eval"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {blocker}" in err and "a file stands where a folder is needed" in err and "Traceback" not in err, err
