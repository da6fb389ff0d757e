"""MLflow tracking for stage runs: SQLite store at an absolute path under the repo root.

Every stage run becomes one MLflow run tagged with ``stage``, ``cell``, ``dataset``, ``family``,
``method``, ``seeds``, ``git_rev`` and ``params_hash`` (SHA-256 of the canonical JSON of the params
that produced it), so runs can be found and compared by configuration rather than by name, plus
MLflow's standard ``mlflow.runName`` and ``mlflow.source.git.commit``. A run that raises is ended
with status FAILED; a run whose process was killed (SIGKILL, power loss) cannot end itself, so the
next start of the same stage for the same dataset/embedding/sweep/cell marks such stale RUNNING
runs FAILED.

The record of a sweep stage is complete after every run: each execution of ``<stage>@<sweep>``
opens one *parent* run (tag ``run_kind=sweep-stage``, :func:`open_parent_run`) and every cell of
the sweep gets a child run under it (tag ``mlflow.parentRunId``, ``run_kind=cell``), computed
(``reused=false``) or reused (``reused=true``: re-logged from the stored metrics, with
``reused_from`` naming the run that computed it when that run is in the store). The latest
finished parent of a (sweep, stage) therefore lists every configured cell
(:func:`latest_cell_runs`). Per-seed values are separate metrics ``<name>.seed_<seed>``.
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


def git_commit(root: Path | None = None) -> str:
    """The bare commit of :func:`git_revision` (no ``-dirty``), or ``""`` outside git."""
    rev = git_revision(root)
    return "" if rev == "unknown" else rev.removesuffix("-dirty")


def _commit_tag(root: Path) -> dict[str, str]:
    commit = git_commit(root)
    return {"mlflow.source.git.commit": commit} if commit else {}


def file_sha(path: Path) -> str:
    """SHA-256 (first 16 hex digits) of the bytes of the file at ``path``."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def params_file_tags(params_path: str | Path | None, root: Path | None = None) -> dict[str, str]:
    """``params_file`` (the file's name) and ``params_sha`` (:func:`file_sha` of its bytes) of the
    params file a run read (default ``<root>/params.yaml``); empty when the file does not exist."""
    path = Path(params_path) if params_path else (root or repo_root()) / "params.yaml"
    if not path.is_file():
        return {}
    return {"params_file": path.name, "params_sha": file_sha(path)}


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

    def log_artifact(self, path: str, artifact_path: str | None = None) -> None:
        """Copy the file at ``path`` into the run's artifact store (under ``artifact_path``) now."""
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        get_artifact_repository(self._artifact_uri).log_artifact(path, artifact_path)

    def log_text(self, text: str, artifact_file: str) -> None:
        """Store ``text`` as the artifact ``artifact_file`` (e.g. ``tables/per_seed.csv``)."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / Path(artifact_file).name
            local.write_text(text)
            self.log_artifact(str(local), str(Path(artifact_file).parent) if "/" in artifact_file else None)

    def _flush(self) -> None:
        from mlflow.entities import Param, RunTag

        params = [Param(k, v) for k, v in self._params.items()]
        tags = [RunTag(METRICS_DIGEST, metrics_digest({m.key: m.value for m in self._metrics}))] if self._metrics else []
        if params or self._metrics:
            self.client.log_batch(self.run_id, metrics=self._metrics, params=params, tags=tags, synchronous=True)


#: The tag holding :func:`metrics_digest` of a run's metrics as logged (checked by ``veilbench compare``).
METRICS_DIGEST = "metrics_sha256"


def metrics_digest(metrics: Mapping[str, float]) -> str:
    """SHA-256 of a run's metrics (name → last value; every veilbench metric is logged once, at step 0)."""
    blob = "\n".join(f"{name}={float(value)!r}" for name, value in sorted(metrics.items()))
    return hashlib.sha256(blob.encode()).hexdigest()


def verify_run_metrics(run: Any, where: str) -> None:
    """Raise ``ValueError`` naming the run and ``where`` (its store) when ``run``'s metrics no longer
    match the :data:`METRICS_DIGEST` tag written with them; runs logged without the tag are taken as they are."""
    recorded = run.data.tags.get(METRICS_DIGEST)
    if recorded is not None and metrics_digest(run.data.metrics) != recorded:
        tags = run.data.tags
        raise ValueError(f"{where}: run {run.info.run_id} ({tags.get('stage', '?')}@{tags.get('sweep', '?')}/"
                         f"{tags.get('cell', '?')}): its metrics do not match the SHA-256 recorded when they were "
                         f"logged (edited in the store); rerun the stage, or compare other runs")


#: (tracking URI, experiment name) → experiment id, and tracking URI → client, per process:
#: each lookup is a SQLite query, and a run is opened per cell and stage (~750 per default run).
_EXPERIMENTS: dict[tuple[str, str], str] = {}
_CLIENTS: dict[str, Any] = {}
_CACHE_LOCK = threading.Lock()


def _client(uri: str) -> Any:
    import logging


    # MLflow logs two INFO lines ("Creating initial MLflow database tables...", "Updating database
    # tables") when it creates a SQLite store: routine set-up, not news for the person running.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    with _CACHE_LOCK:
        if uri not in _CLIENTS:
            _CLIENTS[uri] = open_client(uri)
        return _CLIENTS[uri]


def open_client(uri: str) -> Any:
    """An ``MlflowClient`` of the store at ``uri`` (MLflow opens a SQLite store, and migrates a new one,
    here); a store that cannot be opened is a :class:`~veilbench.validation.UsageError` naming the file:
    locked by another process, or not an MLflow database (corrupt, truncated, another program's file)."""
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(uri)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's and MLflow's errors, told apart by their text
        from veilbench.validation import UsageError

        text = str(exc).lower()
        store = uri.removeprefix("sqlite:///") if uri.startswith("sqlite:///") else uri
        if "database is locked" in text:
            raise UsageError(f"{store}: the MLflow store is locked by another process (another `veilbench run`, a DVC "
                             f"stage, `mlflow ui`); wait for it to finish and run again") from None
        if any(word in text for word in ("not a database", "malformed", "no such table", "can't locate revision",
                                         "database disk image", "unable to open database")):
            raise UsageError(f"{store}: not a usable MLflow store ({str(exc).splitlines()[0][:200]}); move it aside "
                             f"(e.g. to {Path(store).name}.broken) to start a new one, or set VEILBENCH_TRACKING_URI "
                             f"to another store") from None
        raise


def open_store(root: Path | None = None) -> Any:
    """The client of this root's tracking store, with the store opened (a new SQLite store gets
    its tables here: the migrations)."""
    client = _client(tracking_uri(root or repo_root()))
    client.search_experiments(max_results=1)
    return client


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where a new experiment named ``experiment`` of the store at ``uri`` keeps its runs' artifacts:
    ``<folder of the database>/mlruns/<experiment>`` for a SQLite store, else None (the tracking
    server's own choice).

    MLflow's default is ``./mlruns/<experiment id>`` resolved against the working directory of the
    process that first creates the experiment. That folder is not the store's: a DVC experiment's
    temporary copy (deleted when the experiment ends) logging to its parent's store, a scheduled run
    whose store is in its own root while it runs from the workspace, or a test's store would keep
    their artifacts in the wrong place. Experiment names are safe path segments
    (:class:`veilbench.config.TrackingConfig`)."""
    if not uri.startswith("sqlite:"):
        return None
    from sqlalchemy.engine import make_url  # MLflow's own URI parser for its SQL stores

    database = make_url(uri).database
    if not database or database == ":memory:":
        return None
    return str(Path(database).resolve().parent / "mlruns" / experiment)


def client_and_experiment(uri: str, experiment: str, refresh: bool = False) -> tuple[Any, str]:
    """The client of the store at ``uri`` and the id of ``experiment`` there, created (with its
    artifacts beside the store, :func:`artifact_location`) when missing; cached per process
    (``refresh``: look it up again)."""
    from mlflow.exceptions import MlflowException

    client = _client(uri)
    with _CACHE_LOCK:
        if refresh or (uri, experiment) not in _EXPERIMENTS:
            exp = client.get_experiment_by_name(experiment)
            if exp is None:
                try:
                    exp_id = client.create_experiment(experiment, artifact_location=artifact_location(uri, experiment))
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
    parent_run_id: str | None = None,
    run_name: str | None = None,
) -> Iterator[StageRun]:
    """Open an MLflow run for one stage execution; yields its :class:`StageRun` for logging.

    The run is created with its tags, its params and metrics are written in one batch when it
    closes, and it ends FINISHED, or FAILED when the body raises (the error propagates). Four
    SQLite transactions per run, through one client per process (the fluent ``mlflow`` API looks
    the experiment up, resolves source/git context tags and commits params, metrics and status
    separately). ``fail_stale=False`` skips the search for RUNNING leftovers with the same identity
    tags, for callers that already did it for the whole stage (:func:`fail_interrupted_runs`).
    ``parent_run_id`` nests the run under that run (tag ``mlflow.parentRunId``). The run is named
    ``<stage>:<sweep>/<cell>`` (or the embedding or dataset); a run of none of them (the report)
    ``run_name``, else the stage's name."""
    from mlflow.exceptions import MlflowException

    root = root or repo_root()
    client, exp_id = client_and_experiment(tracking_uri(root), experiment)
    all_tags = {
        "stage": stage,
        "git_rev": git_revision(root),
        **_commit_tag(root),
        "params_hash": params_hash(params),
        "dvc_stage": _dvc_address(stage, tags),
        **({"dvc_exp_name": os.environ["DVC_EXP_NAME"]} if os.environ.get("DVC_EXP_NAME") else {}),
        **tags,
    }
    if parent_run_id:
        all_tags["mlflow.parentRunId"] = parent_run_id
    if fail_stale:
        fail_stale_runs(client, exp_id, all_tags)
    target = "/".join(t for t in (tags.get("sweep"), tags.get("cell")) if t) or tags.get("embedding") or tags.get("dataset", "")
    all_tags["mlflow.runName"] = name = f"{stage}:{target}" if target else run_name or stage
    try:
        run = client.create_run(exp_id, run_name=name, tags=all_tags)
    except MlflowException:  # the store was replaced since the experiment id was cached: look it up again
        client, exp_id = client_and_experiment(tracking_uri(root), experiment, refresh=True)
        run = client.create_run(exp_id, run_name=name, tags=all_tags)
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


def log_cell_metrics(run: StageRun, summary: Mapping[str, Mapping[str, float]],
                     per_seed: Mapping[int | str, Mapping[str, float]]) -> None:
    """Record a cell's metrics on ``run`` (all at step 0, written when the run closes): for each
    metric ``m`` its mean over seeds as ``m`` and the 95% half-width as ``m_ci95`` (``summary[m]``
    holds ``mean`` and ``ci95``), and the value of seed ``s`` as ``m.seed_<s>``."""
    run.log_metrics({k: v for name, stats in summary.items() if math.isfinite(stats["mean"])
                     for k, v in ((name, stats["mean"]), (f"{name}_ci95", stats["ci95"]))})
    for seed, values in per_seed.items():
        run.log_metrics({f"{k}.seed_{int(seed)}": v for k, v in values.items()})


def per_seed_csv(per_seed: Mapping[int | str, Mapping[str, float]]) -> str:
    """The per-seed metrics as CSV text: one row per seed, one column per metric (blank: absent)."""
    names = sorted({k for m in per_seed.values() for k in m})
    rows = [",".join(["seed", *names])]
    for seed, values in per_seed.items():
        rows.append(",".join([str(seed), *(repr(float(values[n])) if n in values else "" for n in names)]))
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------------------------------------
# parent runs: one per execution of a sweep stage
# ---------------------------------------------------------------------------------------------

PARENT_KIND = "sweep-stage"

#: (tracking URI, experiment id, stage, sweep) → the open parent run of that sweep stage, set by
#: :func:`open_parent_run` in the process that opened it; cells run in other processes (Dask
#: workers) find it in the store instead (:func:`parent_run_id`).
_PARENTS: dict[tuple[str, str, str, str], str] = {}


def open_parent_run(experiment: str, stage: str, sweep: str, tags: Mapping[str, str], root: Path | None = None) -> str:
    """Create the parent run ``<stage>@<sweep>`` (RUNNING until :func:`close_parent_run`); returns its id."""
    root = root or repo_root()
    uri = tracking_uri(root)
    client, exp_id = client_and_experiment(uri, experiment)
    name = f"{stage}@{sweep}"
    all_tags = {"stage": stage, "sweep": sweep, "run_kind": PARENT_KIND, "git_rev": git_revision(root),
                **_commit_tag(root), "dvc_stage": _dvc_address(stage, {"sweep": sweep}),
                "mlflow.runName": name, **tags}
    run = client.create_run(exp_id, run_name=name, tags=all_tags)
    with _CACHE_LOCK:
        _PARENTS[(uri, exp_id, stage, sweep)] = run.info.run_id
    return run.info.run_id


def parent_run_id(experiment: str, stage: str, sweep: str, root: Path | None = None) -> str | None:
    """The open parent run of ``stage`` on ``sweep``: the one this process opened, else the most
    recent RUNNING parent in the store; None when there is none (a cell run on its own)."""
    uri = tracking_uri(root or repo_root())
    client, exp_id = client_and_experiment(uri, experiment)
    with _CACHE_LOCK:
        known = _PARENTS.get((uri, exp_id, stage, sweep))
    if known:
        return known
    found = client.search_runs(
        [exp_id], filter_string=f"tags.run_kind = '{PARENT_KIND}' and tags.stage = '{stage}' and "
                                f"tags.sweep = '{sweep}' and attributes.status = 'RUNNING'",
        order_by=["attributes.start_time DESC"], max_results=1)
    return found[0].info.run_id if found else None


def close_parent_run(experiment: str, stage: str, sweep: str, outcomes: Mapping[str, str], artifacts: list[Path],
                     root: Path | None = None) -> str | None:
    """End the open parent run of ``stage`` on ``sweep`` FINISHED, with metrics ``n_cells``,
    ``n_computed`` and ``n_reused`` and the files ``artifacts``; returns its id (None if none is open)."""
    from mlflow.entities import Metric
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    uri = tracking_uri(root or repo_root())
    client, exp_id = client_and_experiment(uri, experiment)
    run_id = parent_run_id(experiment, stage, sweep, root)
    if run_id is None:
        return None
    now = int(time.time() * 1000)
    counts = {"n_cells": len(outcomes), "n_computed": sum(v == "computed" for v in outcomes.values()),
              "n_reused": sum(v == "reused" for v in outcomes.values())}
    client.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in counts.items()], synchronous=True)
    if artifacts:
        repo = get_artifact_repository(client.get_run(run_id).info.artifact_uri)
        for path in artifacts:
            repo.log_artifact(str(path))
    client.set_terminated(run_id, status="FINISHED")
    with _CACHE_LOCK:
        _PARENTS.pop((uri, exp_id, stage, sweep), None)
    return run_id


def fail_parent_run(experiment: str, stage: str, sweep: str, root: Path | None = None) -> str | None:
    """End the open parent run of ``stage`` on ``sweep`` FAILED (a cell of the stage failed, or the
    run stopped before the stage finished); returns its id (None if none is open)."""
    uri = tracking_uri(root or repo_root())
    client, exp_id = client_and_experiment(uri, experiment)
    run_id = parent_run_id(experiment, stage, sweep, root)
    if run_id is not None:
        client.set_terminated(run_id, status="FAILED")
    with _CACHE_LOCK:
        _PARENTS.pop((uri, exp_id, stage, sweep), None)
    return run_id


def computed_run_id(experiment: str, stage: str, sweep: str, cell: str, input_key: str, root: Path | None = None) -> str | None:
    """The most recent FINISHED computed (not reused) run of this cell with this input key, if any."""
    client, exp_id = client_and_experiment(tracking_uri(root or repo_root()), experiment)
    found = client.search_runs(
        [exp_id], filter_string=f"tags.input_key = '{input_key}' and tags.stage = '{stage}' and tags.sweep = '{sweep}' "
                                f"and tags.cell = '{cell}' and tags.reused = 'false' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"], max_results=1)
    return found[0].info.run_id if found else None


def latest_cell_runs(client: Any, experiment_ids: list[str], stage: str = "evaluate", filter_string: str = "") -> list[Any]:
    """The cell runs of the latest FINISHED parent of each sweep's ``stage`` among ``experiment_ids``
    (runs matching ``filter_string`` too, e.g. a git commit), plus, for sweeps with no parent
    (runs logged before parents existed), the latest FINISHED run of each cell."""
    extra = f" and {filter_string}" if filter_string else ""
    base = f"tags.stage = '{stage}' and attributes.status = 'FINISHED'{extra}"
    runs = _search_all(client, experiment_ids, base)
    parents: dict[str, Any] = {}
    for run in runs:
        if run.data.tags.get("run_kind") == PARENT_KIND:
            sweep = run.data.tags.get("sweep", "")
            if sweep not in parents or run.info.start_time > parents[sweep].info.start_time:
                parents[sweep] = run
    parent_ids = {p.info.run_id for p in parents.values()}
    chosen: list[Any] = [r for r in runs if r.data.tags.get("mlflow.parentRunId") in parent_ids]
    orphans: dict[tuple[str, str], Any] = {}
    for run in runs:
        tags = run.data.tags
        if tags.get("run_kind") == PARENT_KIND or tags.get("sweep", "") in parents or "cell" not in tags:
            continue
        key = (tags.get("sweep", ""), tags["cell"])
        if key not in orphans or run.info.start_time > orphans[key].info.start_time:
            orphans[key] = run
    return chosen + list(orphans.values())


def _search_all(client: Any, experiment_ids: list[str], filter_string: str) -> list[Any]:
    """Every run matching ``filter_string`` (all result pages)."""
    out: list[Any] = []
    token = None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, max_results=5000, page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out
