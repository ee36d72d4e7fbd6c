"""Structured pruning of a decoder (Llama, Mistral, Qwen2, Gemma, Phi-3, GPT-2:
optimize/prune/decoder_layout.py): whole layers and FFN neurons, ranked on calibration text,
removed for real, then recovered by distillation from the unpruned model.

Layer importance is ShortGPT's block influence, 1 − cos(hidden in, hidden out) averaged over
calibration tokens: a layer that barely turns the residual stream can go. FFN neuron importance
is mean |silu(gate) · up| times the L2 norm of its down-projection column. Recovery data is text
the project has offline: Wikipedia paragraphs of the SQuAD *training* articles (the gates' perplexity
and reading F1 use the reading set's paragraphs, `accuracy.validation_paragraphs`) and the baseline's
own greedy answers to a training prompt set (optimize/prompts.py); neurons are ranked on those
answers too.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from models.errors import ConfigError
from optimize.prune.decoder_layout import decoder_layers, ffn_out_norms, ffn_width, layout, narrow_ffn
from optimize.prune.encoder_layout import module as find
from optimize.prune.encoder_layout import set_module

log = logging.getLogger(__name__)

PLAN_FILE, DELTA_FILE = "pruning.json", "recovery.safetensors"


@dataclass(frozen=True)
class DecoderPruneConfig:
    layers_dropped: int = 6
    ffn_kept: int = 1152  # of 1536 per layer
    ffn_pruned_share: float = 0.0  # of all FFN neurons, ranked across layers (widths then differ)
    calibration_texts: int = 32
    max_tokens: int = 256

    def __post_init__(self) -> None:
        if self.layers_dropped < 0 or self.ffn_kept < 1 or not 0 <= self.ffn_pruned_share < 1:
            raise ConfigError(f"layers dropped must be ≥ 0, FFN neurons kept ≥ 1 and the FFN share pruned in [0, 1); got "
                              f"{self.layers_dropped}, {self.ffn_kept} and {self.ffn_pruned_share}")

    def check_fits(self, model_config) -> None:
        """Said before any work when the cut asks more than the model has (a transformers config)."""
        width, layers = model_config.intermediate_size, model_config.num_hidden_layers
        if self.ffn_kept > width or self.layers_dropped > layers - 2:  # `plan` keeps the first and the last layer
            raise ConfigError(f"the model has {layers} layers of {width} FFN neurons; asked to drop "
                              f"{self.layers_dropped} layers and keep {self.ffn_kept} neurons")


FFN_BLOCK = 16  # kept widths are multiples of 16 (MatMulNBits' smallest block; narrow_ffn cuts any block size)


def importance(model, texts: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(layer influence [layers], FFN neuron importance [layers, intermediate]), on any decoder in
    optimize/prune/decoder_layout.py."""
    spec = layout(model)
    layers = decoder_layers(model)
    influence = torch.zeros(len(layers))
    activation = torch.zeros(len(layers), ffn_width(model))
    tokens = 0

    def layer_hook(index):
        def record(module, args, kwargs, output):
            hidden_in = args[0] if args else kwargs["hidden_states"]
            hidden_out = output[0] if isinstance(output, tuple) else output
            cos = nn.functional.cosine_similarity(hidden_in.float(), hidden_out.float(), dim=-1)
            influence[index] += (1 - cos).sum()
        return record

    def mlp_hook(index):
        def record(module, args, output):
            activation[index] += args[0].detach().abs().sum(dim=(0, 1))
        return record

    handles = [layer.register_forward_hook(layer_hook(i), with_kwargs=True) for i, layer in enumerate(layers)]
    handles += [find(layer, spec.ffn_out).register_forward_hook(mlp_hook(i)) for i, layer in enumerate(layers)]
    try:
        with torch.inference_mode():
            for ids in texts:
                model(input_ids=ids, use_cache=False)
                tokens += ids.numel()
    finally:
        for handle in handles:
            handle.remove()
    norms = torch.stack([ffn_out_norms(layer, spec) for layer in layers])
    return influence / tokens, activation / tokens * norms


def ffn_widths(kept_neurons: dict[int, torch.Tensor]) -> list[int]:
    return [int(kept_neurons[i].numel()) for i in sorted(kept_neurons)]


def plan(influence: torch.Tensor, neurons: torch.Tensor, config: DecoderPruneConfig) -> tuple[list[int], dict[int, torch.Tensor]]:
    """(dropped layers: the least influential, never the first or last; kept FFN neurons per
    remaining layer, keyed by its new index: the strongest `ffn_kept`, in their original order)."""
    candidates = [i for i in influence.argsort().tolist() if 0 < i < len(influence) - 1]
    if config.layers_dropped > len(candidates):  # it had dropped fewer than asked, under a record of the number asked
        raise ConfigError(f"the model has {len(influence)} layers; the first and last stay, so at most {len(candidates)} "
                          f"can be dropped (asked {config.layers_dropped})")
    dropped = sorted(candidates[: config.layers_dropped])
    kept = [i for i in range(len(influence)) if i not in dropped]
    if config.ffn_pruned_share:
        return dropped, global_ffn_plan(neurons[kept], config.ffn_pruned_share)
    kept_neurons = {new: neurons[old].argsort(descending=True)[: config.ffn_kept].sort().values
                    for new, old in enumerate(kept)}
    return dropped, kept_neurons


def global_ffn_plan(neurons: torch.Tensor, share: float) -> dict[int, torch.Tensor]:
    """Remove the weakest `share` of all FFN neurons wherever they are. Why global: SmolLM2's
    early layers hold many near-silent neurons, its late ones few; cutting 8 % from every layer
    left 71 % greedy agreement, cutting 2 % globally (mostly in layers 0-3) left ~85 %. Each
    layer's kept width is rounded up to a multiple of FFN_BLOCK with its strongest cut neurons."""
    layers, width = neurons.shape
    removed = set(neurons.flatten().argsort()[: int(share * neurons.numel())].tolist())
    kept_neurons = {}
    for layer in range(layers):
        order = neurons[layer].argsort(descending=True).tolist()
        keep = [n for n in order if layer * width + n not in removed]
        size = min(width, max(FFN_BLOCK, -(-len(keep) // FFN_BLOCK) * FFN_BLOCK))
        chosen = set(keep)
        keep += [n for n in order if n not in chosen][: size - len(keep)]
        kept_neurons[layer] = torch.tensor(sorted(keep))
    return kept_neurons


def prune(model, influence: torch.Tensor, neurons: torch.Tensor, config: DecoderPruneConfig):
    dropped, kept_neurons = plan(influence, neurons, config)
    prune_with_plan(model, dropped, kept_neurons)
    log.info("dropped layers %s; FFN widths %s", dropped, ffn_widths(kept_neurons))
    return model, dropped



def full_delta(model, pruned_weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The committed form of a fully fine-tuned pruned model (a lent GPU trains every block weight):
    W − W_pruned per linear weight as int8 with one fp16 scale per row (half the bytes of fp16, so
    24 SmolLM2 layers stay under the 150 MB cap), and the norm gains as they are. The model is set
    to what the delta rebuilds, so what is measured afterwards is what a fresh clone assembles."""
    delta = {}
    for name, parameter in model.model.layers.named_parameters():
        key = f"layers.{name}"
        if parameter.ndim == 2:
            moved = parameter.detach().float().cpu() - pruned_weights[name].float()
            scale = (moved.abs().amax(1, keepdim=True) / 127).clamp_min(1e-12).half()
            codes = torch.round(moved / scale.float()).clamp(-127, 127).to(torch.int8)
            prefix = key.removesuffix(".weight")
            delta[f"{prefix}.delta_int8"], delta[f"{prefix}.delta_scale"] = codes, scale
            parameter.data = (pruned_weights[name].float() + codes.float() * scale.float()).to(parameter.device, parameter.dtype)
        else:
            delta[key] = parameter.detach().cpu().clone()
    return delta


def apply_delta(model, delta: dict[str, torch.Tensor]) -> None:
    """The inverse of merge_lora / full_delta on a freshly pruned baseline: W += B·A (or the int8
    delta × its row scales), norm gains replaced."""
    for key, value in delta.items():
        if key.endswith(".delta_int8"):
            prefix = key[: -len(".delta_int8")]
            linear = model.model.get_submodule(prefix)
            moved = value.float() * delta[f"{prefix}.delta_scale"].float()
            linear.weight.data += moved.to(linear.weight.device, linear.weight.dtype)
        elif key.endswith(".lora_A"):
            prefix = key[: -len(".lora_A")]
            linear = model.model.get_submodule(prefix)
            linear.weight.data += (delta[f"{prefix}.lora_B"].float() @ value.float()).to(linear.weight.dtype)
        elif key.endswith("layernorm.weight"):
            model.model.get_submodule(key[: -len(".weight")]).weight.data = value.to(torch.float32).clone()


def stack_deltas(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One delta for two recovery rounds (a second round trains fresh adapters on top of the first):
    B1·A1 + B2·A2 = [B1 B2]·[A1; A2], so the committed form stays one rank-(r1+r2) adapter per
    weight; the norm gains are the second round's, which started from the first's."""
    stacked = dict(second)
    for key, value in first.items():
        if key.endswith(".lora_A"):
            stacked[key] = torch.cat([value, second[key].to(value.dtype)], 0)
        elif key.endswith(".lora_B"):
            stacked[key] = torch.cat([value, second[key].to(value.dtype)], 1)
    return stacked


def prune_with_plan(model, dropped: list[int], kept_neurons: dict[int, torch.Tensor]):
    """Reapply a recorded plan: drop `dropped` layers, keep `kept_neurons[new_index]` FFN neurons."""
    spec = layout(model)
    layers = decoder_layers(model)
    kept = [i for i in range(len(layers)) if i not in set(dropped)]
    set_module(model, spec.layers, nn.ModuleList(layers[i] for i in kept))
    for new_index, layer in enumerate(decoder_layers(model)):
        narrow_ffn(layer, spec, kept_neurons[new_index])
        find(layer, spec.attention).layer_idx = new_index  # the KV cache is addressed by it
    setattr(model.config, spec.layers_key, len(kept))
    sizes = ffn_widths(kept_neurons)
    setattr(model.config, spec.ffn_size_key, max(sizes))
    if len(set(sizes)) > 1:  # read by models.runners.load_causal_lm; transformers itself assumes one width
        model.config.intermediate_sizes = sizes
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = [model.config.layer_types[i] for i in kept]
    return model


def save_recovery(output: Path, dropped: list[int], kept_neurons: dict[int, torch.Tensor],
                  delta: dict[str, torch.Tensor], details: dict) -> None:
    """The committed part of a pruned decoder: plan (JSON) + kept-neuron indices and the delta
    (fp16 adapters and gains, or full_delta's int8 codes)."""
    import json

    from safetensors.torch import save_file

    output.mkdir(parents=True, exist_ok=True)
    tensors = {f"ffn_kept.{i}": index.to(torch.int32).contiguous() for i, index in kept_neurons.items()}
    tensors.update({k: (v if v.dtype == torch.int8 else v.to(torch.float16)).contiguous() for k, v in delta.items()})
    save_file(tensors, output / DELTA_FILE)
    widths = ffn_widths(kept_neurons)
    plan_data = {"dropped_layers": dropped, "ffn_kept": widths[0] if len(set(widths)) == 1 else widths, **details}
    (output / PLAN_FILE).write_text(json.dumps(plan_data, indent=2) + "\n")


def load_recovery(recovery_dir: Path) -> tuple[list[int], dict[int, torch.Tensor], dict[str, torch.Tensor]]:
    """What save_recovery wrote: the dropped layers, the kept neurons per layer, and the delta."""
    import json

    from safetensors.torch import load_file

    plan_data = json.loads((recovery_dir / PLAN_FILE).read_text())
    tensors = load_file(recovery_dir / DELTA_FILE)
    kept_neurons = {int(k.split(".")[1]): v.long() for k, v in tensors.items() if k.startswith("ffn_kept.")}
    return plan_data["dropped_layers"], kept_neurons, {k: v for k, v in tensors.items() if not k.startswith("ffn_kept.")}


def assembled(baseline_dir: Path, recovery_dir: Path):
    """The pruned model, in memory, from the baseline and a committed plan + delta (deterministic)."""
    from transformers import AutoModelForCausalLM

    dropped, kept_neurons, delta = load_recovery(recovery_dir)
    model = AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32).eval()
    prune_with_plan(model, dropped, kept_neurons)
    apply_delta(model, delta)
    return model


def assemble(baseline_dir: Path, recovery_dir: Path, output: Path) -> Path:
    """Rebuild the pruned model from the baseline and a committed plan + delta, saved to `output`."""
    from transformers import AutoTokenizer

    assembled(baseline_dir, recovery_dir).save_pretrained(output, safe_serialization=True)
    AutoTokenizer.from_pretrained(baseline_dir).save_pretrained(output)
    return output
