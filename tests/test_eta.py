"""A first run's ETA: learnt from the cells it has computed, per stage kind and family; "first run:
estimating" until it can; within 2x of the remaining time at a quarter of the stages."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
import yaml

from tasks.eta import CellCosts, efficiency, reuse_share
from tasks.progress import RunProgress
from tests.conftest import tiny_params
from veilbench.stages import STAGES

KINDS = STAGES


def test_rates_are_seconds_per_seed_and_an_unseen_family_takes_the_kinds_median() -> None:
    costs = CellCosts()
    assert costs.rate("release", "a") is None
    costs.observe("release", "a", 10.0, 2)
    costs.observe("release", "a", 20.0, 2)
    assert costs.rate("release", "a") == 7.5
    assert costs.rate("attack", "a") is None, "no family has run an attack cell yet"
    costs.observe("attack", "b", 4.0, 1)
    costs.observe("attack", "c", 1.0, 1)
    costs.observe("attack", "d", 2.0, 2)
    assert costs.rate("attack", "a") == 1.0, "the median of b's 4, c's 1 and d's 1 per seed"
    assert costs.rate("release", "b") == 7.5


def test_reuse_share_and_efficiency() -> None:
    assert reuse_share(0, 0) == 1.0 and reuse_share(0, 9) == pytest.approx(0.1) and reuse_share(3, 0) == 1.0
    assert efficiency(50.0, 2, 100.0) == 0.25 and efficiency(150.0, 2, 100.0) == 0.75
    assert efficiency(500.0, 2, 100.0) == 1.0 and efficiency(0.0, 2, 100.0) == 0.25


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _sidecar(root: Path, address: str, cell: str, seconds: list[float]) -> None:
    stage, _, sweep = address.partition("@")
    path = root / "data" / stage / sweep / cell / "timings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"per_seed": {str(i): {"seconds": s} for i, s in enumerate(seconds)}}))


def _params(root: Path, sweeps: dict[str, tuple[str, int, int]]) -> None:
    """A params file whose sweep ``name`` has ``family``, ``n`` cells and ``seeds`` seeds."""
    params = tiny_params()
    params["sweeps"] = {}
    for name, (family, n, seeds) in sweeps.items():
        key = {"scoreshield": "epsilon", "dc": "n_anchor", "gca": "rounds", "anchornoise": "r"}[family]
        params["sweeps"][name] = {"family": family, "embedding": "digits-pca", "seeds": list(range(seeds)),
                                  "grid": {key: [100 + i for i in range(n)]}}
    params["report"] = {"frontiers": []}
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def test_first_run_learns_per_kind_and_family_and_scales_by_seeds(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("tasks.progress.time.monotonic", clock)
    _params(tmp_path, {"a": ("scoreshield", 3, 2), "b": ("scoreshield", 2, 1)})
    stages = ["release@a", "release@b", "integrate@a", "integrate@b"]
    out = io.StringIO()
    with RunProgress(stages, tmp_path, workers=1, stream=out) as p:
        p.stage_started("release@a")
        p.stage_cells("release@a", ["epsilon=100", "epsilon=101", "epsilon=102"])
        assert p.eta() is None, "nothing measured yet"
        clock.now = 10.0
        _sidecar(tmp_path, "release@a", "epsilon=100", [5.0, 5.0])
        p.cell_done("release@a", "epsilon=100", "computed")
        assert p.eta() is None, "integrate has not been measured in any family"
        p.stage_started("integrate@a")
        p.stage_cells("integrate@a", ["epsilon=100", "epsilon=101", "epsilon=102"])
        clock.now = 12.0
        _sidecar(tmp_path, "integrate@a", "epsilon=100", [1.0, 1.0])
        p.cell_done("integrate@a", "epsilon=100", "computed")
        # release: 2 cells of a (2 seeds x 5 s) + 2 of b (1 seed x 5 s); integrate: 2 of a (2 x 1) + 2 of b (1 x 1)
        assert p.eta() == pytest.approx(2 * 10 + 2 * 5 + 2 * 2 + 2 * 1)


def _simulate(root: Path, monkeypatch: pytest.MonkeyPatch, probe: bool, seed: int = 0) -> tuple[float, float]:
    """A first run of 12 sweeps of four families on two workers, cells handed out as flows.dag does
    (the first instance of each (stage, family) ahead of the queue when ``probe``); the true cost of
    a cell is seeds × its (kind, family) rate × a factor in [0.6, 1.4]; every evaluate cell is reused
    (committed records). Returns (the ETA at the first stage end past a quarter of the stages, the
    time actually left then)."""
    rng = random.Random(seed)
    rates = {("release", "scoreshield"): 0.3, ("integrate", "scoreshield"): 0.05, ("attack", "scoreshield"): 0.4,
             ("release", "gca"): 20.0, ("integrate", "gca"): 0.05, ("attack", "gca"): 4.0,
             ("release", "dc"): 1.0, ("integrate", "dc"): 3.0, ("attack", "dc"): 2.0,
             ("release", "anchornoise"): 0.5, ("integrate", "anchornoise"): 2.0, ("attack", "anchornoise"): 1.5}
    sweeps = {f"{family}-{i}": (family, rng.randint(3, 12), rng.choice([2, 3]))
              for family in ("scoreshield", "gca", "dc", "anchornoise") for i in range(3)}
    _params(root, sweeps)
    cells = {s: [f"{ {'scoreshield': 'epsilon', 'dc': 'n_anchor', 'gca': 'rounds', 'anchornoise': 'r'}[f]}={100 + i}"
                 for i in range(n)] for s, (f, n, _) in sweeps.items()}
    stages = [f"{k}@{s}" for k in KINDS for s in sweeps]
    clock = Clock()
    monkeypatch.setattr("tasks.progress.time.monotonic", clock)
    queue: list[tuple[str, str]] = []
    probed: set[tuple[str, str]] = set()
    probes = [0]  # probe cells at the head of the queue
    left: dict[str, int] = {}
    running: list[tuple[float, str, str]] = []
    costs: dict[tuple[str, str], float] = {}
    workers, marks = 2, []
    with RunProgress(stages, root, workers=workers, stream=io.StringIO()) as p:
        def begin(address: str) -> None:
            kind, _, sweep = address.partition("@")
            p.stage_started(address)
            p.stage_cells(address, cells[sweep])
            left[address] = len(cells[sweep])
            work = [(address, c) for c in cells[sweep]]
            if probe and (kind, sweeps[sweep][0]) not in probed:  # as flows.dag: a probe
                at = 0 if all(k != kind for k, _ in probed) else probes[0]
                probed.add((kind, sweeps[sweep][0]))
                queue[at:at] = work
                probes[0] += len(work)
            else:
                queue.extend(work)
        for s in sweeps:
            begin(f"release@{s}")
        while queue or running:
            while queue and len(running) < workers:
                address, cell = queue.pop(0)
                probes[0] = max(0, probes[0] - 1)
                kind, _, sweep = address.partition("@")
                family, _, seeds = sweeps[sweep]
                cost = 0.02 if kind == "evaluate" else seeds * rates[(kind, family)] * rng.uniform(0.6, 1.4)
                costs[(address, cell)] = cost
                running.append((clock.now + cost + 0.01, address, cell))
                running.sort()
            end, address, cell = running.pop(0)
            clock.now = end
            kind, _, sweep = address.partition("@")
            family, _, seeds = sweeps[sweep]
            if kind != "evaluate":  # the cell's own seconds, as tasks.sweep writes them
                _sidecar(root, address, cell, [(costs.pop((address, cell))) / seeds] * seeds)
            p.cell_done(address, cell, "reused" if kind == "evaluate" else "computed")
            left[address] -= 1
            if left[address] == 0:
                p.stage_done(address)
                if len(p.done) >= len(stages) / 4 and not marks:
                    marks.append((p.eta(), clock.now))
                nxt = KINDS.index(kind) + 1
                if nxt < len(KINDS):
                    begin(f"{KINDS[nxt]}@{sweep}")
        total = clock.now
    eta, at = marks[0]
    return eta, total - at


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_eta_at_a_quarter_of_the_stages_is_within_2x_on_a_first_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    seed: int) -> None:
    eta, actual = _simulate(tmp_path, monkeypatch, probe=True, seed=seed)
    assert eta is not None, "still estimating at a quarter of the stages"
    assert 0.5 <= eta / actual <= 2.0, (eta, actual)


def test_without_the_probe_order_a_quarter_of_the_stages_is_too_early_to_know(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    eta, actual = _simulate(tmp_path, monkeypatch, probe=False)
    assert eta is None or not 0.5 <= eta / actual <= 2.0


def test_the_first_instance_of_each_stage_and_family_goes_ahead_of_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.dag as dag

    monkeypatch.setattr(dag, "begin_stage_task", lambda name, key, *a: [f"{key}-c{i}" for i in range(2)])
    needs = {"release@s1": [], "release@s2": [], "release@g1": [], "release@g2": []}
    run = dag._GraphRun(needs, None, 2, {}, None, {"s1": "scoreshield", "s2": "scoreshield", "g1": "gca", "g2": "gca"})
    run.start_ready()
    assert [c for _, c in run.ready] == ["s1-c0", "s1-c1", "g1-c0", "g1-c1", "s2-c0", "s2-c1", "g2-c0", "g2-c1"]
    assert run.probes == 4
    run.ready.popleft()  # a worker took s1-c0
    run.probes -= 1
    # the first attack at all goes first, the first integrate too; a family's first integrate after
    # that waits behind the probes already queued, ahead of the rest
    for address in ("attack@g1", "integrate@s2", "integrate@g2"):
        run.order.append(address)
        run.waiting[address] = set()
    run.start_ready()
    assert list(run.ready) == [
        ("integrate@s2", "s2-c0"), ("integrate@s2", "s2-c1"), ("attack@g1", "g1-c0"), ("attack@g1", "g1-c1"),
        ("release@s1", "s1-c1"), ("release@g1", "g1-c0"), ("release@g1", "g1-c1"),
        ("integrate@g2", "g2-c0"), ("integrate@g2", "g2-c1"),
        ("release@s2", "s2-c0"), ("release@s2", "s2-c1"), ("release@g2", "g2-c0"), ("release@g2", "g2-c1")]


def test_the_eta_log_records_each_stage_and_the_wall_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("tasks.progress.time.monotonic", clock)
    log = tmp_path / "eta.json"
    monkeypatch.setenv("VEILBENCH_ETA_LOG", str(log))
    _params(tmp_path, {"a": ("scoreshield", 1, 1)})
    with RunProgress(["release@a", "report"], tmp_path, stream=io.StringIO()) as p:
        p.stage_started("release@a")
        p.stage_cells("release@a", ["epsilon=100"])
        clock.now = 3.0
        _sidecar(tmp_path, "release@a", "epsilon=100", [3.0])
        p.cell_done("release@a", "epsilon=100", "computed")
        p.stage_done("release@a")
        clock.now = 5.0
        p.stage_done("report")
    record = json.loads(log.read_text())
    assert record["wall_seconds"] == 5.0 and record["finished"] and record["stages"] == 2
    assert [e["stage"] for e in record["events"]] == ["release@a", "report"]
    assert record["events"][0] == {"elapsed": 3.0, "stages_done": 1, "stage": "release@a", "eta": 0.0}


def test_piped_output_prints_a_progress_line_between_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("tasks.progress.time.monotonic", clock)
    _params(tmp_path, {"a": ("scoreshield", 3, 1)})
    out = io.StringIO()
    with RunProgress(["release@a"], tmp_path, stream=out, heartbeat=30.0) as p:
        p.stage_started("release@a")
        p.stage_cells("release@a", ["epsilon=100", "epsilon=101", "epsilon=102"])
        for i, t in enumerate((10.0, 45.0, 50.0)):
            clock.now = t
            _sidecar(tmp_path, "release@a", f"epsilon={100 + i}", [10.0])
            p.cell_done("release@a", f"epsilon={100 + i}", "computed")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("… 2/3 cells done (2 computed), 0/1 stages; elapsed 45.0 s, ETA ")


def _bench_eta():
    import importlib
    import sys

    from tests.conftest import REPO

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return importlib.import_module("bench_eta")
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def test_bench_eta_reads_the_eta_at_a_quarter_of_the_stages_against_the_time_left() -> None:
    bench = _bench_eta()
    log = {"stages": 8, "wall_seconds": 100.0, "events": [
        {"elapsed": 10.0, "stages_done": 1, "eta": None}, {"elapsed": 20.0, "stages_done": 2, "eta": 120.0},
        {"elapsed": 40.0, "stages_done": 3, "eta": 30.0}]}
    out = bench.at_fraction(log)
    assert out["stage_at"] == 2 and out["actual_remaining"] == 80.0 and out["ratio"] == 1.5 and out["within_2x"]
    log["events"][1]["eta"] = None
    assert bench.at_fraction(log)["within_2x"] is False, "still estimating at a quarter: not within 2x"
    log["events"][1]["eta"] = 200.0
    assert bench.at_fraction(log)["ratio"] == 2.5 and not bench.at_fraction(log)["within_2x"]


def test_bench_eta_quick_params_are_a_valid_small_run() -> None:
    from tests.conftest import REPO
    from veilbench.config import validate_config

    bench = _bench_eta()
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    cfg = validate_config(bench.quick_params(params))
    assert sorted(s.family for s in cfg.sweeps.values()) == ["anchornoise", "dc", "gca", "scoreshield"]
    assert all(len(s.seeds) == 1 and len(s.expand()) <= 2 for s in cfg.sweeps.values())
    used = {s.embedding for s in cfg.sweeps.values()}
    assert set(cfg.embeddings) == used
