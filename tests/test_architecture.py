"""The layers' one direction: the runtime (`models/`) never imports the build (`optimize/`), at the
top of a module or inside a function, so serving never drags the build's code in and the two
cannot form an import circle. Inside the build, stages import downward only, in the order of
ARCHITECTURE.md's stage table. Modules stay small enough to read top to bottom."""
import ast
import re
from pathlib import Path

import pytest

from models.catalog import REPO_ROOT

MAX_LINES = 410  # "~400": a few lines of slack, not a second module's worth


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function; `from a.b import c` also names
    `a.b.c` (a submodule, when it is one). Imports under `if TYPE_CHECKING:` never run, so they
    cannot close a circle, and are left out."""
    tree = ast.parse(path.read_text())
    hints = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
             and getattr(block.test, "id", getattr(block.test, "attr", "")) == "TYPE_CHECKING" for node in ast.walk(block)}
    modules = set()
    for node in ast.walk(tree):
        if id(node) in hints:
            continue
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__")


def import_graph(folders=("models", "optimize")) -> dict[str, set[str]]:
    """module → the project modules it imports (the longest dotted prefix that is a module of ours)."""
    paths = {module_name(p): p for folder in folders for p in (REPO_ROOT / folder).rglob("*.py")}

    def ours(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    return {name: {m for imported in imported_modules(path) if (m := ours(imported)) and m != name}
            for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            if group:
                found.append(sorted([node, *group]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def stage_table() -> list[tuple[str, list[str]]]:
    """ARCHITECTURE.md's stage table, top row first: (stage, the modules it lists under optimize/)."""
    text = (REPO_ROOT / "ARCHITECTURE.md").read_text()
    table = text.split("## `optimize/`", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ") and "`" in line]
    return [(row[1].strip(), re.findall(r"`([\w/]+\.py)`", row[2])) for row in rows]


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "models").rglob("*.py")), ids=lambda p: p.name)
def test_the_runtime_imports_nothing_from_the_build(path):
    upward = sorted(m for m in imported_modules(path) if m.split(".")[0] in ("optimize", "app", "ui", "experiments", "scripts"))
    assert not upward, f"{path.relative_to(REPO_ROOT)} imports {upward}: models/ is the layer below optimize/"


def test_the_checker_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "lazy.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import optimize.train\n"
                      "def build():\n    from optimize.build import build_onnx\n    import optimize.first_start\n")
    assert imported_modules(module) == {"typing", "typing.TYPE_CHECKING", "optimize.build", "optimize.build.build_onnx",
                                        "optimize.first_start"}


def test_the_circle_finder_finds_a_circle_through_a_function_import():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_runtime_or_the_build():
    """Issue 51: 16 build modules and models/catalog ↔ models/user_presets had formed circles, held
    together by imports inside functions."""
    assert circles(import_graph()) == []


def test_build_stages_import_downward_only_in_the_order_architecture_md_lists():
    """Every module of optimize/ is in exactly one row of ARCHITECTURE.md's stage table, and imports
    only modules of its own row or of rows below it (the table, top row first, is the order)."""
    table = stage_table()
    rank = {}
    for position, (stage, modules) in enumerate(table):
        for module in modules:
            assert module not in rank, f"{module} is listed twice"
            rank[f"optimize.{module.removesuffix('.py').replace('/', '.')}"] = (len(table) - position, stage)
    graph = import_graph()
    ours = {name for name in graph if name.startswith("optimize.") and not name.endswith("__init__")
            and (REPO_ROOT / (name.replace(".", "/") + ".py")).exists()}
    assert ours == set(rank), f"in the code, not in the table: {sorted(ours - set(rank))}; " \
                              f"in the table, not in the code: {sorted(set(rank) - ours)}"
    upward = [f"{name} ({rank[name][1]}) imports {other} ({rank[other][1]})" for name in sorted(ours)
              for other in sorted(graph[name]) if other in rank and rank[other][0] > rank[name][0]]
    assert not upward, "\n".join(upward)


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


FIGURE = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:ms|µs|tok/s|tokens/s|x|%|MB|GB|minutes|seconds|s)\b(?!\w)")
# settings, limits, names and examples, not measurements: a spin bound, CPython's and gradio's own
# intervals, the repository's file cap, a chart's empty axis, the "100x" write-up, a format example
NOT_MEASURED = re.compile(r'"100x"|100x write-up|100 µs|default 5 ms|every 50 ms|MB cap|capped at|0-100 ms axis|'
                          r"bar of 0 ms|look like 5x|CI 1\.12x")


def test_measured_figures_live_in_docs_not_in_docstrings_or_comments():
    """Issue 51: a figure in a docstring ages without anyone noticing; the reasons stay in the code,
    the numbers move to docs/measurements.md (and reports/), where one place is corrected."""
    found = []
    for path in (p for folder in ("models", "optimize", "ui") for p in sorted((REPO_ROOT / folder).rglob("*.py"))):
        source = path.read_text()
        texts = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(source))
                 if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        texts += [line[line.index("#"):] for line in source.splitlines() if "#" in line]
        found += [f"{path.relative_to(REPO_ROOT)}: {line.strip()}" for text in texts for line in text.splitlines()
                  if FIGURE.search(line) and not NOT_MEASURED.search(line)]
    assert not found, "\n".join(found)


def test_the_readme_stays_a_page_for_users():
    """Issue 51: what the project is, how to run it, the promises and the current numbers; the history
    of measurements lives in docs/."""
    assert len((REPO_ROOT / "README.md").read_text().splitlines()) <= 150


def test_flags_take_their_defaults_from_the_stages_config_dataclass():
    """Issue 51: `build --model`'s pruning flags are generated from `PruneSpec`, so a default changed
    in the dataclass is the CLI's default too."""
    import argparse

    from models.preset import PruneSpec
    from optimize.commands import build
    from optimize.commands.common import config_from

    parser = argparse.ArgumentParser()
    build.add_arguments(parser)
    assert config_from(parser.parse_args(["--task", "qa"]), PruneSpec, build.PRUNE_FLAGS) == PruneSpec()
    changed = parser.parse_args(["--task", "qa", "--heads-kept", "0.5", "--layers-dropped", "2"])
    assert config_from(changed, PruneSpec, build.PRUNE_FLAGS) == PruneSpec(heads_kept=0.5, layers_dropped=2)
