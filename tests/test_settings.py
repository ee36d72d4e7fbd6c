"""Environment settings (models/settings.py): any case, the usual spellings of on and off, and a value a setting does
not take is a ConfigError naming it, never silently the default."""
import os
import subprocess
import sys

import pytest

from models import runners
from models.errors import ConfigError
from models.your_data import Limits


def test_settings_take_any_case_and_the_usual_spellings(monkeypatch):
    monkeypatch.setenv("SHOWDOWN_DEVICE", "CPU")
    assert runners.wanted_device() == "cpu" and str(runners.torch_device()) == "cpu"  # "CPU" used the GPU before
    for spelling, meaning in (("true", True), ("Off", False), ("1", True), ("no", False), ("", None)):
        monkeypatch.setenv("SHOWDOWN_PROMPT_LOOKUP", spelling)
        assert runners.prompt_lookup() is meaning, spelling
    monkeypatch.setenv("SHOWDOWN_THREADS", "2")
    assert runners.cpu_threads() == 2


@pytest.mark.parametrize("variable, value, message", [
    ("SHOWDOWN_DEVICE", "gpu", "use one of auto, cpu, cuda"),
    ("SHOWDOWN_PROMPT_LOOKUP", "maybe", "use 1 or 0"),
    ("SHOWDOWN_THREADS", "two", "use a whole number ≥ 1"),
    ("SHOWDOWN_THREADS", "0", "use a whole number ≥ 1"),
    ("SHOWDOWN_SCORE_MAX_ROWS", "abc", "use a whole number ≥ 1"),  # a ValueError trace at start before
    ("SHOWDOWN_SCORE_MAX_ROWS", "-1", "use a whole number ≥ 1"),  # taken before: every file was refused
])
def test_a_value_a_setting_does_not_take_is_named(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    read = {"SHOWDOWN_DEVICE": runners.wanted_device, "SHOWDOWN_PROMPT_LOOKUP": runners.prompt_lookup,
            "SHOWDOWN_THREADS": runners.cpu_threads, "SHOWDOWN_SCORE_MAX_ROWS": Limits.from_environment}[variable]
    with pytest.raises(ConfigError, match=f"{variable}='{value}': {message}"):
        read()


def test_a_shared_data_folder_without_the_data_stops_a_start_but_never_an_import(monkeypatch, tmp_path):
    """Named but one level off, it had served every variant as "not measured"; checked at import, it had failed every
    Ray replica's `import app`."""
    from models import settings

    monkeypatch.setenv("SHOWDOWN_SHARED_DATA", str(tmp_path))
    with pytest.raises(ConfigError, match="holds none of squad-v2-dev"):
        settings.check_model_settings()
    assert settings.shared_data(check=False) == tmp_path
    (tmp_path / "squad-v2-dev").mkdir()
    assert settings.shared_data() == tmp_path


def test_the_default_thread_count_is_the_cpus_this_process_may_use():
    """os.cpu_count() counts the host's CPUs: in a cpuset (taskset, a container) the models started more threads than
    they had cores, and ran about 1.5x slower than on one thread. In a child pinned to one CPU."""
    from models.catalog import REPO_ROOT

    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); from models import runners; print(runners.cpu_threads())"
    env = {key: value for key, value in os.environ.items() if key != "SHOWDOWN_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "1"


def test_an_empty_artifacts_setting_is_the_default_folder(monkeypatch):
    """`SHOWDOWN_ARTIFACTS=` had built into the current folder; empty means the default, as for every setting."""
    from models.catalog import REPO_ROOT
    from models.preset import artifacts_root

    monkeypatch.setenv("SHOWDOWN_ARTIFACTS", "")
    assert artifacts_root() == REPO_ROOT / "artifacts"
