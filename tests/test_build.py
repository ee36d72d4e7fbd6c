"""The optimize build on tiny models: export → graph optimization → INT8, manifest, resume."""
import json
from dataclasses import replace

import numpy as np
import onnx
import pytest

from models import generation, qa
from models.manifest import read_manifest, sha256
from models.runners import load_runner
from optimize.build import build_onnx
from tests.conftest import requires_squad


def test_optimized_variants_are_fused_onnx_with_a_complete_manifest(built_presets, tiny_qa_dir):
    preset = built_presets["qa"]
    target = preset.built_dir("optimized")
    manifest = read_manifest(target)
    assert [s.split(" ")[0] for s in manifest["steps"]] == ["export-onnx", "graph-optimize", "kept", "residual",
                                                            "quantize-dynamic-int8"]
    assert manifest["versions"]["onnxruntime"] and manifest["versions"]["optimum"]
    assert manifest["files"]["model.onnx"]["sha256"] == sha256(target / "model.onnx")
    # the build timed both graphs and kept the faster: the fused one holds the Attention op
    kept = manifest["steps"][2].split("(", 1)[1].split(")", 1)[0]
    assert kept in ("fused", "load-time fusions only") and "ms" in manifest["steps"][2]
    qa_nodes = onnx.load(target / "model.onnx").graph.node
    assert (kept == "fused") == bool({"Attention", "QAttention"} & {node.op_type for node in qa_nodes})
    # the layer norm kernels were timed on this CPU; kept apart, the graph holds none fused and the session is told
    # not to fuse them at load
    apart = manifest["steps"][3].startswith("residual layer norms kept apart") and "ms" in manifest["steps"][3]
    assert (target / "session.json").exists() == apart == ("session.json" in manifest["files"])
    assert not (apart and "SkipLayerNormalization" in {node.op_type for node in qa_nodes})
    # the ladder's first rung (lossy, gated on F1): every dense MatMul INT8, per channel
    assert manifest["steps"][4].startswith("quantize-dynamic-int8 (per_channel=True") and "fp32:" not in manifest["steps"][4]
    assert not {node.name for node in qa_nodes if node.op_type == "MatMul" and "dense" in node.name}
    assert {"MatMulInteger", "DynamicQuantizeMatMul"} & {node.op_type for node in qa_nodes}
    generation_target = built_presets["generation"].built_dir("optimized")
    generation_steps = read_manifest(generation_target)["steps"]
    assert "MatMulNBits int8" in generation_steps[0] and generation_steps[1].startswith("logits_to_keep")
    generation_ops = {node.op_type for node in onnx.load(generation_target / "model.onnx", load_external_data=False).graph.node}
    assert {"GroupQueryAttention", "MatMulNBits", "Slice"} <= generation_ops


def test_qa_int8_recipe_quantizes(tiny_qa_dir):
    from optimize.quantize.recipes import named_recipe
    from tests.tiny import tiny_preset

    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-int8")
    target = build_onnx(preset, "optimized", recipe=named_recipe("qa", "int8"), evaluate=False)
    assert read_manifest(target)["steps"][-1].startswith("quantize-dynamic-int8 (per_channel=True")
    ops = {node.op_type for node in onnx.load(target / "model.onnx").graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops


def test_onnx_runner_agrees_with_torch_runner_on_qa(built_presets, tiny_qa_dir):
    preset = built_presets["qa"]
    baseline = load_runner("qa", "baseline", "torch", tiny_qa_dir)
    optimized = load_runner("qa", "optimized", "onnxruntime", preset.built_dir("optimized"))
    context = "The first little pig was very lazy. The second little pig worked a little bit harder."
    windows = qa.preprocess(baseline.tokenizer, "Who worked harder?", context, baseline.qa_config)
    torch_start, torch_end = baseline.qa_logits(windows.inputs)
    ort_start, ort_end = optimized.qa_logits(windows.inputs)
    assert ort_start.shape == torch_start.shape
    assert np.corrcoef(ort_start.ravel(), torch_start.ravel())[0, 1] > 0.99  # INT8: close, not equal
    assert qa.answer(optimized, "Who worked harder?", context)["latency_ms"]["total"] > 0


def test_onnx_generation_runs_the_decoder_with_past_key_values(built_presets, tiny_llama_dir):
    preset = built_presets["generation"]
    target = preset.built_dir("optimized")
    names = {i.name for i in onnx.load(target / "model.onnx", load_external_data=False).graph.input}
    assert any(name.startswith("past_key_values") for name in names)
    optimized = load_runner("generation", "optimized", "onnxruntime", target)
    result = generation.generate(optimized, "Hello there", 6)
    assert result["new_tokens"] == 6 and result["ttft_ms"] > 0 and result["tokens_per_s"] > 0


def test_up_to_date_build_is_skipped_and_force_rebuilds(built_presets):
    preset = built_presets["qa"]
    messages = []
    build_onnx(preset, "optimized", evaluate=False, progress=messages.append)
    assert messages == [f"{preset.name}/optimized: up to date, skipped"]
    before = read_manifest(preset.built_dir("optimized"))["created"]
    messages.clear()
    build_onnx(preset, "optimized", evaluate=False, force=True, progress=messages.append)
    assert any("exporting" in m for m in messages)
    assert json.loads((preset.built_dir("optimized") / "manifest.json").read_text())["created"] >= before
    assert not preset.built_dir("optimized").with_name("optimized.partial").exists()


def test_a_moved_checkout_keeps_its_builds_and_changed_weights_are_built_again(tiny_qa_dir, tmp_path):
    """The manifest recorded the source's absolute path and compared it: a checkout moved or copied elsewhere rebuilt
    every variant. The source's fingerprint says which weights; only other weights are built again."""
    import shutil

    from tests.tiny import tiny_preset, tiny_qa

    here = shutil.copytree(tiny_qa_dir, tmp_path / "here" / "model")
    build_onnx(tiny_preset("qa", here, name="tiny-qa-moved"), "optimized", evaluate=False)
    moved = (tmp_path / "here").rename(tmp_path / "moved") / "model"
    messages = []
    build_onnx(tiny_preset("qa", moved, name="tiny-qa-moved"), "optimized", evaluate=False, progress=messages.append)
    assert messages == ["tiny-qa-moved/optimized: up to date, skipped"]
    shutil.copy(tiny_qa(tmp_path / "retrained", seed=7) / "model.safetensors", moved / "model.safetensors")
    messages.clear()
    build_onnx(tiny_preset("qa", moved, name="tiny-qa-moved"), "optimized", evaluate=False, progress=messages.append)
    assert any("exporting" in m for m in messages)


def test_a_build_published_with_a_missed_gate_does_not_pass_for_a_strict_one(tiny_qa_dir, monkeypatch):
    """`--allow-missed-gates` publishes a variant that missed its gate; a later build without it must measure
    again and fail, not call the lenient build "up to date" (a lenient rebuild still skips it)."""
    from optimize.evaluate import accuracy
    from optimize.evaluate.gates import GateFailed
    from optimize.quantize.recipes import named_recipe
    from tests.tiny import tiny_preset

    def five_points_under(*_args, **_kwargs) -> dict:
        return {"validation_f1": 50.0, "reference_validation_f1": 55.0, "validation_forced_f1": 60.0,
                "reference_validation_forced_f1": 65.0, "validation_agreement_pct": 80.0}

    monkeypatch.setattr(accuracy, "measure", five_points_under)
    preset, recipe = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-lenient"), named_recipe("qa", "fp32")
    built = build_onnx(preset, "optimized", recipe=recipe, strict=False)
    assert read_manifest(built)["metrics"]["gates_missed"]
    messages = []
    build_onnx(preset, "optimized", recipe=recipe, strict=False, progress=messages.append)
    assert messages == [f"{preset.name}/optimized: up to date, skipped"]
    messages.clear()
    with pytest.raises(GateFailed):
        build_onnx(preset, "optimized", recipe=recipe, progress=messages.append)
    assert not any("up to date" in message for message in messages) and any("exporting" in m for m in messages)


@requires_squad()
def test_a_pruned_model_recovered_on_your_data_is_built_again_when_the_data_changes(tiny_qa_dir, tmp_path):
    """`build --model … --data FILE` recorded the file's path only: an edited FILE left `pruned` "up to date". And a
    file of fewer than twelve articles failed (IndexError): recovery read the dev file's split, not every article.
    The manifest says how many steps recovery took (it said the budget asked, a fifth more than it ran)."""
    import torch

    from models.catalog import PruneSpec, Source, Variant
    from optimize.build import build_variant
    from optimize.evaluate import squad
    from tests.tiny import tiny_preset

    data = tmp_path / "mine.json"
    data.write_text(json.dumps({"version": "v2.0", "data": squad.load_articles(squad.DEFAULT_SQUAD_PATH)[:3]}))
    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-your-data")
    pruned = Variant("pruned", "torch", Source("built"), built_from="baseline",
                     prune=PruneSpec(recovery_steps=3, data=str(data)))
    preset = replace(preset, variants=(*preset.variants, pruned))
    steps = []
    real_step = torch.optim.AdamW.step
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.optim.AdamW, "step", lambda self, *args, **kwargs: steps.append(1) or real_step(self, *args, **kwargs))
        built = build_variant(preset, "pruned", evaluate=False, progress=lambda _message: None)
    assert read_manifest(built)["steps"][1] == f"distill from baseline ({len(steps)} steps)", (steps, read_manifest(built)["steps"])
    messages = []
    build_variant(preset, "pruned", evaluate=False, progress=messages.append)
    assert messages == [f"{preset.name}/pruned: up to date, skipped"]
    data.write_text(json.dumps(json.loads(data.read_text()), indent=1))  # the same questions, other bytes: edited
    messages.clear()
    build_variant(preset, "pruned", evaluate=False, progress=messages.append)
    assert any("structured pruning" in message for message in messages), messages


def test_onnx_decoder_emits_the_same_greedy_tokens_as_pytorch(tmp_path):
    """models/decoding.py decodes ONNX decoders itself (IO binding, no transformers generate loop):
    on an fp32 build it must produce exactly PyTorch's greedy tokens, through the streamer too,
    decoding into one pre-allocated key/value buffer per layer (GroupQueryAttention shares it),
    from the cached key/values of the chat template's fixed start."""
    from optimize.quantize.recipes import OnnxRecipe
    from tests.tiny import tiny_llama, tiny_preset

    tiny_llama_dir = tiny_llama(tmp_path / "varied", init_range=0.2)  # tokens that depend on the prompt
    preset = tiny_preset("generation", tiny_llama_dir, name="tiny-generation-fp32")
    target = build_onnx(preset, "optimized", recipe=OnnxRecipe(quantize=False, exporter="genai-builder"), evaluate=False)
    assert len(onnx.load(target / "model.onnx", load_external_data=False).graph.node) < 200  # fused
    onnx_runner = load_runner("generation", "optimized", "onnxruntime", target)
    torch_runner = load_runner("generation", "baseline", "torch", tiny_llama_dir)
    assert onnx_runner.model.decoder.shares_kv_buffer
    assert len(onnx_runner.model.decoder.prefix[0]) == len(generation.template_prefix(torch_runner.tokenizer)) > 1
    continuations = set()
    for prompt in ("Hello there", "The quick brown fox", "a b c d e f g"):
        ids = generation.preprocess(torch_runner.tokenizer, prompt)
        expected = torch_runner.generate(ids, 12)
        assert onnx_runner.generate(ids, 12).tolist() == expected.tolist()
        continuations.add(tuple(expected[0, ids.shape[1]:].tolist()))
        np.testing.assert_allclose(onnx_runner.model(input_ids=ids).logits, torch_runner.model(ids).logits.detach(),
                                   atol=1e-3)
    assert len(continuations) == 3
    streamed, expected = generation.generate(onnx_runner, "Hello there", 12), generation.generate(torch_runner, "Hello there", 12)
    assert streamed["text"] == expected["text"] and streamed["new_tokens"] == expected["new_tokens"]


def test_smoothquant_moves_activation_range_into_weights_without_changing_the_model(tiny_llama_dir, tmp_path):
    """optimize/quantize/smooth.py rescales channels between RMSNorm/up/v and the MLP and attention
    weights: the fp32 model must compute the same logits, while the largest input channels shrink."""
    import torch
    from transformers import AutoTokenizer

    from models.runners import load_causal_lm
    from optimize.export.onnx import save_model_like
    from optimize.quantize.smooth import smooth_attention, smooth_mlps

    original = load_causal_lm(tiny_llama_dir)
    with torch.no_grad():  # outlier channels, as real decoders have
        original.model.layers[0].post_attention_layernorm.weight[3] = 40.0
        original.model.layers[0].input_layernorm.weight[5] = 40.0
    save_model_like(original, tiny_llama_dir, tmp_path / "outlier")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "outlier")
    smoothed = smooth_attention(smooth_mlps(load_causal_lm(tmp_path / "outlier"), tokenizer), tokenizer)  # in place
    ids = generation.preprocess(tokenizer, "Hello there friend")
    with torch.inference_mode():
        np.testing.assert_allclose(smoothed(ids).logits, original(ids).logits, atol=1e-4)
    gains = smoothed.model.layers[0].post_attention_layernorm.weight.abs()
    assert gains[3] / gains.median() < 40.0 / original.model.layers[0].post_attention_layernorm.weight.abs().median()
    gains = smoothed.model.layers[0].input_layernorm.weight.abs()
    assert gains[5] / gains.median() < 40.0 / original.model.layers[0].input_layernorm.weight.abs().median()


@pytest.mark.parametrize("model_type, overrides", [("qwen2", {}), ("llama", {"attention_bias": True, "mlp_bias": True})])
def test_smoothquant_keeps_the_model_where_projections_have_biases(tmp_path, model_type, overrides):
    """A row that carries 1/s carries its bias too (Qwen2's v_proj, a Llama with biases): in fp32 nothing changes."""
    import torch
    from transformers import AutoTokenizer

    from models.runners import load_causal_lm
    from optimize.quantize.smooth import smooth_attention, smooth_mlps
    from tests.tiny import tiny_decoder

    directory = tiny_decoder(tmp_path / model_type, model_type, **overrides)
    original, tokenizer = load_causal_lm(directory), AutoTokenizer.from_pretrained(directory)
    biases = {name: torch.randn_like(b) for name, b in original.named_parameters() if name.endswith(".bias")}
    assert any(".v_proj." in name for name in biases)
    with torch.no_grad():
        for name, parameter in original.named_parameters():
            if name in biases:
                parameter.copy_(biases[name])
    smoothed = load_causal_lm(directory)
    smoothed.load_state_dict(original.state_dict())
    smoothed = smooth_attention(smooth_mlps(smoothed, tokenizer), tokenizer)
    ids = generation.preprocess(tokenizer, "Hello there friend")
    with torch.inference_mode():
        np.testing.assert_allclose(smoothed(ids).logits, original(ids).logits, atol=1e-4)


@pytest.mark.parametrize("block_size", [16, 128])  # 128: longer than the tiny model's rows
def test_int8_sensitive_layers_keep_fp32_attention(tmp_path, block_size):
    """optimize/prune/sensitivity.py emulates INT8 attention one layer at a time, in the recipe's blocks: a
    layer whose attention input has an outlier channel (its int8 blocks lose the rest) must be the one the
    build keeps in fp32, while the other layer's attention goes INT8."""
    import torch

    from models.runners import load_causal_lm
    from optimize.export.onnx import save_model_like
    from optimize.quantize.recipes import OnnxRecipe
    from tests.tiny import tiny_llama, tiny_preset

    source = tiny_llama(tmp_path / "source", init_range=0.02)  # weights small beside the outlier below
    model = load_causal_lm(source)
    with torch.no_grad():
        model.model.layers[1].input_layernorm.weight[5] = 300.0
    save_model_like(model, source, tmp_path / "sensitive")
    preset = tiny_preset("generation", tmp_path / "sensitive", name="tiny-generation-sensitive")
    recipe = OnnxRecipe(weight_only_bits=8, block_size=block_size, exporter="genai-builder", fp32_attention_share=0.5)
    target = build_onnx(preset, "optimized", recipe=recipe, evaluate=False)
    graph = onnx.load(target / "model.onnx", load_external_data=False).graph
    ops = {node.name.rsplit("/", 1)[0]: node.op_type for node in graph.node if node.op_type.startswith("MatMul")}
    assert ops["/model/layers.1/attn/qkv_proj"] == ops["/model/layers.1/attn/o_proj"] == "MatMul"
    assert ops["/model/layers.0/attn/qkv_proj"] == ops["/model/layers.0/attn/o_proj"] == "MatMulNBits"
    assert ops["/model/layers.1/mlp/up_proj"] == "MatMulNBits"


def test_reference_continuations_batched_in_pytorch_are_the_one_at_a_time_tokens(tmp_path):
    """The build's reference side decodes PyTorch prompts in left-padded batches (minutes saved on
    a clean build); the tokens must be what one prompt at a time gives, stopping at end of turn."""
    from optimize.evaluate.accuracy import CONTINUATION_TOKENS, greedy_continuations
    from optimize.evaluate.heldout import PROMPTS
    from tests.tiny import tiny_llama

    runner = load_runner("generation", "baseline", "torch", tiny_llama(tmp_path / "varied", init_range=0.2))
    runner.model.generation_config.eos_token_id = [runner.tokenizer.eos_token_id, 5]  # end-of-turn tokens that occur
    batched = greedy_continuations(runner, batch_size=8)
    one_at_a_time = []
    for prompt in PROMPTS[:16]:
        ids = generation.preprocess(runner.tokenizer, prompt)
        one_at_a_time.append(runner.generate(ids, CONTINUATION_TOKENS)[:, : ids.shape[1] + CONTINUATION_TOKENS])
    assert [s.tolist() for s in batched[:16]] == [s.tolist() for s in one_at_a_time]
    new_tokens = [s.shape[1] - generation.preprocess(runner.tokenizer, p).shape[1] for s, p in zip(batched, PROMPTS)]
    assert len(batched) == len(PROMPTS) and min(new_tokens) < CONTINUATION_TOKENS == max(new_tokens)  # some stopped early


@requires_squad()
def test_a_generation_build_is_measured_against_its_source_with_intervals(tiny_llama_dir, tmp_path):
    """The measure every default decoder build goes through, on a tiny model: its promise, agreement,
    perplexity ratio with a paragraph-bootstrap interval, the instruction-set score, and reading
    comprehension with its interval and paired difference, recorded per model so that a rebuild of
    the same bytes reads it from the record instead of measuring again."""
    from optimize.quantize.recipes import OnnxRecipe
    from tests.tiny import tiny_preset

    preset = tiny_preset("generation", tiny_llama_dir, name="tiny-generation-measured")
    built = build_onnx(preset, "optimized", recipe=OnnxRecipe(quantize=False, exporter="genai-builder"), strict=False)
    metrics = read_manifest(built)["metrics"]
    assert metrics["promise"] == "exact" and metrics["agreement_pct"] > 99, metrics
    low, high = metrics["perplexity_ratio_ci95"]
    assert low <= metrics["perplexity_ratio"] <= high and abs(metrics["perplexity_ratio"] - 1) < 0.01, metrics
    assert "instruction_pct" in metrics and metrics["summary"].startswith("exact: reading F1"), metrics
    assert metrics["reading_questions"] == 10 and "reading_recorded" not in metrics, metrics
    low, high = metrics["reading_f1_ci95"]
    assert low <= metrics["reading_f1"] <= high and metrics["reading_f1_delta"]["items"] == 10, metrics

    rebuilt = read_manifest(build_onnx(preset, "optimized", recipe=OnnxRecipe(quantize=False, exporter="genai-builder"),
                                       strict=False, force=True))["metrics"]
    assert "reading_recorded" in rebuilt and rebuilt["reading_f1"] == metrics["reading_f1"], rebuilt
    # a measured build serves a request not to measure: `--no-eval` once rebuilt it and dropped its measures
    messages = []
    kept = build_onnx(preset, "optimized", recipe=OnnxRecipe(quantize=False, exporter="genai-builder"), evaluate=False,
                      progress=messages.append)
    assert messages == [f"{preset.name}/optimized: up to date, skipped"] and read_manifest(kept)["metrics"] == rebuilt


@requires_squad()
def test_a_rung_recorded_as_rejected_for_the_same_source_is_not_measured_again(tiny_qa_dir):
    """The ladder's record (optimize/quantize/ladder_record.py): a recorded rejection of rung 1 for this
    source, gated on the same data, skips it (one gated on other data does not), and the manifest lists it as recorded, not re-measured; `full_ladder` measures
    every rung again and rewrites the record with what it found."""
    from dataclasses import asdict

    from models.manifest import source_fingerprint
    from optimize.evaluate.gates import gate_inputs
    from optimize.quantize import ladder_record
    from optimize.quantize.recipes import recipe_ladder
    from tests.tiny import tiny_preset

    preset = tiny_preset("qa", tiny_qa_dir, name="tiny-qa-ladder-record")
    first = json.loads(json.dumps(asdict(recipe_ladder("qa")[0])))
    missed = "tiny-qa-ladder-record/optimized missed its accuracy gate: held-out F1 9.0 is 2.0 below its source"
    gated_on = gate_inputs("qa")["gated_on"]
    rejection = [{"recipe": first, "missed": missed, "gates_missed": ["F1 2.0 below"]}]
    ladder_record.record(preset.name, "optimized", source_fingerprint(tiny_qa_dir), rejection, "a test CPU", "other articles")
    assert ladder_record.known_rejections(preset.name, "optimized", source_fingerprint(tiny_qa_dir), gated_on) == {}
    ladder_record.record(preset.name, "optimized", source_fingerprint(tiny_qa_dir), rejection, "a test CPU", gated_on)

    metrics = read_manifest(build_onnx(preset, "optimized"))["metrics"]
    [skipped] = metrics["rejected_recipes"]
    assert skipped["recipe"] == first and "not measured again" in skipped["missed"] and "a test CPU" in skipped["missed"]
    assert "agreement_pct" in metrics  # the next rung was measured and gated

    metrics = read_manifest(build_onnx(preset, "optimized", force=True, full_ladder=True))["metrics"]
    assert all("not measured again" not in r["missed"] for r in metrics.get("rejected_recipes", []))
    recorded = ladder_record.known_rejections(preset.name, "optimized", source_fingerprint(tiny_qa_dir), gated_on)
    assert {r["missed"] for r in recorded.values()} == {r["missed"] for r in metrics.get("rejected_recipes", [])}


def test_a_rung_new_to_the_ladder_measured_and_rejected_joins_the_record_beside_the_older_ones(tmp_path, monkeypatch):
    """A build that skipped the recorded rungs and measured a new one adds its rejection, dated, keeping the
    recorded ones with their own dates; for other gated data it starts the record again."""
    from models.catalog import PRESETS
    from optimize.quantize import ladder_record

    monkeypatch.setattr(ladder_record, "RECORD", tmp_path / "ladder_record.json")
    preset = PRESETS[0].name
    older = {"recipe": {"quantize": True}, "missed": "perplexity 1.13x"}
    ladder_record.record(preset, "optimized", "sha", [older], "an older CPU", "validation")
    [skipped] = ladder_record.known_rejections(preset, "optimized", "sha", "validation").values()
    new = {"recipe": {"quantize": True, "fold_minimums": True}, "missed": "perplexity 1.12x"}
    ladder_record.add(preset, "optimized", "sha", [skipped, new], "a newer CPU", "validation")
    known = ladder_record.known_rejections(preset, "optimized", "sha", "validation")
    assert [r["missed"] for r in known.values()] == ["perplexity 1.13x", "perplexity 1.12x"]
    assert "an older CPU" in known[ladder_record.canonical(older["recipe"])]["recorded"]
    assert "a newer CPU" in known[ladder_record.canonical(new["recipe"])]["recorded"]
    ladder_record.add(preset, "optimized", "sha", [new], "a newer CPU", "other data")
    assert list(ladder_record.known_rejections(preset, "optimized", "sha", "other data")) == [ladder_record.canonical(new["recipe"])]


def test_a_ladder_record_for_other_source_weights_is_not_used_and_says_how_to_refresh_it(tmp_path, monkeypatch, caplog):
    """A retrained source makes its recorded rejections stale: they are ignored (every rung is
    measured) and the build says so, instead of silently spending the time on every fresh machine."""
    from models.catalog import PRESETS
    from optimize.quantize import ladder_record

    record = tmp_path / "ladder_record.json"
    monkeypatch.setattr(ladder_record, "RECORD", record)
    preset = PRESETS[0].name
    ladder_record.record(preset, "optimized", "old-sha", [{"recipe": {"quantize": True}, "missed": "F1 2.0 below"}], "a CPU")
    assert ladder_record.known_rejections(preset, "optimized", "old-sha")
    with caplog.at_level("WARNING", logger="optimize.quantize.ladder_record"):
        assert ladder_record.known_rejections(preset, "optimized", "new-sha") == {}
    assert "other source weights" in caplog.text and "--full-ladder" in caplog.text


def test_a_ladder_record_from_another_onnx_runtime_is_not_used(tmp_path, monkeypatch, caplog):
    """A rung rejected under one ONNX Runtime's INT8 kernels may pass under another's: a record from another version
    (or one that names none) is not used, and the build says why; the next record names this version."""
    import json

    import onnxruntime

    from models.catalog import PRESETS
    from optimize.quantize import ladder_record

    record = tmp_path / "ladder_record.json"
    monkeypatch.setattr(ladder_record, "RECORD", record)
    preset = PRESETS[0].name
    ladder_record.record(preset, "optimized", "sha", [{"recipe": {"quantize": True}, "missed": "F1 2.0 below"}], "a CPU")
    assert ladder_record.known_rejections(preset, "optimized", "sha")
    [entry] = json.loads(record.read_text()).values()
    assert entry["onnxruntime"] == onnxruntime.__version__
    for other in ("0.9.0", None):
        entries = {key: {k: v for k, v in {**value, "onnxruntime": other}.items() if v is not None}
                   for key, value in json.loads(record.read_text()).items()}
        record.write_text(json.dumps(entries))
        with caplog.at_level("WARNING", logger="optimize.quantize.ladder_record"):
            assert ladder_record.known_rejections(preset, "optimized", "sha") == {}
        assert f"ONNX Runtime {other or '(unnamed)'}, this is {onnxruntime.__version__}" in caplog.text


def test_a_committed_reference_measurement_is_read_instead_of_measuring_the_source(tiny_qa_dir, tmp_path, monkeypatch):
    """The defaults' source-side measures ship in optimize/evaluate/reference_record/ under the
    source's fingerprint: found there, the source is not loaded or measured; another source is."""
    from models.manifest import source_fingerprint
    from optimize.evaluate import records

    monkeypatch.setattr(records, "REFERENCE_RECORD", tmp_path / "record")
    (tmp_path / "record").mkdir()
    (tmp_path / "record" / f"probe-{source_fingerprint(tiny_qa_dir)[:16]}.json").write_text('{"recorded": true}')
    measured = []
    assert records.reference_cache(tiny_qa_dir, "probe", lambda: measured.append(1) or {}) == {"recorded": True}
    assert records.reference_cache(tmp_path / "record", "probe", lambda: measured.append(1) or {"fresh": 1}) == {"fresh": 1}
    assert measured == [1]


def test_a_reference_read_from_the_committed_record_says_when_and_where_it_was_measured(tiny_qa_dir, tmp_path, monkeypatch):
    """Issue 49: a measure read from a record is shown with its date and CPU class. The committed record's stamp
    travels in reference_record/measured.json; a measure made here stamps itself in the cache and is "measured here"."""
    from datetime import date

    from models.machine import cpu_name
    from models.manifest import source_fingerprint
    from optimize.evaluate import records

    monkeypatch.setenv("SHOWDOWN_ARTIFACTS", str(tmp_path / "artifacts"))  # its cache entries stay its own
    monkeypatch.setattr(records, "REFERENCE_RECORD", tmp_path / "record")
    (tmp_path / "record").mkdir()
    name = f"probe-{source_fingerprint(tiny_qa_dir)[:16]}.json"
    (tmp_path / "record" / name).write_text("{}")
    assert records.reference_origin(tiny_qa_dir, "probe") == \
        "read from the committed reference record (measured date and CPU not recorded)"
    (tmp_path / "record" / records.STAMPS).write_text(json.dumps({name: "2026-11-27, AMD EPYC (avx512-vnni)"}))
    assert records.reference_recorded(tiny_qa_dir, "probe") == "2026-11-27, AMD EPYC (avx512-vnni)"
    assert records.reference_origin(tiny_qa_dir, "probe") == \
        "read from the committed reference record (measured 2026-11-27, AMD EPYC (avx512-vnni))"
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text("{}")
    records.reference_cache(other, "probe", lambda: {"fresh": 1})
    stamps = json.loads((records.artifacts_root() / "reference-cache" / records.STAMPS).read_text())
    assert stamps[f"probe-{source_fingerprint(other)[:16]}.json"].startswith(f"{date.today()}, {cpu_name()}")
    assert records.reference_recorded(other, "probe") is None and records.reference_origin(other, "probe") == "measured here"


def test_every_committed_reference_record_says_when_and_on_which_cpu_it_was_measured():
    """A record copied into reference_record/ without its line in measured.json would be shown as undated."""
    from optimize.evaluate import records

    stamps = json.loads((records.REFERENCE_RECORD / records.STAMPS).read_text())
    committed = {p.name for p in records.REFERENCE_RECORD.glob("*.json")} - {records.STAMPS}
    assert committed and committed == set(stamps), "add the copied files' lines from <artifacts>/reference-cache/measured.json"


def test_a_recipe_field_added_later_keeps_naming_the_rungs_recorded_before_it():
    """`minimum_bits` and `fold_minimums` came after the committed ladder records: at their defaults a rung keeps its
    recorded key."""
    from dataclasses import asdict, replace

    from optimize.quantize.ladder_record import canonical
    from optimize.quantize.recipes import GGUF_Q4

    before = {k: v for k, v in asdict(GGUF_Q4).items() if k not in ("minimum_bits", "fold_minimums")}
    assert canonical(asdict(GGUF_Q4)) == canonical(before)
    assert canonical(asdict(replace(GGUF_Q4, minimum_bits=8))) != canonical(before)
    assert canonical(asdict(replace(GGUF_Q4, minimum_bits=8, fold_minimums=True))) != canonical(
        asdict(replace(GGUF_Q4, minimum_bits=8)))


@pytest.mark.parametrize("flags, message", [
    (["--task", "qa", "--preset", "generation-smollm2", "--variant", "baseline"], "is a generation preset, not a qa one"),
    (["--task", "qa", "--variant", "baseline", "--reading-questions", "-5", "--name", "x"],
     "only with --model: --name, --reading-questions"),
    (["--task", "qa", "--variant", "baseline", "--recipe", "int8"], "baseline is not built with a recipe"),
    (["--task", "generation", "--variant", "pruned-optimized", "--recipe", "int8", "--full-ladder"],
     "--full-ladder measures the default ladder"),  # had replaced the committed ladder record with one rung's
    (["--task", "qa", "--variant", "baseline", "--variant", "Optimized"], "Unknown variant 'Optimized'"),
])
def test_a_catalog_build_refuses_what_it_cannot_do_before_building_anything(flags, message, capsys):
    """Each had been ignored (the other task's preset built under --task qa; --model's flags, even invalid ones), or
    found only after the variants before it had built."""
    from optimize.__main__ import main

    assert main(["build", *flags, "--no-eval"] if "--full-ladder" not in flags else ["build", *flags]) == 2
    printed = capsys.readouterr()
    assert message in printed.err and printed.out == "", printed


def test_layer_norms_are_kept_apart_only_where_the_fused_kernel_is_clearly_slower():
    from optimize.export.layer_norm import decision

    slow, slow_line = decision({"SkipLayerNormalization": 0.35, "Add + LayerNormalization": 0.06}, 384)
    close, close_line = decision({"SkipLayerNormalization": 0.08, "Add + LayerNormalization": 0.06}, 384)
    assert slow == {"config_entries": {"optimization.disable_specified_optimizers": "SkipLayerNormFusion"}}
    assert slow_line.startswith("residual layer norms kept apart")
    assert close == {} and "fused into" in close_line and "0.080 ms" in close_line


def test_a_variant_is_served_with_the_session_settings_its_build_measured(built_presets, tmp_path):
    """A build that keeps the layer norms apart writes session.json; every session of that variant must apply it,
    or it would be served (and timed) with the kernel the build measured as slower, and compute other answers."""
    import shutil

    from optimize.export.layer_norm import KEPT_APART

    built = built_presets["qa"].built_dir("optimized")
    apart, fused = shutil.copytree(built, tmp_path / "apart"), shutil.copytree(built, tmp_path / "fused")
    (apart / "session.json").write_text(json.dumps(KEPT_APART))
    (fused / "session.json").unlink(missing_ok=True)  # the tiny build's own choice is this machine's
    def disabled(folder) -> str:
        options = load_runner("qa", "optimized", "onnxruntime", folder).model.session.get_session_options()
        try:
            return options.get_session_config_entry("optimization.disable_specified_optimizers")
        except RuntimeError:  # onnxruntime's answer for a key never set
            return ""

    assert disabled(apart) == "SkipLayerNormFusion" and disabled(fused) == ""


def test_an_int8_rung_that_keeps_bert_layers_in_fp32_does_not_apply_to_other_encoders(tmp_path):
    """DistilBERT's and ALBERT's FFN MatMuls have other names: the rungs that keep BERT's in fp32 quantized every
    MatMul while their manifest said "fp32: ffn_output". They now say they do not apply, and the ladder goes on."""
    from optimize.export.onnx import export
    from optimize.prune.encoder_layout import UnsupportedArchitecture
    from optimize.quantize.ort import quantize_dynamic
    from optimize.quantize.recipes import default_recipe
    from tests.tiny import tiny_encoder

    exported = export(tiny_encoder(tmp_path / "distilbert", "distilbert"), tmp_path / "export", "qa", None).parent
    with pytest.raises(UnsupportedArchitecture, match="does not apply"):
        quantize_dynamic(exported, tmp_path / "kept", default_recipe("qa"))
