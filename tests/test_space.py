"""`python -m optimize deploy-space` (what .github/workflows/deploy-space.yml runs) against the local
Hub double: the files it uploads, the variable that points the Space at the pushed repos, the Space
starting from those repos without building, and the skip without a token or a Space name."""
import re
from pathlib import Path

import pytest
import yaml

from models.catalog import REPO_ROOT
from optimize.publish.space import space_files
from tests.fake_hub import FakeHub
from tests.test_push import TOKEN

PREFIX, SPACE = "showdown-org/demo", "showdown-org/showdown"
DEPLOY = "import sys\nfrom optimize.__main__ import main\nsys.exit(main(['deploy-space', *sys.argv[1:]]))\n"


def deploy(hub: FakeHub, home: Path, *args: str, token: str = TOKEN, space: str = SPACE, prefix: str = PREFIX,
           actions: bool = False):
    """The workflow's step (`actions`: as GitHub Actions runs it): settings from the environment, empty when a secret
    or variable is unset."""
    code = DEPLOY.replace("sys.argv[1:]", repr(list(args)))
    return hub.run_python(code, home, HF_TOKEN=token, HF_SPACE=space, SHOWDOWN_HUB_PREFIX=prefix,
                          GITHUB_ACTIONS="true" if actions else "")


def test_deploy_uploads_the_app_points_it_at_the_pushed_repos_and_the_space_starts_without_building(
        tiny_qa_dir, tmp_path):
    with FakeHub() as hub:
        hub.add_folder(f"{PREFIX}-qa-baseline", tiny_qa_dir)  # as `optimize push` left it
        done = deploy(hub, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        gpu = deploy(hub, tmp_path, "--device", "gpu", space=f"{SPACE}-gpu")
        assert gpu.returncode == 0, gpu.stderr[-3000:]
        files = hub.repos[SPACE]
        assert hub.repo_types[SPACE] == "space" and hub.variables[SPACE] == {"SHOWDOWN_HUB_PREFIX": PREFIX}
        assert sorted(files) == sorted(space_files())
        for name in ("app.py", "README.md", "requirements.txt", "models/showdown.py", "optimize/publish/space.py",
                     "reports/qa.json", "reports/qa.png", "docs/screenshot.png"):
            assert name in files, name
        assert not [n for n in files if re.match(r"(tests|weights|artifacts|runs|\.github|\.ci)/|.*\.pyc$|requirements-", n)]
        assert files["requirements.txt"] == (REPO_ROOT / "requirements.txt").read_bytes()
        assert hub.repos[f"{SPACE}-gpu"]["requirements.txt"] == (REPO_ROOT / "requirements-gpu.txt").read_bytes()
        header = yaml.safe_load(files["README.md"].decode().split("---")[1])
        assert header["sdk"] == "gradio" and header["app_file"] == "app.py"
        assert all(a == f"Bearer {TOKEN}" for a in hub.authorizations)
        assert TOKEN not in done.stdout + done.stderr and f"deployed {len(files)} files to Space {SPACE}" in done.stdout

        space = tmp_path / "space"  # the Space: only the uploaded files, the variable it was given
        for name, content in files.items():
            (space / name).parent.mkdir(parents=True, exist_ok=True)
            (space / name).write_bytes(content)
        artifacts = tmp_path / "space-artifacts"
        start = (
            "import app\nfrom models.showdown import Showdown\nfrom optimize.first_start import build_missing\n"
            "print('APP', app.__file__)\ns = Showdown.from_environment()\napp.build_ui(s)\n"
            "build_missing(s, progress=lambda message: None)\n"
            "print('STATUS', {(v['task'], v['variant']): v['status'] for v in s.variants()})\n"
            "print('QA', s.answer('The second pig worked.', 'Who worked?', 'baseline')['latency_ms']['total'] > 0)\n"
        )
        started = hub.run_python(start, tmp_path / "space-home", cwd=space, SHOWDOWN_HUB_PREFIX=PREFIX,
                                 SHOWDOWN_ARTIFACTS=str(artifacts), HF_TOKEN="")
    assert started.returncode == 0, started.stderr[-3000:]
    assert f"APP {space / 'app.py'}" in started.stdout and "QA True" in started.stdout
    assert "('qa', 'baseline'): 'ready'" in started.stdout and "('qa', 'optimized'): 'unavailable'" in started.stdout
    assert not artifacts.exists() or not any(artifacts.iterdir())  # fetched, nothing built


@pytest.mark.parametrize("unset", ["token", "space", "prefix"])
def test_deploy_without_a_token_or_space_name_skips_in_the_workflow_and_fails_by_hand(unset, tmp_path):
    """A fork's workflow run has no secrets, which is no failure; a person who left out --space is told so."""
    with FakeHub() as hub:
        done = deploy(hub, tmp_path, **{unset: ""}, actions=True)
        by_hand = deploy(hub, tmp_path, **{unset: ""})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("deploy-space skipped:") and len(done.stdout.splitlines()) == 1
    assert {"token": "HF_TOKEN", "space": "HF_SPACE", "prefix": "SHOWDOWN_HUB_PREFIX"}[unset] in done.stdout
    assert by_hand.returncode == 2 and by_hand.stderr.startswith("error: deploy-space needs "), by_hand.stderr[-2000:]
    assert {"token": "HF_TOKEN", "space": "--space", "prefix": "--hub-prefix"}[unset] in by_hand.stderr
    assert hub.requests == [] and hub.repos == {}


def test_a_second_deploy_removes_what_the_first_left_of_the_app_and_keeps_what_is_not_the_apps(tmp_path):
    """A module removed from the checkout stayed on the Space and could be imported there."""
    with FakeHub() as hub:
        hub.repos[f"{PREFIX}-qa-baseline"] = {"config.json": b"{}"}
        hub.repos[SPACE], hub.repo_types[SPACE] = {".gitattributes": b"*.png filter=lfs\n", "notes.txt": b"mine",
                                                   "docs/notes/mine.md": b"mine", "optimize/retired.py": b"",
                                                   "models/retired.py": b"OLD = 1\n", "reports/old.md": b"old",
                                                   "app.py": b"old app"}, "space"
        done = deploy(hub, tmp_path)
        files = hub.repos[SPACE]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "models/retired.py" not in files and "reports/old.md" not in files
    assert "optimize/retired.py" not in files  # `optimize/**/*.py` reaches the folder's own files too
    assert files[".gitattributes"] == b"*.png filter=lfs\n" and files["notes.txt"] == files["docs/notes/mine.md"] == b"mine"
    assert files["app.py"] == (REPO_ROOT / "app.py").read_bytes()
    assert sorted(set(files) - {".gitattributes", "notes.txt", "docs/notes/mine.md"}) == sorted(space_files())
    assert ", removed 3 an earlier deploy left," in done.stdout


def test_private_variant_repos_are_named_and_the_token_is_stored_as_a_space_secret_only_when_asked(tmp_path):
    """A Space cannot read private repos without a token: it served every variant as unavailable, silently."""
    with FakeHub() as hub:
        hub.repos[f"{PREFIX}-qa-baseline"] = hub.repos[f"{PREFIX}-qa-pruned"] = {"config.json": b"{}"}
        hub.private.add(f"{PREFIX}-qa-pruned")
        hub.repos[f"{PREFIX}-qa-optimized"] = {"config.json": b"{}"}
        hub.gated.add(f"{PREFIX}-qa-optimized")  # public but gated: a Space needs a token for it too
        warned = deploy(hub, tmp_path)
        secrets_after_warning = dict(hub.secrets)
        stored = deploy(hub, tmp_path, "--token-secret")
        hub.private.clear()
        hub.gated.clear()
        public = deploy(hub, tmp_path, "--token-secret")
    assert warned.returncode == 0 and stored.returncode == 0, warned.stderr[-2000:] + stored.stderr[-2000:]
    assert warned.stderr.startswith("warning: 2 variant repos are private or gated (showdown-org/demo-qa-optimized, "
                                    "showdown-org/demo-qa-pruned)"), warned.stderr
    assert "--token-secret" in warned.stderr and secrets_after_warning == {}
    assert hub.secrets == {SPACE: {"HF_TOKEN": TOKEN}}
    assert "secret HF_TOKEN" in stored.stdout and TOKEN not in warned.stdout + warned.stderr + stored.stdout + stored.stderr
    assert public.returncode == 0 and "no variant repo is private or gated: --token-secret stored nothing" in public.stdout


def test_deploy_says_what_to_do_when_nothing_was_pushed_or_a_name_is_malformed(tmp_path):
    with FakeHub() as hub:
        unpushed = deploy(hub, tmp_path)
        malformed = deploy(hub, tmp_path, space="no-org")
        # names the Hub refuses were tracebacks (only the slashes were counted)
        spaced = deploy(hub, tmp_path, space="org/my space")
        dashed = deploy(hub, tmp_path, prefix="org/demo-")
        assert hub.repos == {}
        hub.write_token, hub.repos["org/demo-qa-baseline"] = "hf_theRightOne", {"config.json": b"{}"}
        refused = deploy(hub, tmp_path, prefix="org/demo")  # the Hub's 401 was three lines
    assert unpushed.returncode == 2 and "run `python -m optimize push --repo-prefix showdown-org/demo` first" in unpushed.stderr
    assert malformed.returncode == 2 and "--space must look like ORG/NAME" in malformed.stderr and "not 'no-org'" in malformed.stderr
    assert spaced.returncode == 2 and "not 'org/my space'" in spaced.stderr, spaced.stderr[-2000:]
    assert dashed.returncode == 2 and "--hub-prefix must look like ORG/NAME" in dashed.stderr and "not 'org/demo-'" in dashed.stderr
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr[-2000:]
    assert refused.stderr.startswith("error: the Hub answered 40")
    every = unpushed.stderr + malformed.stderr + spaced.stderr + dashed.stderr + refused.stderr
    assert "Traceback" not in every and list(hub.repos) == ["org/demo-qa-baseline"]


def test_an_offline_hub_setting_is_named_in_one_line():
    from huggingface_hub.errors import OfflineModeIsEnabled

    from optimize.__main__ import user_message

    assert user_message(OfflineModeIsEnabled("Cannot reach https://huggingface.co/api/repos/create: offline mode is "
                                             "enabled.")) == "HF_HUB_OFFLINE is set: unset it to reach the Hub"


def test_the_workflow_is_a_thin_shell_over_the_module_and_installs_only_huggingface_hub(tmp_path):
    workflow = yaml.safe_load((REPO_ROOT / ".github/workflows/deploy-space.yml").read_text())
    # YAML reads `on` as True; a commit of main is deployed only after its ci run passed
    assert workflow[True] == {"workflow_run": {"workflows": ["ci"], "types": ["completed"], "branches": ["main"]},
                              "workflow_dispatch": None}
    assert "workflow_run.conclusion == 'success'" in workflow["jobs"]["deploy"]["if"]
    # a fork's pull request from a branch called main ran ci too: only a push to this repository deploys
    assert "workflow_run.event == 'push'" in workflow["jobs"]["deploy"]["if"]
    assert "workflow_run.head_repository.full_name == github.repository" in workflow["jobs"]["deploy"]["if"]
    ci = yaml.safe_load((REPO_ROOT / ".github/workflows/ci.yml").read_text())
    assert ci["name"] == "ci"
    steps = workflow["jobs"]["deploy"]["steps"]
    assert steps[0]["with"]["ref"] == "${{ github.event.workflow_run.head_sha || github.sha }}"
    runs = " ".join(step.get("run", "") for step in steps)
    assert "python -m optimize deploy-space" in runs and "pip install -q \"$(grep -m1 '^huggingface_hub'" in runs
    env = next(step["env"] for step in steps if "env" in step)
    assert env == {"HF_TOKEN": "${{ secrets.HF_TOKEN }}", "HF_SPACE": "${{ vars.HF_SPACE }}",
                   "SHOWDOWN_HUB_PREFIX": "${{ vars.SHOWDOWN_HUB_PREFIX }}"}
    with FakeHub() as hub:  # what that runner has: huggingface_hub, nothing heavier imported
        imported = hub.run_python("import sys\nimport optimize.publish.space\nprint(sorted(m for m in "
                                  "('torch', 'transformers', 'onnxruntime', 'gradio', 'numpy') if m in sys.modules))",
                                  tmp_path)
    assert imported.stdout.strip() == "[]", imported.stderr[-2000:]


def requirement_lines(name: str) -> list[str]:
    return [line for line in (REPO_ROOT / name).read_text().splitlines() if line and not line.startswith("#")]


def test_gpu_requirements_are_the_cpu_ones_with_onnx_runtimes_cuda_builds():
    cuda_builds = {"onnxruntime==": "onnxruntime-gpu==", "onnxruntime-genai==": "onnxruntime-genai-cuda=="}
    swapped = [next((line.replace(cpu, gpu) for cpu, gpu in cuda_builds.items() if line.startswith(cpu)), line)
               for line in requirement_lines("requirements.txt")]
    assert requirement_lines("requirements-gpu.txt") == swapped
    assert len(set(swapped) - set(requirement_lines("requirements.txt"))) == 2  # both CPU builds were there


def test_a_deploy_error_is_one_line_with_only_huggingface_hub_installed(tmp_path):
    """The workflow installs huggingface_hub alone: turning an error into a line imported the gates, hence numpy,
    and the real error became 119 lines ending in ModuleNotFoundError."""
    import os
    import subprocess
    import sys

    code = ("import sys; sys.modules['numpy'] = None\n"  # as if it were not installed
            "from optimize.__main__ import main; raise SystemExit(main(['deploy-space']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_TOKEN": "x", "HF_SPACE": "o/s",
                               "SHOWDOWN_HUB_PREFIX": "o/n", "HF_HUB_OFFLINE": "0"})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().startswith("error: could not reach") and len(done.stderr.strip().splitlines()) == 1


def test_private_makes_an_existing_public_space_private(tiny_qa_dir, tmp_path):
    """create_repo(exist_ok=True) leaves an existing Space as it was: `--private` deployed to a public Space and
    reported success, the Space still public."""
    with FakeHub() as hub:
        hub.add_folder(f"{PREFIX}-qa-baseline", tiny_qa_dir)
        assert deploy(hub, tmp_path).returncode == 0 and SPACE not in hub.private
        again = deploy(hub, tmp_path, "--private")
        assert again.returncode == 0, again.stderr[-3000:]
        assert SPACE in hub.private


def test_ci_provides_the_squad_dev_file_it_checks(tmp_path):
    """The ci workflow's data step only echoed: on GitHub every test and gate that reads SQuAD skipped. It now fetches
    the pinned file (PROVENANCE.md's repository, commit and sha256) unless the runner has it, and checks it either way.
    Run here on a copy (no network): the file as provided passes, a cut-short one fails the step."""
    import shutil
    import subprocess

    from optimize.evaluate import squad

    ci = yaml.safe_load((REPO_ROOT / ".github/workflows/ci.yml").read_text())
    [step] = [step for step in ci["jobs"]["test"]["steps"] if "squad-v2-dev" in step.get("name", "")]
    target = tmp_path / "shared/data/squad-v2-dev/dev-v2.0.json"
    target.parent.mkdir(parents=True)
    if not squad.DEFAULT_SQUAD_PATH.exists():
        pytest.skip(f"SQuAD data not found at {squad.DEFAULT_SQUAD_PATH}")
    shutil.copy(squad.DEFAULT_SQUAD_PATH, target)
    assert subprocess.run(["bash", "-c", step["run"]], cwd=tmp_path, capture_output=True).returncode == 0
    target.write_bytes(target.read_bytes()[:1000])
    assert subprocess.run(["bash", "-c", step["run"]], cwd=tmp_path, capture_output=True).returncode != 0
