"""One runner interface over PyTorch (transformers) and ONNX Runtime (sessions on optimum's exports).

A runner loads a variant once and only runs the model: `qa_logits` for QA, `generate` for
generation (ONNX decoders through models/decoding.py: optimum's generate wrapper cost as much
time per token as the model itself). Tokenisation, span selection, chat templates and decoding live in models/qa.py and
models/generation.py and are shared by every runner, so the comparison is fair.
"""
from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from models import settings
from models.settings import cpu_threads, prompt_lookup, wanted_device  # noqa: F401 - read here, also by callers
from models.answerability import Verifier
from models.catalog import Runtime, Task
from models.errors import VariantUnavailable
from models.qa import QAConfig

ONNX_FILE = "model.onnx"
SESSION_FILE = "session.json"  # ONNX Runtime settings a build measured for its variant (optimize/export/layer_norm.py)


def torch_device() -> torch.device:
    """Where the PyTorch variants run: the GPU when there is one (in fp16, as the ONNX variants get
    FP16 there), unless SHOWDOWN_DEVICE=cpu."""
    return torch.device("cuda" if wanted_device() != "cpu" and torch.cuda.is_available() else "cpu")


@dataclass
class Runner:
    task: Task
    variant: str
    runtime: Runtime
    path: Path
    tokenizer: Any
    model: Any
    qa_config: QAConfig = field(default_factory=QAConfig)

    @property
    def device(self) -> str:
        """Where the model runs: "cpu" or "cuda" (the API's responses say it)."""
        return self.model.device.type if self.runtime == "torch" else self.model.device

    @property
    def context_length(self) -> int | None:
        """Positions the model can read, prompt and new tokens together (None: not stated): past them GPT-2's
        position table and the model builder's rotary cache fail mid-generation."""
        if self.runtime == "torch":
            return getattr(self.model.config, "max_position_embeddings", None)
        return getattr(self.model, "max_positions", None)

    def qa_logits(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits, float32 [windows, tokens]."""
        if self.runtime == "torch":
            return torch_qa_logits(self.model, inputs)
        out = self.model(**inputs)
        return np.asarray(out.start_logits, dtype=np.float32), np.asarray(out.end_logits, dtype=np.float32)

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, streamer=None, ignore_eos: bool = False) -> torch.Tensor:
        """Greedy decoding with the KV cache: transformers' generate loop for PyTorch, the lean
        IO-bound loop of models/decoding.py for ONNX Runtime (same tokens, half the overhead).
        `ignore_eos`: exactly `max_new_tokens` steps, for timings that compare equal work."""
        if hasattr(self.model, "decoder"):  # models.decoding.OnnxCausalLM
            return self.model.decoder.generate(input_ids, max_new_tokens, streamer=streamer, ignore_eos=ignore_eos)
        ids = input_ids.to(self.model.device)
        with torch.inference_mode():
            return self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                min_new_tokens=max_new_tokens if ignore_eos else None,
                do_sample=False, use_cache=True, streamer=streamer, pad_token_id=self.tokenizer.eos_token_id,
            ).cpu()


def torch_qa_logits(model, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A transformers QA model's start and end logits for numpy inputs."""
    accepted = inspect.signature(model.forward).parameters  # DistilBERT has no token types
    with torch.inference_mode():
        out = model(**{k: torch.from_numpy(v).to(model.device) for k, v in inputs.items() if k in accepted})
    return out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()


def load_qa_config(path: Path) -> QAConfig:
    config_file = Path(path) / "qa_config.json"
    if not config_file.exists():
        return QAConfig()
    values = json.loads(config_file.read_text())
    verifier = values.pop("verifier", None)
    return QAConfig(**values, verifier=Verifier.from_dict(verifier) if verifier else None)


def load_runner(task: Task, variant: str, runtime: Runtime, path: Path, device: str | None = None) -> Runner:
    """Load weights from a local directory into the runtime the variant asks for, on `device`
    ("cpu" or "cuda"; default: the GPU when there is one, see torch_device and providers)."""
    from transformers import AutoTokenizer

    from models.decoding import DecodingConfig

    torch.set_num_threads(cpu_threads())
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        wanted = prompt_lookup()
        lookup = task == "generation" and (DecodingConfig.load(path).prompt_lookup if wanted is None else wanted)
        model = _load_torch(task, path, device) if runtime == "torch" else _load_onnx(task, path, device, lookup)
        if task == "generation" and hasattr(model, "decoder"):  # models.decoding.OnnxCausalLM
            from models.generation import template_prefix

            model.decoder.cache_prefix(template_prefix(tokenizer))
            model.decoder.use_lookup(lookup)
    except VariantUnavailable:
        raise
    except Exception as error:  # whatever the loaders raise (onnxruntime's InvalidProtobuf, transformers' OSError…)
        reason = (str(error).strip().splitlines() or [""])[0][:300]
        raise VariantUnavailable(f"could not load {variant} from {path} ({type(error).__name__}: {reason})") from error
    return Runner(task=task, variant=variant, runtime=runtime, path=Path(path), tokenizer=tokenizer,
                  model=model, qa_config=load_qa_config(path))


def _load_torch(task: Task, path: Path, device: str | None = None):
    """fp32 on the CPU; fp16 on a GPU (SDPA attention either way)."""
    from transformers import AutoModelForQuestionAnswering

    device = torch.device(device) if device else torch_device()
    if task == "generation":
        model = load_causal_lm(path)
    else:
        try:
            model = AutoModelForQuestionAnswering.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
        except ValueError:  # an architecture without SDPA attention (DeBERTa-v2) runs its own
            model = AutoModelForQuestionAnswering.from_pretrained(path, dtype=torch.float32).eval()
    return model if device.type == "cpu" else model.to(device, dtype=torch.float16)


def load_causal_lm(path: Path):
    """A decoder whose layers may have different FFN widths (`intermediate_sizes` in its config,
    written by optimize/prune/decoder.py): transformers builds every layer at one width, so
    the MLPs are narrowed before the weights are loaded."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path)
    widths = getattr(config, "intermediate_sizes", None)
    if not widths:
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
    config._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    hidden, bias = config.hidden_size, getattr(config, "mlp_bias", False)
    for layer, width in zip(model.model.layers, widths):
        mlp = layer.mlp
        mlp.gate_proj, mlp.up_proj = torch.nn.Linear(hidden, width, bias=bias), torch.nn.Linear(hidden, width, bias=bias)
        mlp.down_proj = torch.nn.Linear(width, hidden, bias=bias)
    missing, unexpected = model.load_state_dict(load_file(Path(path) / "model.safetensors"), strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise ValueError(f"weights do not match the config: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model.eval()


def session_options(settings: dict | None = None):
    """Spin-waiting bounded to 100 µs. ORT's worker threads spin after each op and run by
    default; that wins for decoding (a short run per token) but in a process holding several
    models (app, report, bench) spinning threads steal the cores from the model that runs next.
    A short bound keeps the decoding gain and gives the next model its cores (docs/measurements.md).
    `settings`: a variant's own (`session_settings`), its session config entries added."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = cpu_threads()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.spin_duration_us", "100")
    for key, value in (settings or {}).get("config_entries", {}).items():
        options.add_session_config_entry(key, value)
    return options


def session_settings(path: Path) -> dict:
    """What the variant's build chose by measuring its CPU, as ONNX Runtime session config entries (`config_entries`:
    the load-time fusions it must not apply, optimize/export/layer_norm.py). Without the file: none."""
    settings_file = Path(path) / SESSION_FILE
    return json.loads(settings_file.read_text()) if settings_file.exists() else {}


def providers() -> list[str]:
    """CUDA first when this onnxruntime build and machine have it (and SHOWDOWN_DEVICE is not cpu)."""
    import onnxruntime

    available = onnxruntime.get_available_providers()
    wanted = ("CPUExecutionProvider",) if wanted_device() == "cpu" else ("CUDAExecutionProvider", "CPUExecutionProvider")
    return [p for p in wanted if p in available]


def _load_onnx(task: Task, path: Path, device: str | None = None, lookup: bool = False):
    """`lookup`: a decoder loads only the filled graph, on which exact prompt lookup runs (models/decoding.py)."""
    from models.decoding import OnnxCausalLM

    if not (Path(path) / ONNX_FILE).exists():
        raise VariantUnavailable(f"{path} has no {ONNX_FILE}")
    provider = "CPUExecutionProvider" if device == "cpu" else providers()[0]
    if task == "qa":
        return OnnxQA(Path(path), session_options(session_settings(path)), provider,
                      cuda_graph=settings.flag("SHOWDOWN_CUDA_GRAPH", True))
    return OnnxCausalLM(Path(path), session_options, provider, filled=lookup)


class OnnxQA:
    """An exported QA encoder run straight on its session, numpy in and out: optimum's
    ORTModelForQuestionAnswering round-trips every call through torch tensors, a few percent of a
    call. On CUDA through IO binding: the inputs are copied to the GPU once, the logits stay there
    until the one copy back; and each window replayed as a CUDA graph where ONNX Runtime accepts
    one (models/static_encoder.py), the dynamic session where it does not (`cuda_graph_error` says why)."""

    def __init__(self, path: Path, options, provider: str, cuda_graph: bool = True):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(str(path / ONNX_FILE), options, providers=[provider])
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.device = "cuda" if provider == "CUDAExecutionProvider" else "cpu"
        self.static, self.cuda_graph_error = None, None
        if self.device == "cuda" and cuda_graph:
            from models.static_encoder import StaticEncoder

            try:  # one window replayed as a CUDA graph (models/static_encoder.py); the dynamic session if not
                self.static = StaticEncoder(path / ONNX_FILE, load_qa_config(path).max_length, options, provider, cuda_graph=True)
            except Exception as error:  # ONNX Runtime refuses graphs with nodes off the GPU: say why, keep serving
                self.cuda_graph_error = f"{type(error).__name__}: {str(error)[:500]}"

    @property
    def cuda_graph(self) -> bool:
        return self.static is not None

    def __call__(self, **inputs: np.ndarray) -> SimpleNamespace:
        feeds = {k: v for k, v in inputs.items() if k in self.input_names}
        if self.static is not None:
            start, end = self.static(feeds)
            return SimpleNamespace(start_logits=start, end_logits=end)
        if self.device == "cpu":
            start, end = self.session.run(["start_logits", "end_logits"], feeds)
            return SimpleNamespace(start_logits=start, end_logits=end)
        binding = self.session.io_binding()
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        for name in ("start_logits", "end_logits"):
            binding.bind_output(name, "cuda")
        self.session.run_with_iobinding(binding)
        start, end = binding.copy_outputs_to_cpu()
        return SimpleNamespace(start_logits=start, end_logits=end)
