"""The code each stage runs, derived from its imports: one list for the cell keys and ``dvc.yaml``.

A stage's *code closure* is the set of project source files (``veilbench/``, ``tasks/``) reachable
from its entry modules by ``import`` statements, read statically from the syntax tree (imports inside
functions count: the families import torch and UMAP lazily, and so may import project modules the
same way). Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``, so those are in.

* The cell stages (release, integrate, attack, evaluate) run the family module registered in
  :data:`veilbench.families.FAMILY_MODULES` (imported by name, which no syntax tree shows) and
  ``tasks/sweep.py``; evaluate also runs :mod:`veilbench.crossfamily`.
* prepare, embed and report run ``tasks/<stage>.py`` (report also ``tasks/crossfamily_report.py``).

Modules that decide *where* and *how* results are logged or read, but not *what* they are, are left
out (:data:`NOT_RESULT_CODE`): the MLflow logging, progress display, paths and the environment
variables a run pins for its stages (:mod:`tasks.environment`), the parsing of ``params.yaml``
(:mod:`veilbench.config`, :mod:`tasks.common`), whose product, the resolved options of each cell,
is itself hashed into every input key and listed as the stages' DVC ``params``, and this module,
which computes the keys. So editing the logging or the params schema does not recompute every cell.

The closure is used twice: :func:`code_digest` hashes it into every cell's input key, and
``python -m tasks.codedeps --write`` writes it into the stages' ``deps`` in ``dvc.yaml`` (a test
checks that the two agree, so a new import cannot leave DVC saying "up to date" on stale outputs).

:func:`code_digest` hashes what the code *does*, not how it is written down: each file's syntax
tree with every docstring and every other bare string statement removed (comments are not in the
tree; nor are blank lines, line breaks or spacing), serialised field by field with empty and
``None`` fields left out (:func:`canonical_source`, the same text whichever supported Python
version parses it). So a docstring or comment edit recomputes no cell, and any change to a
statement, an expression, a literal or a name recomputes the cells that run it.
In ``dvc.yaml`` a cell stage lists ``veilbench/${item.family}`` plus what any family's closure
needs outside its own package, so a module shared by two families is a dependency of both.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import sys
import threading
from functools import lru_cache
from pathlib import Path

from veilbench.stages import STAGES as CELL_STAGES

#: Held while a closure is read from the syntax trees: ``ast.parse`` is not thread-safe in CPython 3.11
#: (two threads parsing at once can fail with ``SystemError: AST constructor recursion depth mismatch``),
#: and cells of several stages start in worker threads. :func:`tasks.sweep.begin_stage` also computes
#: its stage's digest in the scheduling thread, before its cells start.
_PARSE_LOCK = threading.Lock()

#: Top-level packages whose modules count as project code.
PROJECT_PACKAGES = ("veilbench", "tasks")

#: Where results are logged, shown or read from, not what they are: never part of a closure.
NOT_RESULT_CODE = frozenset({"tasks/tracking.py", "tasks/progress.py", "tasks/paths.py", "tasks/__init__.py",
                             "tasks/common.py", "tasks/environment.py", "veilbench/config.py", "tasks/codedeps.py"})

FILE_STAGES = {"prepare": ("tasks/prepare.py",), "embed": ("tasks/embed.py",),
               "report": ("tasks/report.py", "tasks/crossfamily_report.py")}


def project_root() -> Path:
    """The folder holding the ``veilbench`` package (the repository root of this checkout)."""
    import veilbench

    return Path(veilbench.__file__).resolve().parents[1]


def _module_file(root: Path, module: str) -> Path | None:
    """``a.b`` → ``a/b.py`` or ``a/b/__init__.py`` under ``root``, if it is project code."""
    parts = module.split(".")
    if parts[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_modules(path: Path, module: str) -> set[str]:
    """Dotted names of every module ``path`` (module ``module``) imports, at any depth of its tree."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # submodules imported by name
    return found


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@lru_cache(maxsize=None)
def closure(entries: tuple[str, ...], root: Path | None = None) -> frozenset[str]:
    """Project files (relative POSIX paths) reachable by imports from the modules ``entries``
    (dotted names), their parent packages included, :data:`NOT_RESULT_CODE` excluded."""
    root = root or project_root()
    with _PARSE_LOCK:
        return _closure(entries, root)


def _closure(entries: tuple[str, ...], root: Path) -> frozenset[str]:
    seen: dict[str, Path] = {}
    todo = [m for e in entries for m in _with_parents(e)]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        path = _module_file(root, module)
        if path is None:
            continue
        seen[module] = path
        todo.extend(m for imported in _imported_modules(path, module) for m in _with_parents(imported))
    files = {p.relative_to(root).as_posix() for p in seen.values()}
    return frozenset(files - NOT_RESULT_CODE)


def _family_module(family: str) -> str:
    from veilbench.families import FAMILY_MODULES

    return FAMILY_MODULES[family]


def cell_entries(family: str, stage: str) -> tuple[str, ...]:
    """Entry modules of a cell stage of ``family``."""
    extra = ("veilbench.crossfamily",) if stage == "evaluate" else ()
    return (_family_module(family), "tasks.sweep", *extra)


def stage_closure(stage: str, family: str | None = None) -> frozenset[str]:
    """The code closure of ``stage`` (of ``family``'s cells for the cell stages)."""
    if stage in CELL_STAGES:
        if family is None:
            raise ValueError(f"stage {stage!r} runs a family's code: give family")
        return closure(cell_entries(family, stage))
    modules = tuple(p[: -len(".py")].replace("/", ".") for p in FILE_STAGES[stage])
    if stage == "report":  # each family's report module, imported by name (tasks.report.families)
        from veilbench.families import FAMILY_MODULES

        modules += tuple(m.rpartition(".")[0] + ".report" for m in FAMILY_MODULES.values())
    return closure(modules)


def _is_bare_string(node: ast.AST) -> bool:
    """A statement that is only a string: a docstring, or an attribute's docstring below it."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def canonical_source(node: ast.AST) -> str:
    """``node`` as text: its type and its fields in order, recursively, without bare string
    statements (:func:`_is_bare_string`) and without fields that are empty or ``None`` (newer
    Pythons add empty ones, e.g. ``type_params``); positions (line, column) are not fields."""
    parts = []
    for name, value in ast.iter_fields(node):
        if isinstance(value, list):
            items = [v for v in value if not _is_bare_string(v)]
            if items:
                parts.append(f"{name}=[{','.join(_item(v) for v in items)}]")
        elif value is not None:
            parts.append(f"{name}={_item(value)}")
    return f"{type(node).__name__}({','.join(parts)})"


def _item(value: object) -> str:
    return canonical_source(value) if isinstance(value, ast.AST) else repr(value)


#: SHA-256 of a file's bytes → SHA-256 of its :func:`canonical_source`: each version of a file is
#: parsed once per process.
_FILE_DIGESTS: dict[bytes, str] = {}


def file_digest(path: Path) -> str:
    """SHA-256 of the :func:`canonical_source` of the Python file ``path``."""
    data = path.read_bytes()
    key = hashlib.sha256(data).digest()
    if key not in _FILE_DIGESTS:
        with _PARSE_LOCK:
            tree = ast.parse(data, filename=str(path))
            _FILE_DIGESTS[key] = hashlib.sha256(canonical_source(tree).encode()).hexdigest()
    return _FILE_DIGESTS[key]


def code_digest(family: str, stage: str = "release") -> str:
    """SHA-256 over the path and :func:`file_digest` of every file in the code closure of
    ``family``'s ``stage``: a docstring or comment edit leaves it unchanged (module docstring)."""
    root = project_root()
    h = hashlib.sha256()
    for rel in sorted(stage_closure(stage, family)):
        h.update(rel.encode())
        h.update(file_digest(root / rel).encode())
    return h.hexdigest()


def collapse(files: set[str] | frozenset[str], root: Path | None = None) -> list[str]:
    """Shortest list of paths naming exactly ``files``: a folder whose every ``.py`` file (at any
    depth) is in ``files`` is named instead of its files."""
    root = root or project_root()
    files = set(files)

    def complete(folder: Path) -> bool:
        return all(p.relative_to(root).as_posix() in files for p in folder.rglob("*.py")
                   if "__pycache__" not in p.parts)

    out: set[str] = set()
    for rel in files:
        path = root / rel
        best = rel
        for parent in path.parents:
            if parent == root or not complete(parent):
                break
            best = parent.relative_to(root).as_posix()
        out.add(best)
    # drop paths inside another listed folder
    return sorted(p for p in out if not any(p != q and p.startswith(q + "/") for q in out))


def dvc_code_deps(stage: str, families: list[str] | None = None) -> list[str]:
    """The code ``deps`` of ``stage`` in ``dvc.yaml``: for a cell stage ``veilbench/${item.family}``
    followed by what the families' closures need outside their own package."""
    if stage not in CELL_STAGES:
        return collapse(stage_closure(stage))
    from veilbench.families import FAMILY_MODULES

    shared: set[str] = set()
    for family in families or sorted(FAMILY_MODULES):
        own = f"veilbench/{family}/"
        shared |= {f for f in stage_closure(stage, family) if not f.startswith(own)}
    return ["veilbench/${item.family}", *collapse(shared)]


def _is_code(dep: str) -> bool:
    return dep.startswith(("veilbench/", "veilbench$", "tasks/")) or dep == "veilbench/${item.family}"


def _stage_deps(stage_def: dict) -> list:
    body = stage_def.get("do", stage_def)
    return body["deps"]


def check_dvc_yaml(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Stages whose code deps in ``dvc.yaml`` differ from the derived ones: stage → (missing, extra)."""
    import yaml

    stages = yaml.safe_load(path.read_text(encoding="utf-8"))["stages"]
    problems: dict[str, tuple[list[str], list[str]]] = {}
    for stage, definition in stages.items():
        listed = [d for d in _stage_deps(definition) if isinstance(d, str) and _is_code(d)]
        derived = dvc_code_deps(stage)
        missing = [d for d in derived if d not in listed]
        extra = [d for d in listed if d not in derived]
        if missing or extra:
            problems[stage] = (missing, extra)
    return problems


def write_dvc_yaml(path: Path) -> list[str]:
    """Rewrite the code deps of every stage in ``dvc.yaml`` (comments and data deps kept); returns
    the stages whose deps changed."""
    from ruamel.yaml import YAML

    ryaml = YAML()
    ryaml.preserve_quotes = True
    ryaml.width = 4096
    ryaml.indent(mapping=2, sequence=4, offset=2)
    doc = ryaml.load(path.read_text(encoding="utf-8"))
    changed = []
    for stage, definition in doc["stages"].items():
        deps = _stage_deps(definition)
        data = [d for d in deps if not (isinstance(d, str) and _is_code(d))]
        derived = dvc_code_deps(stage)
        if [d for d in deps if isinstance(d, str) and _is_code(d)] != derived:
            changed.append(stage)
            deps.clear()
            deps.extend([*derived, *data])
    if changed:
        from io import StringIO

        buf = StringIO()
        ryaml.dump(doc, buf)
        path.write_text(buf.getvalue(), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the code deps in dvc.yaml")
    parser.add_argument("--dvc-yaml", type=Path, default=None)
    args = parser.parse_args(argv)
    path = args.dvc_yaml or project_root() / "dvc.yaml"
    if args.write:
        changed = write_dvc_yaml(path)
        print(f"{path}: code deps rewritten for {', '.join(changed)}" if changed else f"{path}: up to date")
        return 0
    problems = check_dvc_yaml(path)
    for stage, (missing, extra) in problems.items():
        print(f"{stage}: missing {missing}, extra {extra}")
    if problems:
        print("run: python -m tasks.codedeps --write", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
