"""The stage graph executor (flows/dag.py) and the in-process DVC planner (flows/pipeline.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tasks.common import load_params


def test_stage_graph_chains_each_sweep_after_its_embedding(workdir: Path) -> None:
    from flows.dag import stage_graph

    graph = stage_graph(load_params(root=workdir), ["ss", "ss-identity"])
    assert graph["prepare@digits"] == [] and graph["embed@digits-pca"] == ["prepare@digits"]
    assert graph["release@ss"] == ["embed@digits-pca"] and graph["evaluate@ss"] == ["attack@ss"]
    assert graph["report"] == ["evaluate@ss", "evaluate@ss-identity"]
    assert len(graph) == 2 + 4 * 2 + 1


def test_a_cycle_is_an_error_naming_the_stages(workdir: Path) -> None:
    from flows.dag import run_stage_dag

    with pytest.raises(ValueError, match=r"release@ss.*integrate@ss.*cycle"):
        run_stage_dag({"release@ss": ["integrate@ss"], "integrate@ss": ["release@ss"]}, str(workdir / "params.yaml"))


def _flow(needs: dict[str, list[str]], params: str, workers: int, events: list[tuple[str, str, float]]):
    from prefect import flow
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.dag import run_stage_dag

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=workers))
    def run() -> dict:
        return run_stage_dag(needs, params, on_start=lambda a: events.append(("start", a, time.monotonic())),
                             on_done=lambda a: events.append(("done", a, time.monotonic())))

    return run()


@pytest.mark.slow
def test_each_stage_starts_after_what_it_needs_and_every_cell_runs(prefect_server: str, workdir: Path,
                                                                   mlflow_store: Path) -> None:
    import json

    from flows.dag import stage_graph

    params = str(workdir / "params.yaml")
    graph = stage_graph(load_params(params), ["ss", "ss-identity"])
    events: list[tuple[str, str, float]] = []
    results = _flow(graph, params, 2, events)
    assert set(results) == set(graph) and Path(results["report"]) == workdir / "reports/index.md"
    when = {(kind, a): t for kind, a, t in events}
    for address, needs in graph.items():
        assert all(when[("done", n)] <= when[("start", address)] for n in needs), address
    metrics = json.loads((workdir / "reports/sweeps/ss/metrics.json").read_text())
    assert set(metrics) == {"epsilon=4.0", "epsilon=8.0", "mechanism=clean"}


def _recording_cell_task(monkeypatch: pytest.MonkeyPatch, delay: float) -> list[int]:
    """Replace the DAG's cell task by one that records how many cells are in flight at its start."""
    import flows.dag
    from tasks.common import as_task
    from tasks.sweep import run_cell

    lock, inside, seen = threading.Lock(), [0], []

    def recording(*args, **kwargs):
        with lock:
            inside[0] += 1
            seen.append(inside[0])
        time.sleep(delay)
        try:
            return run_cell(*args, **kwargs)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(flows.dag, "run_cell_task", as_task(recording, "cell"))
    return seen


@pytest.mark.slow
def test_two_workers_run_two_cells_at_a_time(prefect_server: str, workdir: Path, mlflow_store: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.embed import embed
    from tasks.prepare import prepare

    prepare("digits", root=workdir)
    embed("digits-pca", root=workdir)
    seen = _recording_cell_task(monkeypatch, delay=0.3)
    _flow({"release@ss": [], "release@ss-identity": []}, str(workdir / "params.yaml"), 2, [])
    assert len(seen) == 4  # 3 + 1 cells
    assert max(seen) == 2


@pytest.mark.slow
def test_a_failing_cell_starts_nothing_new_and_raises(prefect_server: str, workdir: Path, mlflow_store: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.embed import embed
    from tasks.prepare import prepare
    from veilbench.families import get_family

    prepare("digits", root=workdir)
    embed("digits-pca", root=workdir)
    family = get_family("scoreshield")
    original = family.integrate

    def failing(inputs, params, seed):
        if params.mechanism == "clean":
            raise RuntimeError("integrate broke")
        return original(inputs, params, seed)

    monkeypatch.setattr(family, "integrate", failing)
    events: list[tuple[str, str, float]] = []
    needs = {"release@ss": [], "integrate@ss": ["release@ss"], "attack@ss": ["integrate@ss"],
             "release@ss-identity": []}
    with pytest.raises(RuntimeError, match="integrate broke"):
        _flow(needs, str(workdir / "params.yaml"), 2, events)
    done = {a for kind, a, _ in events if kind == "done"}
    started = {a for kind, a, _ in events if kind == "start"}
    assert "release@ss" in done and "integrate@ss" not in done
    assert "attack@ss" not in started


def _stage(address: str, changed: bool) -> SimpleNamespace:
    return SimpleNamespace(addressing=address, changed=lambda allow_missing, upstream: changed)


def test_planner_marks_changed_stages_and_everything_downstream() -> None:
    from flows.pipeline import StalePlanner

    prepare, embed, release, other = (_stage("prepare@d", False), _stage("embed@e", True),
                                      _stage("release@s", False), _stage("release@t", False))
    planner = StalePlanner()
    assert planner(prepare, upstream=[]) is None
    assert planner(embed, upstream=[prepare]) is embed
    assert planner(release, upstream=[embed]) is release, "downstream of a stale stage"
    assert planner(other, upstream=[prepare]) is None
    assert planner.needs == {"embed@e": [], "release@s": ["embed@e"]}
    forced = StalePlanner()
    assert forced(prepare, upstream=[], force=True) is prepare and forced.needs == {"prepare@d": []}


def test_an_unknown_stage_is_an_error_before_any_work(workdir: Path) -> None:
    from flows.dag import run_stage_dag

    with pytest.raises(KeyError, match=r"train@x.*not veilbench stages"):
        run_stage_dag({"prepare@digits": [], "train@x": []}, str(workdir / "params.yaml"))
    assert not (workdir / "data").exists()
