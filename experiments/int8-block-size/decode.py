"""Step 2 of RULE.md: the candidate block size built into a scratch folder from `pruned` with the shipped
rung's recipe (only the block size changed, not gated), decoded against the shipped `pruned-optimized`
in one process: interleaved rounds, the bench's chat prompt, 64 new tokens, end-of-sequence ignored,
lookup off on both (the one-row graph).

    PYTHONPATH=. python experiments/int8-block-size/decode.py BLOCK [ROUNDS]
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace

import torch

from models.catalog import preset as catalog_preset
from models.decoding import OnnxCausalLM
from models.runners import session_options
from optimize.bench.run import generation_prompt
from optimize.build import build_onnx
from optimize.quantize.recipes import default_recipe


def main() -> None:
    block = int(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    preset = catalog_preset("generation-smollm2")
    shipped = preset.built_dir("pruned-optimized")
    scratch = shipped.parent / f"scratch-int8-block{block}"
    if not (scratch / "model.onnx").exists():
        recipe = replace(default_recipe("generation"), fp32_attention_share=0.0, block_size=block)
        build_onnx(preset, "pruned-optimized", recipe=recipe, evaluate=False, directory=scratch)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(shipped)
    ids = torch.tensor([tokenizer.apply_chat_template([{"role": "user", "content": generation_prompt(tokenizer, 128)}],
                                                      add_generation_prompt=True)])
    decoders = {name: OnnxCausalLM(path, session_options, "CPUExecutionProvider").decoder
                for name, path in (("shipped (block 16)", shipped), (f"block {block}", scratch))}
    texts, rates = {}, {name: [] for name in decoders}
    for name, decoder in decoders.items():
        texts[name] = decoder.generate(ids, 64, ignore_eos=True)[0, ids.shape[1]:].tolist()
    for round_ in range(rounds):
        for name in (list(decoders) if round_ % 2 == 0 else list(decoders)[::-1]):
            start = time.perf_counter()
            decoders[name].generate(ids, 1, ignore_eos=True)
            prefill = time.perf_counter() - start
            start = time.perf_counter()
            decoders[name].generate(ids, 64, ignore_eos=True)
            rates[name].append(63 / (time.perf_counter() - start - prefill))
    shipped_rates = rates["shipped (block 16)"]
    print("| graph | MB on disk | decode tok/s (median) | vs shipped (median of per-round ratios) | per-round range | same 64 tokens |")
    print("|---|---|---|---|---|---|")
    for (name, values), path in zip(rates.items(), (shipped, scratch)):
        ratios = [v / s for v, s in zip(values, shipped_rates)]
        same = sum(a == b for a, b in zip(texts[name], texts["shipped (block 16)"]))
        size = sum(f.stat().st_size for f in path.glob("model.onnx*")) / 1e6
        print(f"| {name} | {size:.0f} | {statistics.median(values):.1f} | {statistics.median(ratios):.3f}x | "
              f"{min(ratios):.3f}-{max(ratios):.3f} | {same}/64 |")


if __name__ == "__main__":
    main()
