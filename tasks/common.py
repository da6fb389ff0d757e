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


def _retry_unless_user_error(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: retry a failure unless it is a user error (a
    :class:`~veilbench.validation.UsageError` fails the same way again)."""
    from veilbench.validation import UsageError

    try:
        exc = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - an unreadable state: retry as before
        return True
    return not isinstance(exc, UsageError)


def as_task(fn: Callable[..., Any], name: str, retries: int = 1) -> Any:
    """Wrap a plain stage function as a Prefect task (no result caching: DVC decides reruns;
    one retry for transient I/O failures, none of which change results; a user error is not retried)."""
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    return task(fn, name=name, cache_policy=NO_CACHE, retries=retries, retry_delay_seconds=1,
                retry_condition_fn=_retry_unless_user_error)
