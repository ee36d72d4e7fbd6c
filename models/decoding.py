"""Greedy decoding straight on an ONNX Runtime decoder session, with IO binding.

Why: a token through transformers' `generate` loop and optimum's ORTModelForCausalLM wrapper
took about twice the session's own decode step: half the time was Python around the model (logits processors, stopping criteria,
torch↔numpy copies of the whole KV cache each step). Here the present key/values that ONNX
Runtime returns stay OrtValues and are bound as the next step's past (no copies), and the only
array read back is the last position's logits.

Graphs with GroupQueryAttention (ONNX Runtime GenAI's model builder) also decode into one
pre-allocated key/value buffer per layer, bound as both past and present: the kernel then writes
only the new position instead of copying the whole cache into a fresh present each step (the same
tokens, faster (figures: docs/measurements.md)).

On CUDA the key/value buffers and the present outputs live on the GPU, in the graph's own dtype
(FP16 there); only the last position's logits come back each step.

Prompt lookup (issue 53; the "prompt lookup decoding" of transformers' `prompt_lookup_num_tokens`):
where the text being written repeats the prompt (reading comprehension, rewriting), the tokens that
followed the last n-gram's earlier occurrence are drafted and checked in one pass; the longest
prefix equal to the model's own greedy choices is kept, plus the model's next token. A pass over
several tokens reads the weights once, as a single token's does. Not exact as plain decoding runs:
GroupQueryAttention computes a one-position pass another way than a wider one, so texts part. With
`wide_steps` every pass runs on a graph whose attention always has a filler row (models/attention_filler.py):
no attention pass is one row wide and lookup keeps the text of the same wide decoding exactly. Which
variants decode that way by default is decided per variant (`DecodingConfig`, saved beside the graph):
on `optimized` the wider attention costs plain decoding more than lookup wins back on most prompts, on
`pruned-optimized` lookup pays (experiments/prompt-lookup/results.md, "the rule").
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from models.attention_filler import FILLER_ROWS, filled_session


@dataclass(frozen=True)
class PromptLookup:
    """Drafts from the sequence's own earlier tokens: the longest of the last `max_ngram`..`min_ngram`
    tokens that occurred before, and the tokens that followed it there. A draft costs a wider pass,
    so its length adapts as assistant-model drafting does in transformers: `start_tokens` at first,
    +2 after a draft kept whole, the kept length + 1 after one kept in part (at most `draft_tokens`);
    after a draft that kept nothing, the next `backoff` steps (doubling while drafts keep failing, up
    to `max_backoff`) do not draft, so text that does not repeat its prompt decodes near plain speed."""

    max_ngram: int = 3
    min_ngram: int = 2
    draft_tokens: int = 8
    start_tokens: int = 2
    backoff: int = 4
    max_backoff: int = 32

    def draft(self, sequence: list[int], room: int, length: int | None = None) -> list[int]:
        limit = min(length or self.draft_tokens, room)
        if limit <= 0:
            return []
        for size in range(min(self.max_ngram, len(sequence) - 1), self.min_ngram - 1, -1):
            tail, first = sequence[-size:], sequence[-size]
            for start in range(len(sequence) - size - 1, -1, -1):  # the most recent earlier occurrence
                # the first token before the slice: a miss on a long prompt had cost a slice per position
                if sequence[start] == first and sequence[start:start + size] == tail:
                    return sequence[start + size:start + size + limit]
        return []


class DraftPacer:
    """One generation's drafting schedule under `lookup` (its docstring says why): whether this step drafts,
    how long a draft to ask for, and the back-off after a draft that kept nothing."""

    def __init__(self, lookup: PromptLookup):
        self.lookup = lookup
        self.pause, self.wait, self.length = 0, lookup.backoff, lookup.start_tokens  # steps left without drafting; the next pause

    def ready(self) -> bool:
        """Whether this step may draft; counts a paused step down."""
        ready = self.pause == 0
        self.pause = max(self.pause - 1, 0)
        return ready

    def settle(self, drafted: int, kept: int) -> None:
        """After a checked draft of `drafted` tokens of which the first `kept` were the model's own."""
        lookup = self.lookup
        if kept == 0:
            self.pause, self.wait, self.length = self.wait, min(2 * self.wait, lookup.max_backoff), lookup.start_tokens
        else:
            self.wait = lookup.backoff
            self.length = min(self.length + 2, lookup.draft_tokens) if kept == drafted else kept + 1


DECODING_FILE = "decoding.json"


@dataclass(frozen=True)
class DecodingConfig:
    """How a built ONNX decoder decodes by default, saved beside its graph: its files, and so the records keyed
    by them (optimize/evaluate/records.py), then say which texts it writes. `prompt_lookup`: exact lookup,
    every pass on the filled graph (`GreedyDecoder.use_lookup`)."""

    prompt_lookup: bool = False

    def save(self, directory: Path) -> None:
        (Path(directory) / DECODING_FILE).write_text(json.dumps(asdict(self)) + "\n")

    @classmethod
    def load(cls, directory: Path) -> DecodingConfig:
        saved = Path(directory) / DECODING_FILE
        return cls(**json.loads(saved.read_text())) if saved.exists() else cls()


class GreedyDecoder:
    def __init__(self, session, eos_token_ids: set[int], kv_heads: int | None = None, head_dim: int | None = None,
                 shares_kv_buffer: bool = False, device: str = "cpu", filled_session: Callable[[], object] | None = None,
                 filled: bool = False):
        """`filled`: `session` is the filled graph itself (models/attention_filler.py), the only one a variant
        that decodes with lookup loads: every pass is wide, and the one-row graph's memory is not spent."""
        import onnxruntime

        self.session = session
        self.ortvalue = onnxruntime.OrtValue
        self.device = device
        inputs = {i.name: i for i in session.get_inputs()}
        self.past_names = [n for n in inputs if n.startswith("past_key_values.")]
        # present.N.key of one step is past_key_values.N.key of the next (matched by name, not order)
        self.present_names = [n.replace("past_key_values.", "present.") for n in self.past_names]
        self.has_position_ids = "position_ids" in inputs
        self.has_logits_to_keep = "logits_to_keep" in inputs  # optimize/export/onnx.py add_logits_to_keep
        _, heads, _, dim = inputs[self.past_names[0]].shape  # symbolic in some exports: then from the config
        heads, dim = heads if isinstance(heads, int) else kv_heads, dim if isinstance(dim, int) else head_dim
        self.kv_dtype = np.float16 if "float16" in inputs[self.past_names[0]].type else np.float32
        self.logits_dtype = np.float16 if "float16" in session.get_outputs()[0].type else np.float32
        self.empty_past = np.zeros((1, heads, 0, dim), dtype=self.kv_dtype)
        self.eos_token_ids = eos_token_ids
        self.vocab_size = session.get_outputs()[0].shape[-1]
        self.shares_kv_buffer = shares_kv_buffer and self.has_logits_to_keep and isinstance(self.vocab_size, int)
        self.prefix: tuple[tuple[int, ...], list[np.ndarray] | None] = ((), None)  # see cache_prefix
        self.lookup: PromptLookup | None = None  # drafts checked in one pass (shared-buffer graphs only)
        self.filled = filled
        self.wide_steps = filled  # every attention pass ≥ 2 rows wide (the filled graph): lookup then keeps the text exactly
        self._filled_factory, self._filled = filled_session, None  # the filled graph's session, made on first use
        self.last_lookup = {"drafted": 0, "accepted": 0, "passes": 0}  # of the last generate() with lookup on
        self.last_cached_prompt_tokens = 0  # of the last generate(): the template prefix read from its cache

    def _bind(self, binding, ids: np.ndarray, past, past_length: int, logits_kept: int) -> None:
        binding.clear_binding_inputs()
        binding.clear_binding_outputs()
        self._bind_step_inputs(binding, ids, past_length, FILLER_ROWS if self.filled else 0)
        if self.has_logits_to_keep:
            binding.bind_cpu_input("logits_to_keep", np.array([logits_kept], dtype=np.int64))
        for name, value in zip(self.past_names, past):
            binding.bind_ortvalue_input(name, value)
        binding.bind_output("logits")
        for name in self.present_names:
            binding.bind_output(name, self.device)

    def _bind_step_inputs(self, binding, ids: np.ndarray, past_length: int, filler: int = 0) -> None:
        """`filler`: the filled graph's extra attention rows, counted by the mask (models/attention_filler.py)."""
        length = ids.shape[1]
        binding.bind_cpu_input("input_ids", ids)
        binding.bind_cpu_input("attention_mask", np.ones((1, past_length + length + filler), dtype=np.int64))
        if self.has_position_ids:
            binding.bind_cpu_input("position_ids", np.arange(past_length, past_length + length, dtype=np.int64)[None])

    def _copying_steps(self) -> Callable[[np.ndarray, int], int]:
        """Each step returns fresh present key/values, bound as the next step's past."""
        binding = self.session.io_binding()
        past = [self.ortvalue.ortvalue_from_numpy(self.empty_past)] * len(self.past_names)

        def step(ids: np.ndarray, past_length: int) -> int:
            nonlocal past
            self._bind(binding, ids, past, past_length, logits_kept=1)
            self.session.run_with_iobinding(binding)
            outputs = binding.get_outputs()
            past = outputs[1:]
            return int(outputs[0].numpy()[0, -1].argmax())
        return step

    def _shared_steps(self, max_length: int, prefix_kv: list[np.ndarray] | None = None, filled: bool = False):
        """Past and present bound once to the same per-layer buffers (GroupQueryAttention writes
        the new position into the buffer it read) and the logits to one [1, 1, vocab] buffer:
        a step rebinds only its few small inputs (rebinding everything cost Python time every step). The
        buffers start with `prefix_kv` when given. Returns the step and the buffers. `step(ids,
        past_length, keep)` returns the greedy token after each of the last `keep` positions.
        `filled`: on the filled graph, whose filler row needs one more position of room."""
        filled = filled or self.filled
        filler = FILLER_ROWS if filled else 0
        session = self.filled_session() if filled else self.session
        binding = session.io_binding()
        _, heads, _, dim = self.empty_past.shape
        buffers = []
        for index, (past, present) in enumerate(zip(self.past_names, self.present_names)):
            array = np.zeros((1, heads, max_length + filler, dim), dtype=self.kv_dtype)
            if prefix_kv is not None:
                array[:, :, : prefix_kv[index].shape[2]] = prefix_kv[index]
            buffers.append(self.ortvalue.ortvalue_from_numpy(array, self.device, 0))
            binding.bind_ortvalue_input(past, buffers[-1])
            binding.bind_ortvalue_output(present, buffers[-1])
        logits_for: dict[int, object] = {}  # one logits buffer per number of positions kept
        bound = [0]  # the number the binding holds now: rebound only when it changes

        def step(ids: np.ndarray, past_length: int, keep: int = 1) -> list[int]:
            if keep != bound[0]:
                if keep not in logits_for:
                    logits_for[keep] = self.ortvalue.ortvalue_from_numpy(
                        np.zeros((1, keep, self.vocab_size), dtype=self.logits_dtype))
                binding.bind_ortvalue_output("logits", logits_for[keep])
                binding.bind_cpu_input("logits_to_keep", np.array([keep], dtype=np.int64))
                bound[0] = keep
            self._bind_step_inputs(binding, ids, past_length, filler)
            session.run_with_iobinding(binding)
            return logits_for[keep].numpy()[0].argmax(-1).tolist()
        return step, buffers

    def use_lookup(self, on: bool) -> None:
        """Exact prompt lookup on or off: drafts and every pass on the filled graph together, so the text is the
        same with or without a draft (CPU graphs with a shared key/value buffer only; others decode plainly)."""
        on = on and self.shares_kv_buffer and self.device == "cpu"  # the filled graph is made and measured for the CPU
        self.lookup, self.wide_steps = (PromptLookup() if on else None), on or self.filled

    def filled_session(self):
        """The filled graph's session (models/attention_filler.py): the decoder's own when `filled`, else made the
        first time `wide_steps` decodes."""
        if self.filled:
            return self.session
        if self._filled is None:
            if self._filled_factory is None:
                raise ValueError("wide_steps needs the filled graph's session (OnnxCausalLM makes it)")
            self._filled = self._filled_factory()
        return self._filled

    def cache_prefix(self, prefix_ids: list[int]) -> None:
        """Keep the key/values of a prefix that prompts start with (the chat template's system
        turn: 24 of a ~157-token prompt for SmolLM2), so that a prefill starts after it: causal
        attention makes them the same whatever follows (the HF "100x" write-up's caching of a
        repeated context)."""
        if not self.shares_kv_buffer or not prefix_ids:
            return
        step, buffers = self._shared_steps(len(prefix_ids))  # on the filled graph when it is the decoder's own
        step(np.array([prefix_ids], dtype=np.int64), 0)
        self.prefix = (tuple(prefix_ids), [np.array(buffer.numpy()) for buffer in buffers])

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits at every position of `input_ids` (one pass, empty past): teacher-forced accuracy."""
        binding = self.session.io_binding()
        past = [self.ortvalue.ortvalue_from_numpy(self.empty_past)] * len(self.past_names)
        ids = input_ids.numpy().astype(np.int64)
        self._bind(binding, ids, past, 0, logits_kept=ids.shape[1])
        self.session.run_with_iobinding(binding)
        return torch.from_numpy(binding.get_outputs()[0].numpy().astype(np.float32))

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, streamer=None, ignore_eos: bool = False) -> torch.Tensor:
        """Same contract as transformers' greedy `generate` with a streamer: the prompt, then
        the new tokens are `put` as they come (several at once when a draft was kept); stops at an
        end-of-sequence token (which is kept, as there) unless `ignore_eos` (a timing of exactly
        `max_new_tokens` steps, as llama-bench times)."""
        ids = input_ids.numpy().astype(np.int64)
        past_length = 0
        if self.shares_kv_buffer:
            prefix, prefix_kv = self.prefix
            cached = len(prefix) < ids.shape[1] and tuple(ids[0, : len(prefix)].tolist()) == prefix
            max_length = ids.shape[1] + max_new_tokens + (self.lookup.draft_tokens if self.lookup else 0)
            step, _ = self._shared_steps(max_length, prefix_kv if cached else None, filled=self.wide_steps)
            if cached:
                ids, past_length = ids[:, len(prefix):], len(prefix)
        else:
            copying = self._copying_steps()
            step = lambda ids, past_length, keep=1: [copying(ids, past_length)]  # noqa: E731
        self.last_cached_prompt_tokens = past_length
        if streamer is not None:
            streamer.put(input_ids)
        lookup = self.lookup if self.shares_kv_buffer else None
        sequence, generated = input_ids[0].tolist(), []
        stats = {"drafted": 0, "accepted": 0, "passes": 0}
        pacer = DraftPacer(lookup) if lookup else None
        while len(generated) < max_new_tokens:
            drafting = pacer is not None and pacer.ready() and generated
            draft = lookup.draft(sequence, max_new_tokens - len(generated) - 1, pacer.length) if drafting else []
            step_ids = np.array([[*ids[0].tolist(), *draft]], dtype=np.int64) if draft else ids
            choices = step(step_ids, past_length, len(draft) + 1)
            kept = next((i for i, (drafted, chosen) in enumerate(zip(draft, choices)) if drafted != chosen), len(draft))
            new = [*draft[:kept], choices[kept]]
            if not ignore_eos and (stop := next((i for i, t in enumerate(new) if t in self.eos_token_ids), None)) is not None:
                new = new[: stop + 1]
            if draft:
                stats["drafted"] += len(draft)
                stats["accepted"] += min(kept, len(new))  # drafts past an end-of-sequence were never written
                stats["passes"] += 1
                pacer.settle(len(draft), kept)
            past_length += ids.shape[1] + kept  # the drafted positions after the first miss are overwritten later
            generated.extend(new)
            sequence.extend(new)
            if streamer is not None:
                streamer.put(torch.tensor(new))
            if not ignore_eos and new[-1] in self.eos_token_ids:
                break
            ids = np.array([[new[-1]]], dtype=np.int64)
        self.last_lookup = stats
        if streamer is not None:
            streamer.end()
        return torch.cat([input_ids, torch.tensor([generated], dtype=input_ids.dtype)], dim=1)


class OnnxCausalLM:
    """An exported decoder (optimum's or ONNX Runtime GenAI's model builder's graph) as a runner's
    model: `__call__` gives full-sequence logits like a transformers model, `decoder` generates."""

    def __init__(self, path: Path, session_options: Callable[[], object], provider: str, filled: bool = False):
        """`session_options` makes a fresh SessionOptions for each session (the filled graph's too)."""
        import onnxruntime
        from transformers import AutoConfig

        config = json.loads((path / "config.json").read_text())
        shares_kv_buffer = _has_op(path / "model.onnx", "GroupQueryAttention")
        filled = filled and shares_kv_buffer and provider == "CPUExecutionProvider"
        self.session = (filled_session(path / "model.onnx", session_options(), provider) if filled else
                        onnxruntime.InferenceSession(str(path / "model.onnx"), session_options(), providers=[provider]))
        generation_config = path / "generation_config.json"
        configured = json.loads(generation_config.read_text()).get("eos_token_id") if generation_config.exists() else None
        configured = configured if configured is not None else config.get("eos_token_id")
        eos = set(configured if isinstance(configured, list) else [configured] if configured is not None else [])
        shape = AutoConfig.from_pretrained(path)  # maps each family's names (GPT-2's n_head) to the common ones
        heads = shape.num_attention_heads
        self.max_positions: int | None = getattr(shape, "max_position_embeddings", None)  # the rotary cache's rows
        self.decoder = GreedyDecoder(self.session, eos, kv_heads=getattr(shape, "num_key_value_heads", None) or heads,
                                     head_dim=getattr(shape, "head_dim", None) or shape.hidden_size // heads,
                                     shares_kv_buffer=shares_kv_buffer, filled=filled,
                                     device="cuda" if provider == "CUDAExecutionProvider" else "cpu",
                                     filled_session=lambda: filled_session(path / "model.onnx", session_options(), provider))

    @property
    def device(self) -> str:
        return self.decoder.device

    def __call__(self, input_ids: torch.Tensor, **_ignored) -> SimpleNamespace:
        return SimpleNamespace(logits=self.decoder.logits(input_ids))


def _has_op(model_path: Path, op_type: str) -> bool:
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    return any(node.op_type == op_type for node in graph.node)
