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
