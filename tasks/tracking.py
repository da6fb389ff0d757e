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
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tasks.paths import repo_root, tracking_root


def tracking_uri(root: Path | None = None) -> str:
    """``$VEILBENCH_TRACKING_URI`` when set, else ``sqlite:///<repo root>/mlflow.db`` (absolute;
    a DVC experiment's temporary copy logs to its parent repository's store, see
    :func:`tasks.paths.tracking_root`).

    (``MLFLOW_TRACKING_URI`` is deliberately not read: ``mlflow.set_tracking_uri`` writes it into
    the process environment, which would silently redirect later stages to another store.)
    """
    if os.environ.get("VEILBENCH_TRACKING_URI"):
        return os.environ["VEILBENCH_TRACKING_URI"]
    return f"sqlite:///{tracking_root(root) / 'mlflow.db'}"


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
    client = _client(tracking_uri(root or repo_root()))
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else fail_stale_runs(client, exp.experiment_id, {"stage": stage, "sweep": sweep})


class StageRun:
    """Handle of one open MLflow run (what :func:`stage_run` yields): metrics and artifacts are
    collected here and written when the run closes, in one batch with its params."""

    def __init__(self, client: Any, run: Any, params: dict[str, str]):
        self.client, self.run_id, self._artifact_uri = client, run.info.run_id, run.info.artifact_uri
        self._params = params
        self._metrics: list[Any] = []

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """Record ``metrics`` at ``step`` (non-finite values are left out: MLflow cannot compare them)."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._metrics += [Metric(k, float(v), now, int(step)) for k, v in metrics.items() if math.isfinite(float(v))]

    def log_artifact(self, path: str) -> None:
        """Copy the file at ``path`` into the run's artifact store now."""
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        get_artifact_repository(self._artifact_uri).log_artifact(path)

    def _flush(self) -> None:
        from mlflow.entities import Param

        params = [Param(k, v) for k, v in self._params.items()]
        if params or self._metrics:
            self.client.log_batch(self.run_id, metrics=self._metrics, params=params, synchronous=True)


#: (tracking URI, experiment name) → experiment id, and tracking URI → client, per process:
#: each lookup is a SQLite query, and a run is opened per cell and stage (~750 per default run).
_EXPERIMENTS: dict[tuple[str, str], str] = {}
_CLIENTS: dict[str, Any] = {}
_CACHE_LOCK = threading.Lock()


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    with _CACHE_LOCK:
        if uri not in _CLIENTS:
            _CLIENTS[uri] = MlflowClient(uri)
        return _CLIENTS[uri]


def open_store(root: Path | None = None) -> Any:
    """The client of this root's tracking store, with the store opened (a new SQLite store gets
    its tables here: ~1.5 s of migrations)."""
    client = _client(tracking_uri(root or repo_root()))
    client.search_experiments(max_results=1)
    return client


def _client_and_experiment(uri: str, experiment: str, refresh: bool = False) -> tuple[Any, str]:
    from mlflow.exceptions import MlflowException

    client = _client(uri)
    with _CACHE_LOCK:
        if refresh or (uri, experiment) not in _EXPERIMENTS:
            exp = client.get_experiment_by_name(experiment)
            if exp is None:
                try:
                    exp_id = client.create_experiment(experiment)
                except MlflowException:  # created meanwhile by another process
                    exp_id = client.get_experiment_by_name(experiment).experiment_id
            else:
                exp_id = exp.experiment_id
            _EXPERIMENTS[(uri, experiment)] = exp_id
        return client, _EXPERIMENTS[(uri, experiment)]


def _dvc_address(stage: str, tags: Mapping[str, str]) -> str:
    """The DVC stage address of this run: ``$DVC_STAGE`` under ``dvc repro``; under the in-process
    pipeline (``$DVC_ROOT`` set, stages run concurrently) derived from the stage and its key."""
    if os.environ.get("DVC_STAGE"):
        return os.environ["DVC_STAGE"]
    if not os.environ.get("DVC_ROOT"):
        return ""
    key = tags.get("sweep") or tags.get("embedding") or tags.get("dataset")
    return f"{stage}@{key}" if key else stage


@contextmanager
def stage_run(
    experiment: str,
    stage: str,
    params: Mapping[str, Any],
    tags: Mapping[str, str],
    root: Path | None = None,
    fail_stale: bool = True,
) -> Iterator[StageRun]:
    """Open an MLflow run for one stage execution; yields its :class:`StageRun` for logging.

    The run is created with its tags, its params and metrics are written in one batch when it
    closes, and it ends FINISHED, or FAILED when the body raises (the error propagates). Four
    SQLite transactions per run, through one client per process (the fluent ``mlflow`` API looks
    the experiment up, resolves source/git context tags and commits params, metrics and status
    separately). ``fail_stale=False`` skips the search for RUNNING leftovers with the same identity
    tags, for callers that already did it for the whole stage (:func:`fail_interrupted_runs`)."""
    from mlflow.exceptions import MlflowException

    root = root or repo_root()
    client, exp_id = _client_and_experiment(tracking_uri(root), experiment)
    all_tags = {
        "stage": stage,
        "git_rev": git_revision(root),
        "params_hash": params_hash(params),
        "dvc_stage": _dvc_address(stage, tags),
        **({"dvc_exp_name": os.environ["DVC_EXP_NAME"]} if os.environ.get("DVC_EXP_NAME") else {}),
        **tags,
    }
    if fail_stale:
        fail_stale_runs(client, exp_id, all_tags)
    target = "/".join(t for t in (tags.get("sweep"), tags.get("cell")) if t) or tags.get("embedding") or tags.get("dataset", "")
    try:
        run = client.create_run(exp_id, run_name=f"{stage}:{target}", tags=all_tags)
    except MlflowException:  # the store was replaced since the experiment id was cached: look it up again
        client, exp_id = _client_and_experiment(tracking_uri(root), experiment, refresh=True)
        run = client.create_run(exp_id, run_name=f"{stage}:{target}", tags=all_tags)
    handle = StageRun(client, run, {k: str(v)[:500] for k, v in _flatten(params).items()})
    try:
        yield handle
    except BaseException:
        try:
            handle._flush()  # the failed run keeps its params and whatever it measured
        finally:
            client.set_terminated(handle.run_id, status="FAILED")
        raise
    try:
        handle._flush()
    except BaseException:
        client.set_terminated(handle.run_id, status="FAILED")
        raise
    client.set_terminated(handle.run_id, status="FINISHED")


def log_metrics_batch(run: StageRun, metrics: Mapping[str, float], per_step: Mapping[int, Mapping[str, float]]) -> None:
    """Record ``metrics`` (step 0) and, for each step (a seed), ``per_step[step]`` under
    ``seed/<name>`` on ``run`` (written with the run's params when it closes)."""
    run.log_metrics(metrics)
    for step, values in per_step.items():
        run.log_metrics({f"seed/{k}": v for k, v in values.items()}, step=int(step))
