"""Shared fixtures: quiet, bounded environment; a tiny params.yaml; one Prefect test server.

Environment is set before Prefect/MLflow are imported anywhere: telemetry off, threads ≤ 1,
PREFECT_HOME in a temporary folder (never the user's; one per pytest-xdist worker), a generous
server start-up timeout.

Under pytest-xdist (``make test``: ``pytest -n 3 --dist loadfile --no-loadscope-reorder``) each
test file runs on one worker (its module-scoped fixtures are built once), every session-scoped
fixture once per worker (the Prefect server and the reproduced project once for all workers);
:func:`pytest_collection_modifyitems` starts the files with slow tests
first, :func:`pytest_xdist_make_scheduler` hands a worker its next file only as it runs out
(:mod:`tests.xdist_schedule`), and :func:`ray_lock` keeps two workers from starting Ray/Flower at
the same time.
"""

from __future__ import annotations

import tasks  # noqa: F401,I001 - first: pins the CPU code paths before numpy/torch load (tasks.numerics), as every stage process does

import contextlib
import fcntl
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import yaml

_HOME = tempfile.mkdtemp(prefix="veilbench-test-prefect-")
for key, value in {
    "PREFECT_HOME": _HOME,
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "DO_NOT_TRACK": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DVC_NO_ANALYTICS": "1",
    "TQDM_DISABLE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "NUMPY_MADVISE_HUGEPAGE": "0",  # as the Makefile: no waits on memory compaction (bench_hugepages.py)
}.items():
    os.environ.setdefault(key, value)
if os.environ.get("PYTEST_XDIST_WORKER"):  # one Prefect home per worker (profiles, local result storage)
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix=f"veilbench-test-prefect-{os.environ['PYTEST_XDIST_WORKER']}-")
os.environ.pop("PREFECT_API_URL", None)
os.environ.pop("MLFLOW_TRACKING_URI", None)

REPO = Path(__file__).resolve().parents[1]

#: The folder (beside the workers' temporary folders) of the session's one Prefect test server.
PREFECT_SERVER_FOLDER = "veilbench-prefect-server"


@contextlib.contextmanager
def exclusive(resource: str):
    """Hold an exclusive lock (``fcntl.flock``) named ``resource`` shared by every process of this
    machine: two pytest-xdist workers never start, e.g., a Ray cluster and a Flower SuperLink at once."""
    with open(Path(tempfile.gettempdir()) / f"veilbench-test-{resource}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def ray_lock() -> None:
    """:func:`exclusive` ``("ray")`` held until the end of the requesting module (Ray, Flower)."""
    with exclusive("ray"):
        yield


@pytest.fixture(scope="session", autouse=True)
def checkout_artifacts_untouched() -> None:
    """Every test logs to a store of its own, and each experiment keeps its artifacts beside its
    store (:func:`tasks.tracking.artifact_location`): no file may appear in the checkout's
    ``mlruns/`` (the user's artifacts) during the session. Checked when the session (each
    pytest-xdist worker) ends; a leak is an error naming the files."""
    artifacts, started = REPO / "mlruns", time.time()
    yield
    leaked = sorted(str(p.relative_to(REPO)) for p in artifacts.rglob("*")
                    if p.is_file() and p.stat().st_mtime >= started) if artifacts.is_dir() else []
    assert not leaked, f"tests wrote into the checkout's MLflow artifacts: {leaked[:5]} ({len(leaked)} files)"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the run: the test files holding a slow test first, then the others (each file's tests
    together, in collection order). ``--dist loadfile --no-loadscope-reorder`` hands the files to
    the workers in this order, so the longest start first and the quick ones fill the gaps.

    Of the slow files that use :func:`reproduced_project` (built once for all workers), the first
    comes first and builds it; the others come after the remaining slow files, so that the other
    workers have work of their own meanwhile instead of waiting for the build. Likewise the files that
    hold :func:`ray_lock` (Ray, Flower): the first keeps its place, the others come after the
    remaining slow files, so that two workers never run two of them at once, one idle on the lock
    (observed: 45 s of a worker's time)."""
    order = {id(item): i for i, item in enumerate(items)}
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    first: dict[Path, int] = {}
    for item in items:
        first.setdefault(item.path, order[id(item)])
    waiting: set[Path] = set()
    for shared in ("reproduced_project", "ray_lock"):
        users = sorted({it.path for it in items if it.path in slow_files
                        and shared in getattr(it, "fixturenames", ())}, key=first.__getitem__)
        waiting.update(users[1:])
    items.sort(key=lambda it: (it.path not in slow_files, it.path in waiting, first[it.path], order[id(it)]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under ``--dist loadfile`` (``make test``): :class:`tests.xdist_schedule.OneFileAhead`, which
    hands a worker its next test file only when it is about to start its last pending test."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.xdist_schedule import OneFileAhead

    return OneFileAhead(config, log)


#: Folder for per-test time records (``benchmarks/bench_test_suite.py`` sets it); unset: nothing recorded.
TEST_TIMES_ENV = "VEILBENCH_TEST_TIMES_DIR"
_TEST_TIMES: list[dict] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With ``$VEILBENCH_TEST_TIMES_DIR`` set: each test's start (Unix time), wall time (setup, call and teardown) and
    CPU seconds, this process's (``self``) and its reaped child processes' (``children``:
    ``getrusage(RUSAGE_CHILDREN)``; a process left running or reaped by another, such as a detached
    server, is not counted)."""
    if not os.environ.get(TEST_TIMES_ENV):
        yield
        return

    def cpu(who: int) -> float:
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    self0, children0, start, t0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.time(), time.perf_counter()
    yield
    _TEST_TIMES.append({"test": item.nodeid, "start": start, "wall": time.perf_counter() - t0,
                        "self": cpu(resource.RUSAGE_SELF) - self0, "children": cpu(resource.RUSAGE_CHILDREN) - children0})


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write this process's records (:func:`pytest_runtest_protocol`) to ``$VEILBENCH_TEST_TIMES_DIR/<worker>.json``."""
    folder = os.environ.get(TEST_TIMES_ENV)
    if folder and _TEST_TIMES:
        name = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (Path(folder) / f"{name}.json").write_text(json.dumps(_TEST_TIMES))


def tiny_params(**overrides: object) -> dict:
    """A small but complete params mapping: digits subsample, PCA-8, a sweep of 3 cells and a 1-cell sweep."""
    params = {
        "seed": 0,
        "tracking": {"experiment": "veilbench-test"},
        "datasets": {"digits": {"source": "digits", "test_size": 0.3, "n_parties": 3, "max_records": 300}},
        "embeddings": {"digits-pca": {"dataset": "digits", "encoder": "pca", "dim": 8}},
        "sweeps": {
            "ss": {"family": "scoreshield", "embedding": "digits-pca", "seeds": [0, 1],
                   "params": {"mechanism": "gaussian", "delta": 1e-5, "n_queries": 30, "audit_releases": 400},
                   "grid": {"epsilon": [4.0, 8.0]},
                   "cells": [{"mechanism": "clean"}]},
            "ss-identity": {"family": "scoreshield", "embedding": "digits-pca", "seeds": [0],
                            "params": {"mechanism": "identity", "n_queries": 30, "audit_releases": 400}},
        },
        "report": {"title": "test report", "frontiers": [
            {"name": "ss-frontier", "family": "scoreshield", "x": "param:epsilon",
             "y": "utility_verification_accuracy", "group_by": "mechanism",
             "reference_groups": ["clean", "identity"]}]},
    }
    params.update(overrides)
    return params


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repo-like folder with a tiny params.yaml; stages read and write under it."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    monkeypatch.setenv("VEILBENCH_ROOT", str(tmp_path))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def migrated_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite store migrated once per session (migrations cost ~7 s)."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_store(workdir: Path, migrated_mlflow_db: Path) -> Path:
    """A private copy of the migrated store at ``<workdir>/mlflow.db`` (the default location)."""
    dest = workdir / "mlflow.db"
    shutil.copy(migrated_mlflow_db, dest)
    return dest


@pytest.fixture(scope="session")
def reproduced_project(tmp_path_factory: pytest.TempPathFactory, prefect_server: str, migrated_mlflow_db: Path):
    """The tiny project reproduced by ``dvc repro`` and committed, built once per session for all
    pytest-xdist workers (:mod:`tests.e2e_root`); a :class:`tests.e2e_root.Reproduced`. Copy it
    (:func:`tests.e2e_root.copy_project`) or clone it before changing anything."""
    from tests.e2e_root import reproduced_project, shared_folder

    return reproduced_project(shared_folder(tmp_path_factory, "veilbench-reproduced-project"), prefect_server,
                              migrated_mlflow_db)


@pytest.fixture(scope="module")
def committed_project(reproduced_project, tmp_path_factory: pytest.TempPathFactory,
                      prefect_server: str) -> tuple[Path, dict[str, str]]:
    """A copy of :func:`reproduced_project` for the requesting module and the environment of its
    commands (:func:`tests.e2e_root.project_env`), shared by that module's tests, none of which
    may change its workspace."""
    from tests.e2e_root import copy_project, project_env

    return copy_project(reproduced_project.root, tmp_path_factory.mktemp("dvc") / "repo"), project_env(prefect_server)


@pytest.fixture(scope="session")
def migrated_prefect_db(prefect_server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, still empty Prefect database: the session's test server's as its start left it
    (:func:`tests.e2e_root.shared_prefect_server`). :func:`tests.e2e_root.seed_prefect_home` copies
    it into a project whose ``veilbench run`` starts its own server, which then skips the
    migrations of a new home (most of its start-up)."""
    from tests.e2e_root import shared_folder

    return shared_folder(tmp_path_factory, PREFECT_SERVER_FOLDER) / "migrated.db"


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path) -> Path:
    """Every stage but the report run in process on both tiny sweeps (:func:`tests.e2e_root.tiny_run`),
    once per session for all workers. Copy it (:func:`tests.e2e_root.copy_project`) before changing it."""
    from tests.e2e_root import shared_folder, tiny_run

    return tiny_run(shared_folder(tmp_path_factory, "veilbench-tiny-run"), migrated_mlflow_db)


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One Prefect test server for the whole session, shared by all pytest-xdist workers
    (:func:`tests.e2e_root.shared_prefect_server`: the first worker that asks starts it, it stops
    when the pytest run ends); yields its API URL, set as this process's ``PREFECT_API_URL``."""
    import prefect.context
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tests.e2e_root import shared_folder, shared_prefect_server

    url = shared_prefect_server(shared_folder(tmp_path_factory, PREFECT_SERVER_FOLDER))
    with temporary_settings(updates={PREFECT_API_URL: url}), \
            prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()):
        yield url
