"""The FL benchmark's long-tail federation and its lockstep ratio (``benchmarks/bench_fl_rounds.py``)."""

from __future__ import annotations

import pytest

from tests.benchmark_run import ROOT, load_benchmark


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # the script imports its sibling ``measure``
    return load_benchmark("bench_fl_rounds.py")


def test_lockstep_ratio_counts_the_steps_of_the_largest_client_for_every_client(bench):
    assert bench.lockstep_steps_ratio([100, 100, 100], local_epochs=3, batch_size=50) == 1.0
    # τ = E⌈N/B⌉ = (2, 4): the vectorised engine computes 2 × 4 steps where the sequential one computes 6
    assert bench.lockstep_steps_ratio([100, 151], local_epochs=2, batch_size=50) == pytest.approx(8 / 6)


def test_longtail_federation_splits_the_same_records_unevenly(bench):
    iid = bench.build_federation(20, 100, seed=3)
    tail = bench.build_federation(20, 100, seed=3, partition="longtail")
    assert [len(x) for x in iid.clients] == [100] * 20
    sizes = sorted(len(x) for x in tail.clients)
    assert sum(sizes) == 2000 and sizes[-1] >= 5 * sizes[0], sizes
    assert bench.lockstep_steps_ratio(sizes, 10, 50) > 1.5
    assert (tail.x_test == iid.x_test).all(), "the partition changes only the clients' shards"
    with pytest.raises(ValueError, match="partition"):
        bench.build_federation(20, 100, seed=3, partition="dirichlet")


def test_the_partition_option_reaches_the_federation_and_names_the_default_file(bench, tmp_path, monkeypatch):
    """``--partition longtail`` (a shrunk quick mode, Flower left out): unequal clients in every row,
    written to the long-tail file, the IID file untouched."""
    monkeypatch.setitem(bench.MODES, "quick", {"clients": (4,), "records": 400, "rounds": 1, "local_epochs": 1})
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    report = bench.main(["--quick", "--no-flower", "--partition", "longtail"])
    assert (tmp_path / "reports/bench/fl_rounds_longtail.json").is_file()
    assert not (tmp_path / "reports/bench/fl_rounds.json").exists()
    assert report["config"]["partition"] == "longtail"
    for row in report["rows"] + report["summary"]:
        low, high = row["client_records"]
        assert row["partition"] == "longtail" and low < high and row["lockstep_steps_ratio"] > 1.0
    assert all(r["max_abs_diff_vs_sequential"] <= 1e-5 for r in report["rows"])
