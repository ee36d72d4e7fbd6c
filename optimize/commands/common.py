"""What several commands share: flags generated from a stage's config dataclass, the data
options of the QA training commands, and what a user reads when the Hub cannot be reached."""
from __future__ import annotations

import argparse
import shutil
import tempfile
from dataclasses import MISSING, fields
from pathlib import Path


def positive_int(text: str) -> int:
    """An argparse type for counts (rounds, steps): a whole number ≥ 1, said in one line by argparse otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"use a whole number ≥ 1, not {text!r}")
    return value


def flags_given(args: argparse.Namespace, add_arguments, names, *required: str) -> list[str]:
    """Which of `names` the command line set away from their defaults (as `--flag`): what a command refuses where it
    would ignore them. `required`: the arguments the parser needs to parse an otherwise empty command line."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = vars(parser.parse_args(list(required)))
    return ["--" + name.replace("_", "-") for name in names if getattr(args, name) != defaults[name]]


def data_options(config, args: argparse.Namespace) -> None:
    """--no-bf16, --full-data, --answerability-stage and --data (where the command has them):
    train-qa, prune and sweep-qa."""
    from optimize.evaluate import squad

    if getattr(args, "no_bf16", False):
        config.bf16 = False
    if getattr(args, "full_data", False):
        config.extra_data, config.split = (squad.TRAIN_HEAD_PATH, squad.SQUAD11_TRAIN_PATH), squad.WIDE_VALIDATION
    if getattr(args, "answerability_stage", False):
        config.extra_data, config.split = (squad.TRAIN_HEAD_PATH,), squad.WIDE_VALIDATION
    if getattr(args, "data", None):
        config.data = args.data


def config_flags(parser: argparse.ArgumentParser, config_class: type, helps: dict[str, str], prefix: str = "") -> None:
    """One `--field-name` per field of `config_class` named in `helps`, its type and default taken
    from the dataclass, so that a flag's default cannot drift from the stage's own."""
    for field in fields(config_class):
        if field.name in helps:
            default = None if field.default is MISSING else field.default
            parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(default) if default is not None else str,
                                default=default, help=f"{prefix}{helps[field.name]} (default {default})")


def config_from(args: argparse.Namespace, config_class: type, helps: dict[str, str]):
    """The dataclass from the flags `config_flags` added."""
    return config_class(**{name: getattr(args, name) for name in helps})


def disk_message(error: BaseException) -> str | None:
    """A full disk, or a folder that cannot be written (SHOWDOWN_ARTIFACTS, --output): one line, not a traceback."""
    import errno

    if not isinstance(error, OSError):
        return None
    if error.errno == errno.ENOSPC:
        return f"no space left on the device ({error.filename or 'disk full'}): free some and run it again"
    unwritable = {errno.EACCES: "permission denied", errno.EROFS: "a read-only file system",
                  **dict.fromkeys((errno.ENOTDIR, errno.EEXIST), "a file stands where a folder is needed")}
    if error.errno in unwritable and error.filename:
        return f"cannot write {error.filename}: {unwritable[error.errno]} (set SHOWDOWN_ARTIFACTS or --output elsewhere)"
    return None


def network_message(error: BaseException) -> str | None:
    """The Hub unreachable or refusing (push, deploy-space, a Hub model): what happened and what to check."""
    import requests
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(error, HfHubHTTPError) and error.response is not None:
        status = error.response.status_code
        hint = ": is HF_TOKEN set, and may it write there?" if status in (401, 403) else ""
        return f"the Hub answered {status} for {error.response.url}{hint}"
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(error, OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set: unset it to reach the Hub"
    if isinstance(error, requests.exceptions.ConnectionError):
        url = getattr(error.request, "url", None) or "the Hub"
        return f"could not reach {url.split('/api/')[0]}: check the network (or HF_ENDPOINT) and run it again"
    return None


def writable_output(path: Path | None) -> Path | None:
    """Check `--output` before the minutes (bench) or hours (training) that end by writing there: a folder
    this process can write into, or one it could create. Nothing is left behind."""
    from models.errors import InputError

    if path is None:
        return None
    if path.exists() and not path.is_dir():
        raise InputError(f"--output {path} is a file, not a folder")
    existing = next(parent for parent in (path, *path.parents) if parent.exists())
    try:
        shutil.rmtree(tempfile.mkdtemp(prefix=".write-check-", dir=existing))
    except OSError as error:
        raise InputError(f"--output {path}: cannot write in {existing} ({error.strerror or error})") from None
    return path
