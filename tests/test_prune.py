"""Structured pruning removes heads and FFN neurons for real and survives save/load and ONNX."""
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models import qa
from models.runners import load_runner
from optimize.build import build_onnx
from optimize.prune.encoder import PruneConfig, importance, prune, with_fused_attention
from tests.conftest import requires_squad
from tests.tiny import tiny_llama, tiny_preset


def features(tokenizer, n=8):
    context = "The second little pig worked a little bit harder and built his house out of sticks."
    encoded = tokenizer(["Who worked harder?"] * n, [context] * n)
    return [{"input_ids": ids, "token_type_ids": types, "start_positions": 10, "end_positions": 13}
            for ids, types in zip(encoded["input_ids"], encoded["token_type_ids"])]


def test_pruned_model_is_smaller_dense_and_reloads(tiny_qa_dir, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir, attn_implementation="eager")
    before = sum(p.numel() for p in model.bert.encoder.parameters())
    config = PruneConfig(heads_kept=2, ffn_kept=32, calibration_windows=8, batch_size=4)
    heads, neurons = importance(model, features(tokenizer), tokenizer.pad_token_id, config)
    assert heads.shape == (2, 4) and neurons.shape == (2, 64) and heads.sum() > 0
    prune(model, heads, neurons, config)
    after = sum(p.numel() for p in model.bert.encoder.parameters())
    assert after < 0.6 * before
    layer = model.bert.encoder.layer[0]
    assert layer.attention.self.query.out_features == 2 * 8 and layer.intermediate.dense.out_features == 32
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    (tmp_path / "qa_config.json").write_text((tiny_qa_dir / "qa_config.json").read_text())
    reloaded = AutoModelForQuestionAnswering.from_pretrained(tmp_path).eval()
    inputs = tokenizer("Who?", "The pig.", return_tensors="pt")
    with torch.inference_mode():
        np.testing.assert_allclose(reloaded(**inputs).start_logits, model.eval()(**inputs).start_logits, atol=1e-5)

    preset = tiny_preset("qa", tmp_path, name="tiny-qa-pruned")
    target = build_onnx(preset, "optimized", evaluate=False)
    onnx_runner = load_runner("qa", "optimized", "onnxruntime", target)
    torch_runner = load_runner("qa", "baseline", "torch", tmp_path)
    windows = qa.preprocess(torch_runner.tokenizer, "Who?", "The second pig worked.", torch_runner.qa_config)
    torch_start, _ = torch_runner.qa_logits(windows.inputs)
    onnx_start, _ = onnx_runner.qa_logits(windows.inputs)
    assert np.corrcoef(torch_start.ravel(), onnx_start.ravel())[0, 1] > 0.95


def test_recovery_attention_is_the_fused_kernel_with_the_same_weights(tiny_qa_dir):
    """Distillation trains the pruned student behind SDPA (eager attention with dropout had cost most of a CPU
    step): the same logits as the eager pruned model, the dropout asked for, the training mode kept."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir, attn_implementation="eager")
    config = PruneConfig(heads_kept=2, ffn_kept=32, calibration_windows=8, batch_size=4)
    prune(model, *importance(model, features(tokenizer), tokenizer.pad_token_id, config), config)
    fused = with_fused_attention(model.train(), attention_dropout=0.0)
    assert fused.training and fused.config._attn_implementation == "sdpa"
    assert fused.config.attention_probs_dropout_prob == 0.0 and model.config.attention_probs_dropout_prob == 0.1
    inputs = tokenizer("Who?", "The second pig worked harder.", return_tensors="pt")
    with torch.inference_mode():
        torch.testing.assert_close(fused.eval()(**inputs).start_logits, model.eval()(**inputs).start_logits)
    assert with_fused_attention(model).config.attention_probs_dropout_prob == 0.1  # None keeps the model's


def test_encoder_layer_dropping_keeps_pruned_heads_and_reloads(tiny_qa_dir, tmp_path):
    from optimize.prune.encoder import drop_layers

    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir, attn_implementation="eager")
    config = PruneConfig(heads_kept=2, ffn_kept=32, layers_dropped=1, calibration_windows=8, batch_size=4)
    heads, neurons = importance(model, features(tokenizer), tokenizer.pad_token_id, config)
    drop_layers(prune(model, heads, neurons, config), features(tokenizer), tokenizer.pad_token_id, config)
    assert len(model.bert.encoder.layer) == model.config.num_hidden_layers == 1
    assert set(model.config.pruned_heads) == {0}
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForQuestionAnswering.from_pretrained(tmp_path).eval()
    inputs = tokenizer("Who?", "The pig.", return_tensors="pt")
    with torch.inference_mode():
        np.testing.assert_allclose(reloaded(**inputs).start_logits, model.eval()(**inputs).start_logits, atol=1e-5)


def test_decoder_pruning_drops_layers_and_neurons_and_still_generates(tiny_llama_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from models import generation
    from optimize.prune.decoder import DecoderPruneConfig
    from optimize.prune.decoder import importance as decoder_importance
    from optimize.prune.decoder import prune as decoder_prune

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    texts = [tokenizer("the quick brown fox jumps over the lazy dog", return_tensors="pt").input_ids]
    # four layers so that one can go (the first and last are never dropped)
    deeper = tiny_llama(tmp_path / "deep", layers=4)
    model = AutoModelForCausalLM.from_pretrained(deeper).eval()
    influence, neurons = decoder_importance(model, texts)
    assert influence.shape == (4,) and neurons.shape == (4, 128)
    model, dropped = decoder_prune(model, influence, neurons, DecoderPruneConfig(layers_dropped=1, ffn_kept=64))
    assert len(model.model.layers) == 3 and dropped and dropped[0] not in (0, 3)
    assert model.model.layers[0].mlp.down_proj.in_features == 64
    model.save_pretrained(tmp_path / "pruned")
    tokenizer.save_pretrained(tmp_path / "pruned")
    runner = load_runner("generation", "pruned", "torch", tmp_path / "pruned")
    assert generation.generate(runner, "Hello", 5)["new_tokens"] == 5


def test_decoder_recovery_delta_reassembles_the_recovered_model(tmp_path):
    """LoRA recovery trains, merges, and the committed plan + fp16 delta rebuild the same model
    from the unpruned baseline (what `build --variant pruned` does on a fresh clone)."""
    from transformers import AutoModelForCausalLM

    from optimize.prune import decoder
    from optimize.train import recover_decoder as recover

    baseline_dir = tiny_llama(tmp_path / "base", layers=4)
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    teacher = AutoModelForCausalLM.from_pretrained(baseline_dir).eval()
    student = AutoModelForCausalLM.from_pretrained(baseline_dir).eval()
    texts = [tokenizer(t, return_tensors="pt").input_ids for t in
             ("the quick brown fox jumps over the lazy dog", "a pig built a house of sticks", "hello there friend")]
    influence, neurons = decoder.importance(student, texts)
    dropped, kept = decoder.plan(influence, neurons, decoder.DecoderPruneConfig(layers_dropped=1, ffn_kept=64))
    decoder.prune_with_plan(student, dropped, kept)
    recover.add_lora(student, rank=4, alpha=8)
    trainable = sum(p.numel() for p in student.parameters() if p.requires_grad)
    assert 0 < trainable < 0.2 * sum(p.numel() for p in student.parameters())
    losses = recover.recover(student, teacher, texts, tokenizer.pad_token_id or 0,
                        recover.DecoderRecoveryConfig(steps=30, batch_size=2, learning_rate=1e-2))
    assert losses[-1] < losses[0]  # distillation moves the student toward the teacher
    delta = recover.merge_lora(student)
    recover.add_lora(student, rank=2, alpha=4)  # a second round on top (a lent GPU distils longer)
    recover.recover(student, teacher, texts, tokenizer.pad_token_id or 0, recover.DecoderRecoveryConfig(steps=5, batch_size=2, learning_rate=1e-2))
    delta = decoder.stack_deltas(delta, recover.merge_lora(student))
    assert delta["layers.0.mlp.down_proj.lora_A"].shape[0] == 6
    decoder.save_recovery(tmp_path / "recipe", dropped, kept, delta, {"note": "test"})
    rebuilt = AutoModelForCausalLM.from_pretrained(decoder.assemble(baseline_dir, tmp_path / "recipe", tmp_path / "out")).eval()
    ids = texts[0]
    with torch.inference_mode():
        np.testing.assert_allclose(rebuilt(ids).logits, student(ids).logits, atol=2e-2)
        assert not torch.allclose(rebuilt(ids).logits, teacher(ids).logits, atol=1e-3)
    assert len(rebuilt.model.layers) == 3


def test_a_stopped_recovery_continues_from_its_checkpoint_to_the_same_weights(tmp_path):
    """Hours of CPU recovery survive a stop: a run stopped after 3 of 7 steps and continued from its
    checkpoint ends on the same adapters and losses as an uninterrupted run; a checkpoint of another
    recovery is refused, not silently mixed in."""
    from transformers import AutoModelForCausalLM

    from optimize.prune import decoder
    from optimize.train import recover_decoder as recover

    baseline_dir = tiny_llama(tmp_path / "base", layers=3)
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    teacher = AutoModelForCausalLM.from_pretrained(baseline_dir).eval()
    texts = [tokenizer(t, return_tensors="pt").input_ids for t in
             ("the quick brown fox jumps over the lazy dog", "a pig built a house of sticks", "hello there friend")]
    config = recover.DecoderRecoveryConfig(steps=7, batch_size=2, learning_rate=1e-2, checkpoint_every=2)
    dropped, kept = decoder.plan(*decoder.importance(teacher, texts), decoder.DecoderPruneConfig(layers_dropped=1, ffn_kept=64))

    def student(seed: int = 0):
        torch.manual_seed(seed)  # another seed: another process's adapter initialisation
        model = AutoModelForCausalLM.from_pretrained(baseline_dir).eval()
        decoder.prune_with_plan(model, dropped, kept)
        recover.add_lora(model, rank=2, alpha=4)
        return model

    uninterrupted = student()
    expected = recover.recover(uninterrupted, teacher, texts, 0, config)
    checkpoint = tmp_path / "job" / "checkpoint.pt"
    stopped = student()
    assert len(recover.recover(stopped, teacher, texts, 0, config, checkpoint=checkpoint, stop_after=3)) == 3
    first_run_s = recover.checkpoint_seconds(checkpoint)
    assert first_run_s > 0
    continued = student(seed=123)  # the checkpoint replaces its adapters
    losses = recover.recover(continued, teacher, texts, 0, config, checkpoint=checkpoint)
    assert recover.checkpoint_seconds(checkpoint) > first_run_s  # the job's training time counts both runs
    assert losses == expected
    for (name, ours), (_, theirs) in zip(continued.named_parameters(), uninterrupted.named_parameters()):
        torch.testing.assert_close(ours, theirs, msg=name)
    with pytest.raises(ValueError, match="another recovery"):
        recover.recover(student(), teacher, texts, 0, recover.DecoderRecoveryConfig(steps=9, batch_size=2), checkpoint=checkpoint)


def test_fully_fine_tuned_decoder_is_committed_as_an_int8_delta_that_reassembles(tmp_path):
    """A lent GPU trains every block weight; the int8 row-scaled delta rebuilds what was measured."""
    from transformers import AutoModelForCausalLM

    from optimize.prune import decoder
    from optimize.train import recover_decoder as recover

    baseline_dir = tiny_llama(tmp_path / "base", layers=3, init_range=0.02)  # the logit tolerances below are for this scale
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    teacher = AutoModelForCausalLM.from_pretrained(baseline_dir).eval()
    student = AutoModelForCausalLM.from_pretrained(baseline_dir).eval()
    kept = {i: torch.arange(64) for i in range(2)}
    decoder.prune_with_plan(student, [1], kept)
    pruned_weights = {n: p.detach().clone() for n, p in student.model.layers.named_parameters()}
    student.requires_grad_(False)
    student.model.layers.requires_grad_(True)
    texts = [tokenizer(t, return_tensors="pt").input_ids for t in ("the pig built a house", "hello there friend")]
    losses = recover.recover(student, teacher, texts, tokenizer.pad_token_id or 0,
                        recover.DecoderRecoveryConfig(steps=8, batch_size=2, learning_rate=1e-2, hidden_weight=1.0), kept_layers=[0, 2])
    assert losses[-1] < losses[0]  # KL plus the kept layers' hidden-state error falls
    delta = decoder.full_delta(student, pruned_weights)
    assert delta["layers.0.mlp.down_proj.delta_int8"].dtype == torch.int8
    assert delta["layers.0.mlp.down_proj.delta_int8"].abs().max() == 127  # each row's largest move is its scale
    decoder.save_recovery(tmp_path / "recipe", [1], kept, delta, {"note": "test"})
    rebuilt = AutoModelForCausalLM.from_pretrained(decoder.assemble(baseline_dir, tmp_path / "recipe", tmp_path / "out")).eval()
    with torch.inference_mode():
        np.testing.assert_allclose(rebuilt(texts[0]).logits, student.eval()(texts[0]).logits, atol=1e-4)
        assert not torch.allclose(rebuilt.model.layers[0].mlp.down_proj.weight, pruned_weights["0.mlp.down_proj.weight"])


def test_globally_pruned_decoder_has_per_layer_widths_in_pytorch_and_onnx(tmp_path):
    """Ranking FFN neurons across layers leaves each layer its own width (multiples of 16). The
    narrow model reloads from disk, and the ONNX builds (built padded, then cut back) compute
    what it computes: fp32 to 1e-3, INT8 within MatMulNBits rounding."""
    import onnx
    from transformers import AutoModelForCausalLM

    from models import generation
    from optimize.prune import decoder
    from optimize.quantize.recipes import OnnxRecipe

    baseline_dir = tiny_llama(tmp_path / "base", layers=3, init_range=0.02)  # the logit tolerances below are for this scale
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    model = AutoModelForCausalLM.from_pretrained(baseline_dir).eval()
    _, neurons = decoder.importance(model, [tokenizer("the quick brown fox jumps over the lazy dog", return_tensors="pt").input_ids])
    neurons[1] *= 0.01  # a quiet middle layer: a global ranking takes most of its neurons
    dropped, kept = decoder.plan(torch.zeros(3), neurons, decoder.DecoderPruneConfig(layers_dropped=0, ffn_pruned_share=0.3))
    widths = decoder.ffn_widths(kept)
    assert dropped == [] and len(set(widths)) > 1 and all(w % decoder.FFN_BLOCK == 0 for w in widths)
    assert sum(widths) <= 0.7 * 3 * 128 + 3 * decoder.FFN_BLOCK and widths[1] < widths[0]
    decoder.prune_with_plan(model, dropped, kept)
    model.save_pretrained(tmp_path / "pruned")
    tokenizer.save_pretrained(tmp_path / "pruned")
    torch_runner = load_runner("generation", "pruned", "torch", tmp_path / "pruned")
    assert [layer.mlp.down_proj.in_features for layer in torch_runner.model.model.layers] == widths
    ids = generation.preprocess(tokenizer, "Hello there")
    expected = torch_runner.model(ids).logits.detach()
    np.testing.assert_allclose(expected, model(ids).logits.detach(), atol=1e-5)
    preset = tiny_preset("generation", tmp_path / "pruned", name="tiny-generation-narrow")
    for recipe, atol in ((OnnxRecipe(quantize=False, exporter="genai-builder"), 1e-3),
                         (OnnxRecipe(weight_only_bits=8, block_size=16, exporter="genai-builder"), 5e-2),
                         (OnnxRecipe(weight_only_bits=8, block_size=64, exporter="genai-builder"), 5e-2)):  # the default
        target = build_onnx(preset, "optimized", recipe=recipe, evaluate=False, force=True)
        graph = onnx.load(target / "model.onnx", load_external_data=False).graph
        down = [n for n in graph.node if "/mlp/down_proj/" in n.name]
        assert len(down) == 3
        onnx_runner = load_runner("generation", "optimized", "onnxruntime", target)
        np.testing.assert_allclose(onnx_runner.model(input_ids=ids).logits, expected, atol=atol)
        assert onnx_runner.generate(ids, 8).shape[1] == ids.shape[1] + 8


def test_recovery_prompts_never_reuse_a_heldout_prompt_or_topic():
    from optimize.evaluate.heldout import PROMPTS
    from optimize.prompts import TOPICS, prompts

    chosen = prompts(["Who built the house of sticks?", "What is the Yuan dynasty?"], count=64)
    assert len(chosen) == len(set(chosen)) and "Who built the house of sticks?" in chosen
    assert not set(chosen) & set(PROMPTS)
    words = [set(re.findall(r"[a-z]+", p.lower())) for p in PROMPTS]  # "the internet" shares "internet"
    reused = [t for t in TOPICS if any(set(re.findall(r"[a-z]+", t.lower())) - {"the"} <= w for w in words)]
    assert not reused


@requires_squad()
def test_decoder_recovery_texts_never_hold_a_paragraph_of_the_reading_validation_or_test_articles():
    """Articles 9-12 of the dev file choose decoder recoveries on reading comprehension (experiments/), 13-15 are
    the QA test articles: a recovery that distils on their paragraphs would be chosen on what it was taught."""
    from models.sources import minilm_path
    from optimize.evaluate import squad
    from optimize.train.recover_decoder import recovery_texts
    from tests.tiny import CHAT_TEMPLATE

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    tokenizer.chat_template = CHAT_TEMPLATE
    texts = {tokenizer.decode(t[0], skip_special_tokens=True) for t in recovery_texts(tokenizer, 512)}
    split = squad.WIDE_VALIDATION
    held = {tokenizer.decode(tokenizer(e.context).input_ids[:512], skip_special_tokens=True)
            for e in squad.examples(squad.load_articles(), split.validation + split.test)}
    assert texts and not texts & held


COMMON_WORDS = {"the", "a", "of", "in", "and"}


def _words_of(texts) -> set[str]:
    return set().union(*(set(re.findall(r"[a-z]+", text.lower())) for text in texts))


def _topic_words(chosen: list[str], templates) -> set[str]:
    """The words the topics put into the chosen prompts (the templates' own words left out)."""
    return _words_of(chosen) - _words_of(templates)


def test_recovery_prompts_share_no_topic_word_with_the_instruction_set():
    """The instruction set gates a pruned model: what recovery distils on must not teach it."""
    from optimize.evaluate.instructions import load
    from optimize.prompts import TEMPLATES, TOPICS, prompts

    chosen = prompts([], count=640)
    added = _topic_words(chosen, TEMPLATES)
    assert len(chosen) == 320 and added and not added & _words_of(item["prompt"] for item in load()) - COMMON_WORDS
    # calibration (activation scales, no teaching) still draws on every topic, as the shipped graphs did
    assert any("recycling" in p for p in prompts([], count=640, topics=TOPICS))


def test_format_prompts_share_no_topic_word_with_the_instruction_set():
    """The instruction set measures the pruned model; the format prompts that recovery distils on
    must not teach it: no prompt of the set, and no topic that shares a word with one."""
    from optimize.evaluate.instructions import load
    from optimize.prompts import FORMAT_TEMPLATES, format_prompts

    measured = [item["prompt"] for item in load()]
    chosen = format_prompts()
    assert len(chosen) >= 10 * len(FORMAT_TEMPLATES) and not set(chosen) & set(measured)
    added = _topic_words(chosen, FORMAT_TEMPLATES)
    assert added and not added & _words_of(measured) - COMMON_WORDS


def test_teacher_chats_are_the_teachers_one_at_a_time_answers(tmp_path):
    """Recovery distils on the teacher's greedy answers, generated in left-padded batches: each must
    be what the teacher answers to that prompt alone, cut after its end of turn."""
    from models import generation
    from optimize.evaluate.heldout import PROMPTS
    from optimize.train.recover_decoder import teacher_chats

    runner = load_runner("generation", "baseline", "torch", tiny_llama(tmp_path / "varied", init_range=0.2))
    prompts = list(PROMPTS[:12])
    first = generation.preprocess(runner.tokenizer, prompts[0])
    end_of_turn = int(runner.generate(first, 24)[0, first.shape[1] + 3])  # a token the teacher does emit
    runner.tokenizer.eos_token = runner.tokenizer.convert_ids_to_tokens(end_of_turn)
    runner.model.generation_config.eos_token_id = end_of_turn  # the teacher stops at eos only
    chats = teacher_chats(runner.model, runner.tokenizer, prompts, new_tokens=24, batch_size=5)
    lengths = []
    for prompt, chat in zip(prompts, chats, strict=True):
        ids = generation.preprocess(runner.tokenizer, prompt)
        assert chat.tolist() == runner.generate(ids, 24)[:, : ids.shape[1] + 24].tolist()
        lengths.append(chat.shape[1] - ids.shape[1])
    assert min(lengths) < 24 == max(lengths)  # some answers stopped at their end of turn


@pytest.mark.parametrize("model_type, kv_heads", [("llama", 2), ("llama", 4), ("phi3", 2), ("qwen2", 2)])
def test_pruned_decoder_heads_compute_what_masking_them_computes_and_reload(tmp_path, model_type, kv_heads):
    """Grouped heads keep their own KV head (GQA: every group keeps half its queries; one KV head per
    query: a head goes with its key and value); the saved model reloads as an ordinary checkpoint."""
    from transformers import AutoModelForCausalLM

    from optimize.prune.decoder_heads import head_importance, kept_heads, prune_heads
    from tests.tiny import tiny_decoder

    model = AutoModelForCausalLM.from_pretrained(tiny_decoder(tmp_path / "base", model_type, num_key_value_heads=kv_heads))
    ids = torch.randint(1000, 2000, (1, 24))
    queries, kvs = kept_heads(head_importance(model, [ids]), kv_heads, share=0.5)
    assert all(len(q) == 2 for q in queries) and all(len(k) == min(2, kv_heads) for k in kvs)
    if kv_heads == 2:  # each group of two query heads keeps one of its own
        assert all(sorted(h // 2 for h in q) == [0, 1] for q in queries)

    def silence(kept):
        def hook(_, inputs):
            mask = torch.zeros(4)
            mask[kept] = 1
            return ((inputs[0].unflatten(-1, (4, -1)) * mask[:, None]).flatten(-2),)
        return hook

    handles = [layer.self_attn.o_proj.register_forward_pre_hook(silence(q)) for layer, q in zip(model.model.layers, queries)]
    with torch.inference_mode():
        masked = model(input_ids=ids).logits
    for handle in handles:
        handle.remove()
    unpruned_parameters = model.num_parameters()
    prune_heads(model, queries, kvs)
    model.save_pretrained(tmp_path / "pruned")
    pruned = AutoModelForCausalLM.from_pretrained(tmp_path / "pruned").eval()
    assert pruned.config.num_attention_heads == 2 and pruned.num_parameters() < unpruned_parameters
    with torch.inference_mode():
        torch.testing.assert_close(pruned(input_ids=ids).logits, masked, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("flags, message", [
    (["--train-share", "0"], "--train-share 0.0: use a share in (0, 1]"),  # an AttributeError deep in pruning
    (["--train-share", "5"], "--train-share 5.0: use a share in (0, 1]"),  # started training
    (["--ffn-kept", "0"], "FFN neurons kept must be ≥ 1"),  # read as "the default" and pruned
    (["--learning-rate", "0"], "--learning-rate 0.0: use a rate above 0"),
    (["--task", "generation", "--ffn-kept", "0"], "FFN neurons kept ≥ 1"),
    (["--baseline", "/nonexistent"], "/nonexistent is not a model folder (no config.json there)"),  # a Hub traceback
    (["--task", "generation", "--save-compact", "--heads-kept", "4"], "not for --task generation: --heads-kept, "
                                                                       "--save-compact"),  # started recovery
    (["--steps", "5"], "not for --task qa: --steps"),
])
def test_prune_refuses_numbers_it_cannot_use_before_any_work(flags, message, tmp_path, capsys):
    from optimize.__main__ import main

    assert main(["prune", *flags, "--output", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err


def test_prune_defaults_cut_the_generation_model_as_the_shipped_pruned_one():
    """The command cut 8 layers by default; the shipped `pruned` (and DecoderPruneConfig) drops 6."""
    import argparse
    import json

    from models.catalog import REPO_ROOT
    from optimize.commands import prune

    parser = argparse.ArgumentParser()
    prune.add_arguments(parser)
    shipped = json.loads((REPO_ROOT / "weights" / "generation-smollm2-pruned" / "pruning.json").read_text())
    assert parser.parse_args([]).layers_dropped == shipped.get("prune", shipped)["layers_dropped"]


def test_the_commands_default_folders_are_the_checkouts_wherever_they_run_from(tmp_path, monkeypatch):
    """Run from another directory, `diagnose-qa` and `prune` looked for weights/ there (and then on the Hub)."""
    import argparse

    from models.catalog import REPO_ROOT
    from optimize.commands import prune, sweep_qa, train_qa

    monkeypatch.chdir(tmp_path)
    for command in (prune, sweep_qa, train_qa):
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        defaults = vars(parser.parse_args([]))
        for name in ("baseline", "output"):
            if isinstance(defaults.get(name), Path):
                assert defaults[name].is_relative_to(REPO_ROOT) and defaults[name].is_absolute(), (command, name)


def test_the_recovered_sweep_names_a_two_stage_pruned_model_by_its_cut(monkeypatch):
    """`sweep-qa --recovered weights/qa-minilm-squad2-pruned` labelled the shipped pruned model "baseline" and checked
    no gate: its cut is recorded in its first stage."""
    from models.catalog import REPO_ROOT
    from optimize.train import sweep_encoder

    monkeypatch.setattr(sweep_encoder, "forward_ms", lambda model: 1.0)  # the labels are under test, not the timing
    monkeypatch.setattr(sweep_encoder, "save_rows", lambda *args, **kwargs: None)  # the committed report stays
    rows = sweep_encoder.recovered([REPO_ROOT / "weights" / "qa-minilm-squad2-pruned"])
    assert [row["candidate"] for row in rows] == ["baseline", "4 heads / 512 FFN"]
    assert rows[1]["gates (within 3 of baseline, both)"] != "—"


@requires_squad()
def test_prune_qa_distils_on_the_baselines_training_articles_only(monkeypatch, tmp_path):
    """`prune --task qa` without --full-data used the dev file's old split (articles 0-11): the student learnt from
    three of the baseline's four validation articles, the ones its promise is then measured on."""
    import argparse

    from optimize.commands import prune as command
    from optimize.evaluate import squad
    from optimize.evaluate.accuracy import threshold_split
    from optimize.train import recover_qa
    from optimize.train.finetune_qa import training_examples
    from tests.tiny import tiny_qa

    baseline = tiny_qa(tmp_path / "baseline")  # no training record: the split every default model gates on
    taught = []
    monkeypatch.setattr(recover_qa, "run", lambda _baseline, _cut, config, *_args, **_kwargs:
                        taught.append(config) or {"stopped": True, "checkpoint": "-"})
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    (tmp_path / "dev.json").symlink_to(squad.DEFAULT_SQUAD_PATH)
    for data in ([], ["--data", str(squad.DEFAULT_SQUAD_PATH)], ["--data", str(tmp_path / "dev.json")]):  # named or not
        command.run(parser.parse_args(["--task", "qa", "--baseline", str(baseline), "--output", str(tmp_path / "out"), *data]))
    for config in taught:
        articles = squad.load_articles(config.data)
        validating = {articles[i]["title"] for i in threshold_split(baseline).validation}
        assert validating and not validating & {example.article for example in training_examples(config, articles)}


@requires_squad()
def test_a_builds_recovery_data_may_not_hold_the_articles_that_gate_it(tmp_path):
    """`PruneSpec.data` pointing at the dev file had trained on all sixteen articles, the test ones included; a file
    holding a validation or test article is refused, the dev file itself is read by the gates' split."""
    import json

    from models.errors import InputError
    from models.preset import PruneSpec
    from optimize.evaluate import squad
    from optimize.train.recover_qa import recovery_train_config
    from tests.tiny import tiny_qa

    baseline = tiny_qa(tmp_path / "baseline")
    articles = squad.load_articles(squad.DEFAULT_SQUAD_PATH)
    (tmp_path / "mine.json").write_text(json.dumps({"data": [articles[0], articles[14]]}))  # Force: a test article
    with pytest.raises(InputError, match="French_and_Indian_War|Force|Warsaw"):
        recovery_train_config(baseline, tmp_path / "out", PruneSpec(data=str(tmp_path / "mine.json")))
    config = recovery_train_config(baseline, tmp_path / "out", PruneSpec(data=str(squad.DEFAULT_SQUAD_PATH)))
    assert config.split == squad.WIDE_VALIDATION
    (tmp_path / "clean.json").write_text(json.dumps({"data": articles[:2]}))
    assert recovery_train_config(baseline, tmp_path / "out", PruneSpec(data=str(tmp_path / "clean.json"))).split.train == (0, 1)


def test_a_build_cut_that_drops_every_encoder_layer_is_refused(tiny_qa_dir, tmp_path):
    """The build's path for a user's QA model had removed every layer, then recovered and gated what was left."""
    from models.errors import ConfigError
    from models.preset import PruneSpec
    from optimize.train.recover_qa import prune_and_recover

    with pytest.raises(ConfigError, match="the model has 2 layers; asked to drop 2"):
        prune_and_recover(tiny_qa_dir, tmp_path / "out", PruneSpec(layers_dropped=2))
    assert not (tmp_path / "out").exists()


def test_sweep_qa_checks_the_recovered_folders_before_measuring(tmp_path, tiny_qa_dir, capsys):
    """`sweep-qa --recovered /nonexistent` had measured the baseline first, then failed in a traceback."""
    from optimize.__main__ import main

    for folder, message in ((tmp_path / "none", "is not a model folder"), (tiny_qa_dir, "no training.json there")):
        assert main(["sweep-qa", "--recovered", str(folder)]) == 2
        assert message in capsys.readouterr().err
