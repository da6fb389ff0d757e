"""Shared plumbing of the stage modules: loading params, thin Prefect task factory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from veilbench.config import Config, load_config


def load_params(params_path: str | Path | None = None, root: Path | None = None) -> Config:
    """Validate ``params.yaml`` (default: at the repo root) before any work starts."""
    from tasks.paths import repo_root

    path = Path(params_path) if params_path else (root or repo_root()) / "params.yaml"
    return load_config(path)


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
    one retry for transient I/O failures, none of which change results), its runs named by
    :func:`task_run_name`."""
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    return task(fn, name=name, cache_policy=NO_CACHE, retries=retries, retry_delay_seconds=1,
                task_run_name=task_run_name(name))
