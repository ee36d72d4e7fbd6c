"""Tiny randomly initialised models with real tokenizers, built in seconds for the fast tests."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from models.catalog import Preset, Source, Variant, optimized_variant
from models.qa import QAConfig
from models.sources import minilm_path

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|> {% endif %}")


def tiny_qa(directory: Path, seed: int = 0) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertForQuestionAnswering

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=512)
    BertForQuestionAnswering(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    (directory / "qa_config.json").write_text(json.dumps({**QAConfig().__dict__, "null_threshold": -1e9}))
    return directory


ENCODERS = ("bert", "roberta", "distilbert", "electra", "albert", "deberta-v2")


def tiny_encoder(directory: Path, model_type: str, seed: int = 0) -> Path:
    """A QA model of `model_type` (ENCODERS) with random weights and MiniLM's WordPiece tokenizer;
    RoBERTa and DistilBERT get no token types, as their own tokenizers give none."""
    from transformers import AutoConfig, AutoModelForQuestionAnswering, AutoTokenizer

    torch.manual_seed(seed)
    types = model_type not in ("roberta", "distilbert")
    tokenizer = AutoTokenizer.from_pretrained(
        minilm_path(), **({} if types else {"model_input_names": ["input_ids", "attention_mask"]}))
    sizes = {"distilbert": dict(dim=32, hidden_dim=64, n_layers=2, n_heads=4),
             "albert": dict(embedding_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4),
             "electra": dict(embedding_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4)}.get(model_type, dict(hidden_size=32, intermediate_size=64,
                                                                         num_hidden_layers=2, num_attention_heads=4))
    extra = {"roberta": dict(pad_token_id=tokenizer.pad_token_id, max_position_embeddings=520),
             "deberta-v2": dict(relative_attention=True, position_buckets=32, pos_att_type=["p2c", "c2p"],
                                max_relative_positions=-1, position_biased_input=False)}.get(model_type, {})
    config = AutoConfig.for_model(model_type, **{"vocab_size": tokenizer.vocab_size, "max_position_embeddings": 512,
                                                 **sizes, **extra})
    AutoModelForQuestionAnswering.from_config(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def tiny_llama(directory: Path, seed: int = 0, layers: int = 2, init_range: float = 0.2) -> Path:
    """`init_range` 0.2 makes the greedy tokens depend on the prompt (at 0.02 every prompt gives
    one repeated token, which no decoding bug can change)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.eos_token = tokenizer.sep_token
    config = LlamaConfig(vocab_size=tokenizer.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         eos_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id,
                         tie_word_embeddings=True, initializer_range=init_range)
    LlamaForCausalLM(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


DECODERS = ("llama", "mistral", "qwen2", "gemma", "phi3", "gpt2")


def tiny_decoder(directory: Path, model_type: str, seed: int = 0, init_range: float = 0.2, **overrides) -> Path:
    """A causal LM of `model_type` (DECODERS) with random weights, MiniLM's tokenizer and a chat template."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.eos_token = tokenizer.sep_token
    ids = dict(vocab_size=tokenizer.vocab_size, eos_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id,
               pad_token_id=tokenizer.pad_token_id, initializer_range=init_range)
    sizes = (dict(n_embd=64, n_inner=128, n_layer=2, n_head=4, n_positions=512) if model_type == "gpt2" else
             dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=512, **({"head_dim": 16} if model_type == "gemma" else {}),
                  **({"original_max_position_embeddings": 512} if model_type == "phi3" else {})))  # as Phi-3-mini-4k
    config = AutoConfig.for_model(model_type, **ids, **{**sizes, **overrides})
    AutoModelForCausalLM.from_config(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def tiny_preset(task: str, baseline: Path, name: str | None = None, reading_questions: int = 10) -> Preset:
    """Reading comprehension on a few questions: a random tiny decoder's score is noise anyway."""
    name = name or f"tiny-{task}"
    return Preset(name=name, task=task, title=f"tiny {task}", reading_questions=reading_questions, variants=(
        Variant("baseline", "torch", Source("local", str(baseline))),
        optimized_variant(name, task),
    ))
