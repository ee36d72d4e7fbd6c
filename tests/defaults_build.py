"""The real offline defaults built as `python -m optimize build` builds them, one process per task, its variants in
order (as `build --variant X --variant Y`): tests/test_defaults.py's fixture. .ci/run also runs it
(`python -m tests.defaults_build`) beside the other modules' tests, which use their own artifacts folder; the fixture
then finds the variants built and up to date, or builds them and fails with the build's own output."""
from __future__ import annotations

import os
import subprocess
import sys

from models.catalog import REPO_ROOT

BUILT = (("qa", "optimized"), ("qa", "pruned-optimized"),
         ("generation", "optimized"), ("generation", "pruned"), ("generation", "pruned-optimized"))


def repo_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "SHOWDOWN_ARTIFACTS"}  # the repo's own artifacts/
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def build_defaults() -> None:
    """One task after the other: the two tasks' chains side by side with one core each were ~2 minutes shorter on 2
    cores, but a one-thread build calibrates SmoothQuant to other floats (98.05 % instead of 98.25 % agreement for
    generation `pruned-optimized`), so the tests would check another artifact than a user's build."""
    for task in ("qa", "generation"):
        variants = [flag for t, v in BUILT if t == task for flag in ("--variant", v)]
        done = subprocess.run([sys.executable, "-m", "optimize", "build", "--task", task, *variants],
                              cwd=REPO_ROOT, env=repo_env(), capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


if __name__ == "__main__":
    build_defaults()
