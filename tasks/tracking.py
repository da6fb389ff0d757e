"""MLflow tracking for stage runs: SQLite store at an absolute path under the repo root.

Every stage run becomes one MLflow run tagged with ``stage``, ``cell``, ``dataset``, ``family``,
``method``, ``seeds``, ``git_rev`` and ``params_hash`` (SHA-256 of the canonical JSON of the params
that produced it), so runs can be found and compared by configuration rather than by name. A run
that raises is ended with status FAILED (the context manager of ``mlflow.start_run`` does this);
a run whose process was killed (SIGKILL, power loss) cannot end itself, so the next start of the
same stage for the same dataset/embedding/sweep/cell marks such stale RUNNING runs FAILED.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tasks.paths import repo_root


def tracking_uri(root: Path | None = None) -> str:
    """``$VEILBENCH_TRACKING_URI`` when set, else ``sqlite:///<repo root>/mlflow.db`` (absolute).

    (``MLFLOW_TRACKING_URI`` is deliberately not read: ``mlflow.set_tracking_uri`` writes it into
    the process environment, which would silently redirect later stages to another store.)
    """
    if os.environ.get("VEILBENCH_TRACKING_URI"):
        return os.environ["VEILBENCH_TRACKING_URI"]
    return f"sqlite:///{(root or repo_root()) / 'mlflow.db'}"


def params_hash(params: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of the canonical JSON of ``params``."""
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def git_revision(root: Path | None = None) -> str:
    """Current git commit (with ``-dirty`` when the tree has changes), or ``unknown`` outside git.

    Read once per process and root: a run's stages write tracked reports, which would otherwise
    mark later stages of the same run ``-dirty``; and two git calls per MLflow run add up."""
    return _git_revision(Path(root or repo_root()).resolve())


@functools.lru_cache(maxsize=8)
def _git_revision(cwd: Path) -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


_IDENTITY_TAGS = ("stage", "dataset", "embedding", "sweep", "cell")


def fail_stale_runs(client: Any, experiment_id: str, tags: Mapping[str, str]) -> list[str]:
    """Mark FAILED every RUNNING run of ``experiment_id`` whose identity tags equal ``tags``'s."""
    clauses = [f"tags.{k} = '{tags[k]}'" for k in _IDENTITY_TAGS if tags.get(k)]
    clauses.append("attributes.status = 'RUNNING'")
    stale = client.search_runs([experiment_id], filter_string=" and ".join(clauses))
    for run in stale:
        client.set_terminated(run.info.run_id, status="FAILED")
    return [run.info.run_id for run in stale]


def fail_interrupted_runs(experiment: str, stage: str, sweep: str, root: Path | None = None) -> list[str]:
    """Mark FAILED the RUNNING runs of ``stage`` on ``sweep`` left by a killed earlier run (call it
    before any cell of the stage starts); returns their run ids."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri(root))
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else fail_stale_runs(client, exp.experiment_id, {"stage": stage, "sweep": sweep})


@contextmanager
def stage_run(
    experiment: str,
    stage: str,
    params: Mapping[str, Any],
    tags: Mapping[str, str],
    root: Path | None = None,
    fail_stale: bool = True,
) -> Iterator[Any]:
    """Open an MLflow run for one stage execution; yields the ``mlflow`` module for logging.

    ``fail_stale=False`` skips the search for RUNNING leftovers with the same identity tags, for
    callers that already did it for the whole stage (:func:`fail_interrupted_runs`)."""
    import mlflow

    root = root or repo_root()
    mlflow.set_tracking_uri(tracking_uri(root))
    mlflow.set_experiment(experiment)
    all_tags = {
        "stage": stage,
        "git_rev": git_revision(root),
        "params_hash": params_hash(params),
        "dvc_stage": os.environ.get("DVC_STAGE", ""),
        **tags,
    }
    if fail_stale:
        fail_stale_runs(mlflow.tracking.MlflowClient(), mlflow.get_experiment_by_name(experiment).experiment_id, all_tags)
    target = "/".join(t for t in (tags.get("sweep"), tags.get("cell")) if t) or tags.get("embedding") or tags.get("dataset", "")
    run_name = f"{stage}:{target}"
    with mlflow.start_run(run_name=run_name, tags=all_tags):
        flat = _flatten(params)
        mlflow.log_params({k: str(v)[:500] for k, v in flat.items()})
        yield mlflow


def log_metrics_batch(mlflow: Any, metrics: Mapping[str, float], per_step: Mapping[int, Mapping[str, float]]) -> None:
    """Log ``metrics`` (step 0) and, for each step (a seed), ``per_step[step]`` under ``seed/<name>``
    to the active run in one batched call (each separate call costs a SQLite transaction);
    non-finite values are left out (MLflow cannot compare them)."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [Metric(k, float(v), now, 0) for k, v in metrics.items() if math.isfinite(v)]
    batch += [Metric(f"seed/{k}", float(v), now, int(step))
              for step, values in per_step.items() for k, v in values.items() if math.isfinite(v)]
    if batch:
        mlflow.tracking.MlflowClient().log_batch(mlflow.active_run().info.run_id, metrics=batch, synchronous=True)
