"""Prompt lookup (issue 53): drafts copied from the text so far, checked in one pass, keep the
model's own greedy output token for token on the tiny model's graph (on the real int8 variants a
one-position pass and a wider one part texts, through GroupQueryAttention, unless every pass is on the filled
graph: experiments/prompt-lookup/results.md, and why only `pruned-optimized` decodes with it by default)."""
from dataclasses import dataclass, field

import pytest

from models.decoding import PromptLookup


@dataclass(frozen=True)
class RightThenWrong(PromptLookup):
    """Drafts the plain greedy continuation (`truth`: prompt and continuation ids) with its second token wrong, so
    every pass has a drafted token to keep and one to reject: a decoder that kept a draft unchecked, or kept the
    rejected position's keys and values, writes another text (the tiny model's tokens depend on the prompt)."""
    truth: tuple[int, ...] = field(default=())

    def draft(self, sequence: list[int], room: int, length: int | None = None) -> list[int]:
        right = list(self.truth[len(sequence): len(sequence) + min(length or self.draft_tokens, room, 2)])
        return right[:1] + [(token + 1) % 1000 + 1000 for token in right[1:]]


def right_then_wrong(runner, prompt: str, new_tokens: int) -> RightThenWrong:
    from models import generation

    prompt_ids = generation.preprocess(runner.tokenizer, prompt)
    decoder, lookup = runner.model.decoder, runner.model.decoder.lookup
    decoder.lookup = None
    truth = decoder.generate(prompt_ids, new_tokens, ignore_eos=True)[0].tolist()
    decoder.lookup = lookup
    return RightThenWrong(truth=tuple(truth))


def kept_one_of_each_draft(draft: dict) -> bool:
    return draft["passes"] > 3 and draft["drafted"] == 2 * draft["passes"] and draft["accepted"] == draft["passes"]


def test_the_draft_follows_the_most_recent_earlier_occurrence_of_the_longest_tail():
    lookup = PromptLookup(max_ngram=3, draft_tokens=4)
    assert lookup.draft([1, 2, 3, 9, 9, 1, 2, 3, 7, 1, 2, 3], room=10) == [7, 1, 2, 3]
    assert lookup.draft([5, 6, 7, 8, 6], room=10) == []  # one token matched: too weak a hint to pay a wider pass
    assert PromptLookup(min_ngram=1).draft([5, 6, 7, 8, 6], room=10) == [7, 8, 6]
    assert lookup.draft([1, 2, 3, 4], room=10) == []  # nothing repeats: no draft, a plain step
    assert lookup.draft([1, 2, 1, 2, 3, 4, 5, 1, 2], room=2) == [3, 4]  # never past the tokens still wanted


def test_the_generation_int8_recipe_computes_each_row_the_same_in_a_pass_of_any_width():
    """Exact lookup checks drafts in one pass of several rows: every weight kernel must give each row the bits
    of a one-row step. ONNX Runtime's 8-bit int8-compute kernel does in blocks of 16-64 and not of 128, which
    the recipe used until lookup was found changing `pruned-optimized`'s texts (experiments/int8-block-size)."""
    import numpy as np
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    from models.runners import session_options
    from optimize.quantize.recipes import default_recipe

    recipe = default_recipe("generation")
    rng = np.random.default_rng(0)
    k, n = 576, 1536  # SmolLM2's hidden size and its pruned MLP's width
    weights = onnx.numpy_helper.from_array((rng.standard_normal((k, n)) * 0.05).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["Y"])], "g",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", n])], [weights])
    quantizer = MatMulNBitsQuantizer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                                     block_size=recipe.block_size, is_symmetric=True, accuracy_level=4,
                                     bits=recipe.weight_only_bits)
    quantizer.process()
    model = quantizer.model.model
    model.ir_version = 10
    session = onnxruntime.InferenceSession(model.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
    rows = rng.standard_normal((9, k)).astype(np.float32)  # a draft of 8 and the position before it
    alone = np.concatenate([session.run(None, {"A": rows[i:i + 1]})[0] for i in range(len(rows))])
    for width in range(2, len(rows) + 1):
        assert np.array_equal(session.run(None, {"A": rows[:width]})[0], alone[:width]), width


@pytest.mark.parametrize("prompt", [
    "Repeat after me: the quick brown fox jumps over the lazy dog. the quick brown fox jumps over the lazy dog.",
    "Paragraph: Warsaw is the capital and largest city of Poland. Question: What is the capital of Poland?",
    "Write a haiku about fast computers.",
])
def test_lookup_keeps_the_greedy_text_of_the_same_variant(built_presets, prompt):
    from models import generation
    from models.runners import load_runner

    preset = built_presets["generation"]
    runner = load_runner("generation", "optimized", "onnxruntime", preset.built_dir("optimized"))
    decoder = runner.model.decoder
    assert decoder.shares_kv_buffer
    decoder.lookup = None
    plain = generation.generate(runner, prompt, 40, ignore_eos=True)
    decoder.lookup = PromptLookup()
    looked_up = generation.generate(runner, prompt, 40, ignore_eos=True)
    assert looked_up["text"] == plain["text"] and looked_up["new_tokens"] == plain["new_tokens"] == 40
    assert looked_up["draft"]["drafted"] >= looked_up["draft"]["accepted"] >= 0
    decoder.lookup = right_then_wrong(runner, prompt, 40)
    checked = generation.generate(runner, prompt, 40, ignore_eos=True)
    assert checked["text"] == plain["text"] and kept_one_of_each_draft(checked["draft"]), checked["draft"]


def test_with_every_pass_two_positions_wide_lookup_keeps_the_text_of_the_same_wide_decoding(built_presets):
    """`wide_steps`: every pass on the filled graph, whose attention always has one more row than the pass
    (models/attention_filler.py; GroupQueryAttention computes a one-row pass another way). On the real int8
    `optimized` this keeps lookup's texts but slows plain decoding more than lookup gains on most prompts: off
    by default there (experiments/prompt-lookup/results.md). The filler row's key/value and output are never kept:
    the tiny fp32 graph decodes the same tokens with and without it."""
    from models import generation
    from models.runners import load_runner

    runner = load_runner("generation", "optimized", "onnxruntime", built_presets["generation"].built_dir("optimized"))
    decoder = runner.model.decoder
    prompt = "Repeat after me: the quick brown fox jumps over the lazy dog. the quick brown fox jumps over the lazy dog."
    decoder.lookup, decoder.wide_steps = None, False
    plain = generation.generate(runner, prompt, 40, ignore_eos=True)
    decoder.wide_steps = True
    wide = generation.generate(runner, prompt, 40, ignore_eos=True)
    decoder.lookup = right_then_wrong(runner, prompt, 40)
    looked_up = generation.generate(runner, prompt, 40, ignore_eos=True)
    assert wide["new_tokens"] == looked_up["new_tokens"] == 40 and kept_one_of_each_draft(looked_up["draft"])
    assert looked_up["text"] == wide["text"]
    assert wide["text"] == plain["text"]  # the tiny model's fp32 graph: the same tokens either way


def test_a_variant_built_with_lookup_by_default_decodes_with_it_and_keeps_its_text(tiny_llama_dir, monkeypatch):
    """Issue 53, "on by default where it pays": a variant whose catalog entry asks for lookup is built with its
    decoding saved beside the graph (so its files, and the records keyed by them, say how it writes), and loads
    decoding with exact lookup from the filled graph alone: drafts kept, the text of the same wide decoding.
    SHOWDOWN_PROMPT_LOOKUP=0 turns it off for every decoder."""
    import dataclasses

    from models import generation
    from models.decoding import DECODING_FILE
    from models.manifest import read_manifest
    from models.runners import load_runner
    from optimize.build import build_onnx
    from tests.tiny import tiny_preset

    preset = tiny_preset("generation", tiny_llama_dir, name="tiny-lookup")
    preset = dataclasses.replace(preset, variants=tuple(
        dataclasses.replace(v, prompt_lookup=True) if v.name == "optimized" else v for v in preset.variants))
    directory = build_onnx(preset, "optimized", evaluate=False)
    assert (directory / DECODING_FILE).exists()
    assert read_manifest(directory)["inputs"]["prompt_lookup"] is True
    prompt = "Repeat after me: the quick brown fox jumps over the lazy dog. the quick brown fox jumps over the lazy dog."

    monkeypatch.delenv("SHOWDOWN_PROMPT_LOOKUP", raising=False)
    runner = load_runner("generation", "optimized", "onnxruntime", directory)
    assert runner.model.decoder.filled and runner.model.decoder.wide_steps  # the filled graph is the only one loaded
    assert runner.model.decoder.lookup == PromptLookup()
    assert "draft" in generation.generate(runner, prompt, 8, ignore_eos=True)
    runner.model.decoder.lookup = right_then_wrong(runner, prompt, 40)
    looked_up = generation.generate(runner, prompt, 40, ignore_eos=True)
    assert kept_one_of_each_draft(looked_up["draft"]), looked_up["draft"]
    runner.model.decoder.lookup = None  # the same wide decoding, no drafts
    assert generation.generate(runner, prompt, 40, ignore_eos=True)["text"] == looked_up["text"]
    runner.model.decoder.lookup = PromptLookup()
    from optimize.evaluate.continuations import lookup_keeps_texts  # the build's gate for such a variant
    assert lookup_keeps_texts(runner, (prompt, "Write a haiku about fast computers.")) == {"lookup_prompts": 2, "lookup_identical": 2}
    assert runner.model.decoder.lookup is not None  # left as it shipped

    monkeypatch.setenv("SHOWDOWN_PROMPT_LOOKUP", "0")
    plain = load_runner("generation", "optimized", "onnxruntime", directory)
    assert not plain.model.decoder.filled and not plain.model.decoder.wide_steps
    assert "draft" not in generation.generate(plain, prompt, 8)
