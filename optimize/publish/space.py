"""`python -m optimize deploy-space --space ORG/NAME --hub-prefix ORG/NAME`: upload the app to a
Hugging Face Space that serves the variants `python -m optimize push` wrote, so the Space
downloads them on start instead of rebuilding them (minutes of CPU) every time it restarts.

The GitHub workflow (.github/workflows/deploy-space.yml) is a thin shell over `run`; it installs
only huggingface_hub, so this module imports nothing heavier. There, without a token or a Space name, it
prints one line and succeeds: forks and pull requests have no secrets, and that is no failure. By hand it fails.
The token comes from HF_TOKEN (huggingface_hub's own lookup) and is never printed.

Each deploy leaves the Space exactly the app of this checkout: files of the app's own layout that an earlier deploy
uploaded and this one does not (a module since removed) are deleted in the same commit; files outside that layout
(the Hub's .gitattributes, a file a person added) stay. Private variant repos need a token on the Space to be read:
deploy-space says so, and with --token-secret stores its token as the Space's secret HF_TOKEN.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, get_token

from models.catalog import REPO_ROOT, pushed_preset
from models.errors import ConfigError

Device = Literal["cpu", "gpu"]
# What the app needs at runtime, and the README (its YAML header configures the Space). Not the
# weights: the Space reads every variant from the pushed repos. Not tests/ or artifacts/.
SPACE_FILES = ("app.py", "README.md", "models/*.py", "ui/*.py", "optimize/**/*.py", "optimize/**/*.json", "reports/*", "docs/*")
# A Space installs `requirements.txt` only; on GPU hardware it gets the CUDA builds of ONNX Runtime.
REQUIREMENTS: dict[str, str] = {"cpu": "requirements.txt", "gpu": "requirements-gpu.txt"}
PREFIX_VARIABLE = "SHOWDOWN_HUB_PREFIX"  # what models.showdown.Showdown.from_environment reads
TOKEN_SECRET = "HF_TOKEN"  # a Space's secrets are its environment; huggingface_hub reads this one


def refused_repo_id(repo: str) -> str | None:
    """Why the Hub would refuse `repo` as an ORG/NAME repo id, or None (push and deploy-space check every name before
    their first request)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if repo.count("/") != 1:
        return "no ORG/ part" if "/" not in repo else "more than one '/'"
    try:
        validate_repo_id(repo)
    except HFValidationError as error:
        return str(error).splitlines()[0]
    return None


@dataclass(frozen=True)
class SpaceConfig:
    space: str  # ORG/NAME of the Space
    hub_prefix: str  # ORG/NAME given to `python -m optimize push --repo-prefix`
    device: Device = "cpu"
    private: bool = False
    token_secret: bool = False  # store the deploying token as the Space's secret HF_TOKEN (private variant repos)

    def __post_init__(self) -> None:
        # the prefix as push extends it: "org/demo-" would make "org/demo--qa-baseline", which the Hub refuses
        for option, value, names in (("--space", self.space, [self.space]),
                                     ("--hub-prefix", self.hub_prefix, pushed_names(self.hub_prefix))):
            if any(refused_repo_id(name) for name in names):
                raise ConfigError(f"{option} must look like ORG/NAME (letters, digits, '-', '_' or '.'), "
                                  f"not '{value}'.")
        if self.device not in REQUIREMENTS:
            raise ConfigError(f"--device must be one of {', '.join(REQUIREMENTS)}, not '{self.device}'.")


def space_files(device: Device = "cpu") -> dict[str, Path]:
    """Name in the Space -> file here."""
    files = {path.relative_to(REPO_ROOT).as_posix(): path
             for pattern in SPACE_FILES for path in sorted(REPO_ROOT.glob(pattern)) if path.is_file()}
    files["requirements.txt"] = REPO_ROOT / REQUIREMENTS[device]
    return files


def pushed_names(prefix: str) -> list[str]:
    """Every variant repo `python -m optimize push --repo-prefix PREFIX` writes."""
    return [v.source.location for task in ("qa", "generation") for v in pushed_preset(prefix, task).variants]


def pushed_repos(api: HfApi, prefix: str) -> dict[str, bool]:
    """The variant repos under `prefix` that exist -> does a Space need a token to read it (private or gated)? The
    app serves these and reports the others unavailable."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    found = {}
    for repo in pushed_names(prefix):
        try:
            info = api.model_info(repo)
        except GatedRepoError:  # a subclass of RepositoryNotFoundError: it is there, behind a gate
            found[repo] = True
        except RepositoryNotFoundError:
            continue
        else:
            found[repo] = bool(info.private or info.gated)
    return found


def uploaded_by_a_deploy(name: str) -> bool:
    """Whether `name` is a path SPACE_FILES would upload (a file of the app's own layout, from this deploy or an
    earlier one), as Path.glob reads them: `*` within one folder, `**/` across none or any number."""
    def pattern(glob: str) -> str:
        return "".join("(?:.*/)?" if part == "**/" else "[^/]*" if part == "*" else re.escape(part)
                       for part in re.split(r"(\*\*/|\*)", glob))
    return any(re.fullmatch(pattern(glob), name) for glob in (*SPACE_FILES, "requirements.txt"))


def stale_files(api: HfApi, space: str, uploading: dict[str, Path]) -> list[str]:
    """Files of the app's layout already in the Space that this deploy does not upload (an earlier deploy's); not
    files someone else put there (the Hub's .gitattributes, docs/notes/…)."""
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        present = [s.rfilename for s in api.space_info(space).siblings or []]
    except RepositoryNotFoundError:  # its first deploy
        return []
    return sorted(name for name in present if name not in uploading and uploaded_by_a_deploy(name))


@dataclass(frozen=True)
class Deployed:
    uploaded: list[str]
    deleted: list[str]  # an earlier deploy's files this checkout no longer has
    private_repos: list[str]  # variant repos the Space reads only with a token (private or gated)


def deploy(config: SpaceConfig, token: str | None = None) -> Deployed:
    """Create the Space if needed, point it at the pushed repos, upload the app and remove what an earlier deploy
    left of it, in one commit."""
    api = HfApi(token=token)
    repos = pushed_repos(api, config.hub_prefix)
    if not repos:
        raise ConfigError(f"No variant repo under '{config.hub_prefix}' on the Hub: run "
                          f"`python -m optimize push --repo-prefix {config.hub_prefix}` first.")
    files = space_files(config.device)
    stale = stale_files(api, config.space, files)
    api.create_repo(config.space, repo_type="space", space_sdk="gradio", exist_ok=True, private=config.private)
    if config.private:  # create_repo leaves an existing public Space public
        api.update_repo_settings(config.space, private=True, repo_type="space")
    api.add_space_variable(config.space, PREFIX_VARIABLE, config.hub_prefix,
                           description="Hub repos the app serves (written by python -m optimize push)")
    private = sorted(repo for repo, is_private in repos.items() if is_private)
    if private and config.token_secret:
        api.add_space_secret(config.space, TOKEN_SECRET, token,
                             description="reads the private variant repos (python -m optimize deploy-space --token-secret)")
    operations = ([CommitOperationAdd(name, str(path)) for name, path in files.items()]
                  + [CommitOperationDelete(name) for name in stale])
    api.create_commit(config.space, operations, repo_type="space",
                      commit_message=f"Inference Showdown app ({config.device}), variants from {config.hub_prefix}")
    return Deployed(sorted(files), stale, private)


def run(space: str | None, hub_prefix: str | None, device: Device = "cpu", private: bool = False,
        token_secret: bool = False) -> int:
    """The command: skip with one line when unconfigured, else deploy. Settings default to the
    environment the workflow sets (HF_SPACE, SHOWDOWN_HUB_PREFIX, HF_TOKEN)."""
    space = space or os.environ.get("HF_SPACE", "")
    hub_prefix = hub_prefix or os.environ.get(PREFIX_VARIABLE, "")
    token = get_token()
    missing = [name for name, value in (("HF_TOKEN", token), ("HF_SPACE", space), (PREFIX_VARIABLE, hub_prefix))
               if not value]
    if missing and os.environ.get("GITHUB_ACTIONS") == "true":  # a fork or a pull request: no secrets, no failure
        print(f"deploy-space skipped: {', '.join(missing)} not set (the secret HF_TOKEN and the repository "
              f"variables HF_SPACE and {PREFIX_VARIABLE} configure it)")
        return 0
    if missing:  # by hand: say what is missing, and fail
        flags = {"HF_TOKEN": "HF_TOKEN (or `huggingface-cli login`)", "HF_SPACE": "--space ORG/NAME",
                 PREFIX_VARIABLE: "--hub-prefix ORG/NAME"}
        raise ConfigError(f"deploy-space needs {', '.join(flags[name] for name in missing)}")
    config = SpaceConfig(space, hub_prefix, device, private, token_secret)
    done = deploy(config, token)
    removed = f", removed {len(done.deleted)} an earlier deploy left" if done.deleted else ""
    print(f"deployed {len(done.uploaded)} files to Space {config.space} ({config.device}){removed}, "
          f"serving {config.hub_prefix}-*")
    if done.private_repos and token_secret:
        print(f"stored this token as the Space's secret {TOKEN_SECRET}: it reads the {len(done.private_repos)} "
              "private or gated variant repos (it can also write: a read token set in the Space's settings is safer)")
    elif done.private_repos:
        print(f"warning: {len(done.private_repos)} variant repos are private or gated ({', '.join(done.private_repos)}): "
              f"the Space reads them only with a secret {TOKEN_SECRET} (a read token) in its settings; --token-secret "
              "stores this token there", file=sys.stderr)
    elif token_secret:
        print("no variant repo is private or gated: --token-secret stored nothing")
    return 0
