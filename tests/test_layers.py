"""The layers import downwards only: ``flows → tasks → veilbench``. Read from the syntax trees, so
an import inside a function counts as much as one at the top of a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: package → the top-level packages of this project it must never import
FORBIDDEN = {"veilbench": ("tasks", "flows"), "tasks": ("flows",)}


def imported_packages(path: Path) -> set[str]:
    """The top-level package of every module ``path`` imports (absolute imports; relative ones stay
    inside the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.partition(".")[0])
    return found


def upward_imports(package: str, root: Path = ROOT) -> list[str]:
    """``<file>: <package>`` for every import of ``package``'s modules that goes up a layer."""
    return sorted(f"{path.relative_to(root).as_posix()}: {name}" for path in (root / package).rglob("*.py")
                  for name in imported_packages(path) & set(FORBIDDEN[package]))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_upward_import(package: str) -> None:
    assert upward_imports(package) == []


def test_an_upward_import_is_found_wherever_it_is(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "ok.py").write_text("import veilbench.io\nfrom tasks import paths\n")
    (tmp_path / "tasks" / "lazy.py").write_text("def f():\n    from flows.benchmark import run_benchmark\n")
    (tmp_path / "veilbench").mkdir()
    (tmp_path / "veilbench" / "top.py").write_text("import tasks.sweep as s\nfrom .io import x\n")
    assert upward_imports("tasks", tmp_path) == ["tasks/lazy.py: flows"]
    assert upward_imports("veilbench", tmp_path) == ["veilbench/top.py: tasks"]
