"""User data files as inputs of the ``prepare`` stage: a replaced file makes its stage stale.

``prepare`` records the SHA-256 of a dataset's user file (``options.path``: a file, or a folder
of IDX files; :func:`source_digest`) in its manifest's ``params`` as ``source_sha256``.
:func:`invalidate_replaced_sources`, run by ``veilbench run`` before DVC plans, removes the
output of every dataset whose file has changed since, so DVC rebuilds it (and what depends on it)
instead of reporting it up to date. This module imports no Prefect (``veilbench run`` calls it
before Prefect's settings are fixed).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from tasks.common import load_params
from tasks.paths import prepare_dir
from veilbench.io import MANIFEST, file_sha256, read_json


def _user_path(root: Path, options: dict[str, Any]) -> Path | None:
    path = options.get("path")
    if not path:
        return None
    return Path(path) if Path(path).is_absolute() else root / path


def source_digest(path: Path) -> str:
    """SHA-256 of a user data file, or of a folder's files (their relative names and bytes, sorted)."""
    if path.is_file():
        return file_sha256(path)
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0" + file_sha256(f).encode())
    return h.hexdigest()


def invalidate_replaced_sources(root: Path, params_path: str | Path | None = None) -> list[str]:
    """Remove ``data/prepare/<dataset>/`` of every dataset whose user file exists but is no longer
    the one its output was made from (``source_sha256`` in the manifest); returns their names."""
    cfg = load_params(params_path, root)
    removed = []
    for name, dcfg in cfg.datasets.items():
        path, out = _user_path(root, dcfg.options), prepare_dir(root, name)
        if path is None or not path.exists() or not (out / MANIFEST).is_file():
            continue
        try:
            recorded = read_json(out / MANIFEST).get("params", {}).get("source_sha256")
        except (OSError, ValueError, AttributeError):
            recorded = None
        if recorded != source_digest(path):
            shutil.rmtree(out)
            removed.append(name)
    return removed
