"""A key-addressed store of cell-stage outputs, shared by every cell, sweep, output root and params file.

A cell stage's output is a function of its *input key* (:func:`tasks.sweep.run_cell`: the stage's
code, the family, the options the stage reads, the seeds and the digests of the inputs it reads).
The store keeps one copy per key, so two cells with the same key compute it once: integrator cells
that share an obfuscation, data and seeds share one release (a DC release does not read the
integrator), and a cell of ``params.paper.yaml`` reuses the same cell of another params file.

Layout: ``<store>/<stage>/<key[:2]>/<key>/`` holding the bundle (``arrays.npz``, ``manifest.json``,
``timings.json``) of ``release``/``integrate``/``attack``, or ``record.json`` (the sealed record)
and ``timings.json`` of ``evaluate``. An entry is written once, atomically (a temporary folder
renamed into place), and never modified: a cell's ``arrays.npz`` and the entry's are hard links of
one file where the file system allows (the cell's own files are replaced, never written in place,
when the cell is recomputed), so the store costs no second copy of the arrays.

Where: ``$VEILBENCH_STORE`` when set, else ``<workspace>/runs/store/``, the workspace being the
output root itself or, for a root ``<workspace>/runs/<name>/`` (another params file's outputs,
:func:`flows.benchmark.output_root`), the folder above ``runs/``. A key is looked up and computed
under an exclusive lock on ``<store>/<stage>/<key[:2]>/<key>.lock`` (``fcntl.flock``), so cells
that share a key and run at the same time — threads or processes — compute it once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from veilbench.io import (ARRAYS, MANIFEST, SEAL, TIMINGS, bundle_intact, read_json, read_sealed_json,
                          replacing_dir, write_sealed_json)

STORE_ENV = "VEILBENCH_STORE"
RECORD = "record.json"


def store_dir(root: Path) -> Path:
    """The store of output root ``root`` (module docstring)."""
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env).resolve()
    root = Path(root).resolve()
    return root.parent / "store" if root.parent.name == "runs" else root / "runs" / "store"


def entry_dir(store: Path, stage: str, key: str) -> Path:
    return store / stage / key[:2] / key


@contextmanager
def key_lock(store: Path, stage: str, key: str) -> Iterator[None]:
    """Hold the exclusive lock of ``key`` (blocks while another thread or process holds it)."""
    path = entry_dir(store, stage, key).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def lookup(store: Path, stage: str, key: str) -> Path | None:
    """The intact entry of ``key`` (its arrays match their recorded SHA-256, or its seal holds), else None."""
    entry = entry_dir(store, stage, key)
    if stage == "evaluate":
        record = read_sealed_json(entry / RECORD) if (entry / RECORD).is_file() else None
        return entry if record is not None and record.get("input_key") == key else None
    if not (entry / MANIFEST).is_file() or not bundle_intact(entry):
        return None
    try:
        manifest = read_json(entry / MANIFEST)
    except (OSError, ValueError):
        return None
    return entry if isinstance(manifest, dict) and manifest.get("input_key") == key else None


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def put(store: Path, stage: str, key: str, cell_output: Path, timings: Path | None = None) -> Path:
    """Keep a computed cell output (its bundle folder, or an evaluate record file with its
    ``timings`` sidecar) as the entry of ``key``; returns the entry. An intact existing entry is
    kept; a damaged one is replaced."""
    entry = entry_dir(store, stage, key)
    if lookup(store, stage, key) is not None:
        return entry
    with replacing_dir(entry) as tmp:
        if stage == "evaluate":
            shutil.copy2(cell_output, tmp / RECORD)
            if timings is not None and timings.is_file():
                shutil.copy2(timings, tmp / TIMINGS)
        else:
            _link_or_copy(cell_output / ARRAYS, tmp / ARRAYS)
            for name in (MANIFEST, TIMINGS):
                if (cell_output / name).is_file():
                    shutil.copy2(cell_output / name, tmp / name)
    return entry


def materialize(entry: Path, stage: str, target: Path, identity: dict[str, Any],
                timings_target: Path | None = None) -> dict[str, Any]:
    """Write the entry as the output of another cell at ``target`` (a bundle folder, or evaluate's
    record file with its timings sidecar at ``timings_target``): the entry's arrays, metrics and
    info, with the cell's own ``identity`` (sweep, cell, params) in its record. Returns the record."""
    if stage == "evaluate":
        record = {k: v for k, v in read_sealed_json(entry / RECORD).items() if k != SEAL}
        record.update(identity)
        write_sealed_json(target, record)
        if timings_target is not None and (entry / TIMINGS).is_file():
            timings_target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(entry / TIMINGS, timings_target)
        return record
    manifest = {k: v for k, v in read_json(entry / MANIFEST).items() if k != SEAL}
    manifest.update(identity)
    with replacing_dir(target) as tmp:
        _link_or_copy(entry / ARRAYS, tmp / ARRAYS)
        write_sealed_json(tmp / MANIFEST, manifest)
        if (entry / TIMINGS).is_file():
            shutil.copy2(entry / TIMINGS, tmp / TIMINGS)
    return manifest
