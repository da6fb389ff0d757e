"""Shared plumbing of the stage modules: loading params, thin Prefect task factory."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tasks.environment import pinned_environment
from veilbench.config import Config, load_config
from veilbench.validation import UsageError


#: Environment variables naming the params file a run started with and the SHA-256 of its bytes
#: then (set by ``veilbench run`` for itself and its stage processes).
SNAPSHOT_FILE, SNAPSHOT_SHA256 = "VEILBENCH_PARAMS_FILE", "VEILBENCH_PARAMS_SHA256"


def snapshot_params(path: str | Path) -> dict[str, str]:
    """The environment entries that pin a run to the current bytes of the params file ``path``."""
    p = Path(path).resolve()
    return {SNAPSHOT_FILE: str(p), SNAPSHOT_SHA256: hashlib.sha256(p.read_bytes()).hexdigest()}


@contextmanager
def pinned_params(params_path: str | Path | None = None, root: Path | None = None) -> Iterator[None]:
    """Inside the block, this process is pinned to the current bytes of the params file (default:
    ``params.yaml`` at the repo root) unless a run already pinned it (``veilbench run`` pins its stage
    processes to the version it started with); the environment is restored afterwards. A stage
    process run by plain ``dvc repro`` so checks that the file it read is still the one DVC records."""
    from tasks.paths import repo_root

    path = Path(params_path) if params_path else (root or repo_root()) / "params.yaml"
    pin = snapshot_params(path) if not os.environ.get(SNAPSHOT_SHA256) and path.is_file() else {}
    with pinned_environment((SNAPSHOT_FILE, SNAPSHOT_SHA256), **pin):
        yield


def _changed(path: Path) -> UsageError:
    return UsageError(f"{path}: changed while the run was in progress; the stages that finished keep the "
                      f"version the run started with: run again to bring the rest up to date")


def verify_snapshot(path: str | Path | None = None) -> None:
    """Raise :class:`UsageError` when the params file pinned by :func:`snapshot_params` (in the
    environment) no longer has the bytes the run started with, or is gone; nothing pinned, or
    ``path`` given and not the pinned file, nothing to check. The in-process pipeline calls it around
    DVC's save of a stage (DVC reads the params file then), a stage process before it exits
    (``dvc repro`` saves after the command) and :func:`load_params` before it reads, so no stage
    is recorded in ``dvc.lock`` with params other than those its outputs were made from."""
    name, pinned = os.environ.get(SNAPSHOT_FILE), os.environ.get(SNAPSHOT_SHA256)
    if not (name and pinned) or (path is not None and str(Path(path).resolve()) != name):
        return
    pinned_path = Path(name)
    try:
        digest = hashlib.sha256(pinned_path.read_bytes()).hexdigest()
    except OSError:
        digest = None
    if digest != pinned:
        raise _changed(pinned_path)


#: Most cell threads ``$VEILBENCH_CELL_THREADS`` may ask for.
MAX_CELL_THREADS = 1024


def cell_threads() -> int:
    """How many cells of a stage run at once in worker threads: ``$VEILBENCH_CELL_THREADS``,
    default 2 (the reference machine's cores); a :class:`~veilbench.validation.UsageError` naming
    the variable for anything but an integer in [1, :data:`MAX_CELL_THREADS`]."""
    raw = os.environ.get("VEILBENCH_CELL_THREADS", "2")
    if not raw.strip().isdigit() or not 1 <= int(raw) <= MAX_CELL_THREADS:
        raise UsageError(f"VEILBENCH_CELL_THREADS: must be an integer in [1, {MAX_CELL_THREADS}] (cells run at once), "
                         f"got {raw!r}; unset it for the default 2")
    return int(raw)


#: The folders a run writes into, under the project root (and the root itself: ``mlflow.db``, ``.prefect``).
WRITTEN_FOLDERS = ("data", "reports")


def check_writable(root: Path, folders: tuple[str, ...] = WRITTEN_FOLDERS) -> None:
    """Before a run starts: a :class:`UsageError` naming the first folder it would write into and
    cannot (``root``, or any folder under ``root/<folder>``), instead of a failure in the middle of
    the run. The operating system decides (``os.access``; the superuser may write anywhere)."""
    candidates = [Path(root)]
    for name in folders:
        top = Path(root) / name
        if top.is_dir():
            candidates += [Path(folder) for folder, _, _ in os.walk(top) if Path(folder).name != "__pycache__"]
        elif top.exists():
            raise UsageError(f"{top}: not a folder; the run writes its outputs there (move the file away)")
    for folder in candidates:
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"{folder}: no write permission; the run writes its outputs there "
                             f"(fix it with chmod/chown, or run as its owner)")


def load_params(params_path: str | Path | None = None, root: Path | None = None) -> Config:
    """Validate ``params.yaml`` (default: at the repo root) before any work starts.

    Inside a run pinned by :func:`snapshot_params`, the pinned file no longer having the bytes the
    run started with is a :class:`UsageError` (:func:`verify_snapshot`): every stage of one run
    reads one version."""
    from tasks.paths import repo_root

    path = Path(params_path) if params_path else (root or repo_root()) / "params.yaml"
    verify_snapshot(path)
    return load_config(path)


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` may not happen again on a second try: a timeout, a dropped connection, or a
    SQLite store locked by another writer. Everything else a stage raises (a user error, a bug, a
    missing or unwritable file) is deterministic: its cells fail the same way every time."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    return "database is locked" in str(exc) or "database table is locked" in str(exc)


def _retry_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: retry a failure only when it is :func:`transient`."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - an unreadable state: nothing says it would go differently
        return False
    return isinstance(exc, BaseException) and transient(exc)


def task_run_name(name: str) -> Callable[[], str]:
    """The task-run name of a stage task, from its parameters: ``release@<sweep>/<cell>`` for a
    cell, ``begin-stage release@<sweep>`` for a stage's bookkeeping, ``embed@<embedding>`` and
    ``prepare@<dataset>`` for one-task stages, else ``name``."""

    def run_name() -> str:
        from prefect.runtime import task_run

        p = task_run.parameters
        if "cell" in p:
            return f"{p['stage']}@{p['sweep']}/{p['cell']}"
        if "sweep" in p:
            return f"{name} {p['stage']}@{p['sweep']}"
        key = p.get("dataset") or p.get("embedding")
        return f"{name}@{key}" if key else name

    return run_name


def as_task(fn: Callable[..., Any], name: str, retries: int = 1) -> Any:
    """Wrap a plain stage function as a Prefect task (no result caching: DVC decides reruns;
    one retry of a :func:`transient` failure, which changes no result; a deterministic failure is
    not retried), its runs named by :func:`task_run_name`."""
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    return task(fn, name=name, cache_policy=NO_CACHE, retries=retries, retry_delay_seconds=1,
                retry_condition_fn=_retry_transient, task_run_name=task_run_name(name))
