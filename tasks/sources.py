"""User data files as DVC dependencies of the ``prepare`` stage: a file replaced in place makes
its stage stale for DVC itself (``dvc status``, ``dvc repro``, ``dvc exp run``, every
``veilbench run`` mode).

``dvc.yaml`` cannot name a file that only some data sets have (a ``foreach`` template is the same
for every item, and DVC interpolates no missing key and no list into ``deps``). So the file each
data set's ``prepare`` reads is written to :data:`SOURCES_FILE`, ``data/sources.yaml``, which
``dvc.yaml`` loads as ``vars``; DVC merges its ``datasets`` mapping into that of ``params.yaml``,
so every ``datasets.<name>`` item carries ``source_file``:

* ``options.path`` for a user file (a file, or a folder of IDX files), relative to the project
  root when it lies under it, else absolute (DVC hashes files outside the repository too);
* :data:`BUILTIN_SOURCE`, the module naming the registered loaders, for embedded, generated and
  public sources (their data come with the code).

``veilbench run`` rewrites the file before DVC plans (:func:`write_sources`; ``python -m
tasks.sources --write`` does it by hand), and ``prepare`` refuses to run under DVC when the file
does not name the path it reads (:func:`check_sources`): after an edit of ``datasets`` DVC would
otherwise hash another file than the one prepared. ``prepare`` also records the SHA-256 of the user
file (:func:`source_digest`) in its manifest's ``params`` as ``source_sha256``.

This module imports no Prefect (``veilbench run`` calls it before Prefect's settings are fixed).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path
from typing import Any

from tasks.common import load_params
from veilbench.io import atomic_write_text, file_sha256
from veilbench.validation import UsageError

#: The generated vars file of ``dvc.yaml``, relative to the project root.
SOURCES_FILE = "data/sources.yaml"
#: The ``source_file`` of a data set that reads no user file.
BUILTIN_SOURCE = "veilbench/datasets/registry.py"

_HEADER = """\
# What each data set's `prepare` stage reads, as a DVC dependency (dvc.yaml loads this file as `vars`).
# Written from params.yaml's `datasets` by `veilbench run` (or `python -m tasks.sources --write`): do not edit.
"""


def _user_path(root: Path, options: dict[str, Any]) -> Path | None:
    path = options.get("path")
    if not path:
        return None
    return Path(path) if Path(path).is_absolute() else root / path


def source_file(root: Path, options: dict[str, Any]) -> str:
    """The ``source_file`` entry of a data set whose loader options are ``options`` (module docstring)."""
    path = options.get("path")
    if not path:
        return BUILTIN_SOURCE
    absolute = Path(os.path.normpath(_user_path(Path(root).resolve(), options)))
    try:
        return absolute.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(absolute)


def sources(root: Path, params_path: str | Path | None = None) -> dict[str, dict[str, dict[str, str]]]:
    """The content of :data:`SOURCES_FILE` for the params at ``params_path`` (default: ``root``'s)."""
    cfg = load_params(params_path, root)
    return {"datasets": {name: {"source_file": source_file(root, d.options)} for name, d in cfg.datasets.items()}}


def _render(content: dict[str, Any]) -> str:
    import yaml

    return _HEADER + yaml.safe_dump(content, sort_keys=True, default_flow_style=False)


def write_sources(root: Path, params_path: str | Path | None = None) -> bool:
    """Write :data:`SOURCES_FILE` under ``root`` unless it already holds :func:`sources`; returns
    True when it was (re)written."""
    target = Path(root) / SOURCES_FILE
    text = _render(sources(root, params_path))
    try:
        if target.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    atomic_write_text(target, text)
    return True


def check_sources(root: Path, dataset: str, options: dict[str, Any]) -> None:
    """Raise :class:`UsageError` when :data:`SOURCES_FILE` does not name the file ``prepare`` of
    ``dataset`` reads (``options``): the stage's DVC dependency would be another file."""
    import yaml

    target = Path(root) / SOURCES_FILE
    want = source_file(root, options)
    try:
        got = (yaml.safe_load(target.read_text(encoding="utf-8")) or {})["datasets"][dataset]["source_file"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        got = None
    if got != want:
        raise UsageError(f"{target}: names {got!r} as the file of datasets.{dataset}, but params.yaml reads {want!r}; "
                         f"run `python -m tasks.sources --write` (veilbench run does it) and run again")


def source_digest(path: Path) -> str:
    """SHA-256 of a user data file, or of a folder's files (their relative names and bytes, sorted)."""
    if path.is_file():
        return file_sha256(path)
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0" + file_sha256(f).encode())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    """``python -m tasks.sources [--write]``: check (exit 1 when out of date) or rewrite :data:`SOURCES_FILE`."""
    from tasks.paths import repo_root

    parser = argparse.ArgumentParser(description="data/sources.yaml: the file each data set's prepare stage reads")
    parser.add_argument("--write", action="store_true", help="rewrite data/sources.yaml from params.yaml")
    args = parser.parse_args(argv)
    root = repo_root()
    if args.write:
        print(f"{root / SOURCES_FILE}: {'written' if write_sources(root) else 'up to date'}")
        return 0
    target = root / SOURCES_FILE
    current = target.read_text(encoding="utf-8") if target.is_file() else None
    if current != _render(sources(root)):
        print(f"{target}: out of date; run: python -m tasks.sources --write")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
