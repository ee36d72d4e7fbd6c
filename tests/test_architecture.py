"""The layers' one direction: the runtime (`models/`) never imports the build (`optimize/`), at the
top of a module or inside a function, so serving never drags the build's code in and the two
cannot form an import circle. Modules stay small enough to read top to bottom."""
import ast
from pathlib import Path

import pytest

from models.catalog import REPO_ROOT

MAX_LINES = 410  # "~400": a few lines of slack, not a second module's worth


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "models").rglob("*.py")), ids=lambda p: p.name)
def test_the_runtime_imports_nothing_from_the_build(path):
    upward = sorted(m for m in imported_modules(path) if m.split(".")[0] in ("optimize", "app", "ui", "experiments", "scripts"))
    assert not upward, f"{path.relative_to(REPO_ROOT)} imports {upward}: models/ is the layer below optimize/"


def test_the_checker_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "lazy.py"
    module.write_text("def build():\n    from optimize.build import build_onnx\n    import optimize.first_start\n")
    assert imported_modules(module) == {"optimize.build", "optimize.first_start"}


def test_no_module_is_too_long_to_read_top_to_bottom():
    long = {str(p.relative_to(REPO_ROOT)): n for folder in ("models", "optimize", "ui") for p in (REPO_ROOT / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def function_lengths(paths) -> dict[str, int]:
    out = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[f"{path.relative_to(REPO_ROOT)}:{node.name}"] = node.end_lineno - node.lineno + 1
    return out


def test_the_cli_only_registers_commands_and_no_function_is_too_long_to_read():
    """Issue 51: `__main__.py` registers the commands of optimize/commands/ (each its own module with
    its parser and its run) and `python -m optimize --help` lists every one; no function in the build,
    the runtime or the UI runs past 80 lines; app.py stays under the modules' cap."""
    import subprocess
    import sys

    from optimize.commands import COMMANDS

    assert len((REPO_ROOT / "optimize" / "__main__.py").read_text().splitlines()) <= 60
    listed = subprocess.run([sys.executable, "-m", "optimize", "--help"], cwd=REPO_ROOT, capture_output=True, text=True).stdout
    assert all(command.NAME in listed for command in COMMANDS) and len(COMMANDS) >= 14, listed
    assert {c.__name__.rsplit(".", 1)[-1] for c in COMMANDS} == {c.NAME.replace("-", "_") for c in COMMANDS}
    paths = [REPO_ROOT / "app.py", *(p for folder in ("models", "optimize", "ui") for p in (REPO_ROOT / folder).rglob("*.py"))]
    long = {name: n for name, n in function_lengths(paths).items() if n > 80}
    assert not long, f"functions over 80 lines: {long}"
    assert len((REPO_ROOT / "app.py").read_text().splitlines()) <= MAX_LINES
