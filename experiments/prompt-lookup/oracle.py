"""Issue 53: how much could any prompt-lookup policy gain on the bench's reading prompt? Lookup is exact on the
filled graph, so the 64 tokens `optimized` writes are fixed; what a drafting policy changes is only how many passes
write them. This replays the bench's text under three drafters, with no model call beyond the one greedy decoding:
- `shipped`: PromptLookup + DraftPacer as models/decoding.py runs them;
- `oracle`: drafts only where the n-gram draft's first token is right, exactly as long as it stays right (at most
  `draft_tokens`), so no pass is wasted: the ceiling of this drafter's matches;
- `oracle, 1-gram`: the same, matching down to a single token (a wider net, the same ceiling idea).
The time of each schedule is priced with pass_width.py's measured prices (a pass over w positions, in one-position
steps), so the ratio is the best lookup could do over plain decoding at those prices.

    PYTHONPATH=. python experiments/prompt-lookup/oracle.py [variant]
"""
from __future__ import annotations

import json
import sys

from models import generation
from models.catalog import default_preset
from models.decoding import DraftPacer, PromptLookup
from models.runners import load_runner
from optimize.bench.run import REWRITE_PROMPT
from optimize.evaluate import reading

# pass_width.py, experiments/prompt-lookup/results.md: a pass over w positions in one-position steps (`optimized`,
# after a 250-token prompt); widths between the measured ones are interpolated, 9 extrapolated from 6 and 8.
PRICES = {"optimized": {1: 1.0, 2: 1.16, 3: 1.50, 4: 1.58, 6: 2.03, 8: 2.34},
          "pruned-optimized": {1: 1.0, 2: 1.15, 3: 1.30, 4: 1.49, 6: 1.76, 8: 2.06}}


def price(variant: str, width: int) -> float:
    known = PRICES[variant]
    lower = max(w for w in known if w <= width)
    upper = min((w for w in known if w >= width), default=None)
    if upper is None:  # past the last measured width: the last slope
        slope = (known[8] - known[6]) / 2
        return known[8] + slope * (width - 8)
    if upper == lower:
        return known[lower]
    return known[lower] + (known[upper] - known[lower]) * (width - lower) / (upper - lower)


def replay(prompt_ids: list[int], written: list[int], lookup: PromptLookup, oracle: bool) -> list[int]:
    """The pass widths that write `written` after `prompt_ids` (1 = a plain step)."""
    sequence, position, widths = list(prompt_ids), 0, []
    pacer = DraftPacer(lookup)
    while position < len(written):
        room = len(written) - position - 1
        if oracle:
            draft = lookup.draft(sequence, room, lookup.draft_tokens) if position else []
            kept = next((i for i, (d, w) in enumerate(zip(draft, written[position:])) if d != w), len(draft))
            draft = draft[:kept]
        else:
            draft = lookup.draft(sequence, room, pacer.length) if position and pacer.ready() else []
            kept = next((i for i, (d, w) in enumerate(zip(draft, written[position:])) if d != w), len(draft))
            if draft:
                pacer.settle(len(draft), kept)
        widths.append(len(draft) + 1)
        new = written[position:position + kept + 1]
        sequence += new
        position += len(new)
    return widths


def main(variant: str) -> None:
    runner = load_runner("generation", variant, "onnxruntime", default_preset("generation").built_dir(variant))
    question = reading.questions()[0]
    prompts = {"reading": reading.PROMPT.format(context=question.context, question=question.question),
               "rewrite": REWRITE_PROMPT.format(context=question.context)}
    for kind, prompt in prompts.items():
        ids = generation.preprocess(runner.tokenizer, prompt)
        decoder = runner.model.decoder
        decoder.lookup, decoder.wide_steps = None, True  # the filled graph's text: the one lookup keeps exactly
        out = decoder.generate(ids, 64, ignore_eos=True)[0].tolist()
        prompt_ids, written = out[: ids.shape[1]], out[ids.shape[1]:]
        eos = next((i for i, t in enumerate(written) if t in decoder.eos_token_ids), None)
        drafters = {"shipped": (PromptLookup(), False), "oracle": (PromptLookup(), True),
                    "oracle, 1-gram": (PromptLookup(min_ngram=1), True),
                    "oracle, 1-gram, drafts of 16": (PromptLookup(min_ngram=1, draft_tokens=16), True)}
        row = {"variant": variant, "prompt": kind, "prompt_tokens": len(prompt_ids), "end_of_sequence_at": eos,
               "text": runner.tokenizer.decode(written)}
        for name, (lookup, oracle) in drafters.items():
            widths = replay(prompt_ids, written, lookup, oracle)
            cost = sum(price(variant, w) for w in widths)
            row[name] = {"passes": len(widths), "kept": len(written) - len(widths),
                         "decode_speedup_at_measured_prices": round(len(written) / cost, 3)}
        print(json.dumps(row, indent=1), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "optimized")
