"""The overhead benchmark's compute time is the union of the recorded computation intervals."""

from __future__ import annotations

import json

import pytest

from tests.benchmark_run import ROOT, load_benchmark


def _bench():
    return load_benchmark("bench_overhead.py")


def test_union_counts_overlapping_cells_once():
    union = _bench().union_seconds
    assert union([]) == 0.0
    assert union([(0.0, 2.0), (1.0, 3.0)]) == pytest.approx(3.0)  # two cells overlapping by 1 s
    assert union([(5.0, 6.0), (0.0, 1.0)]) == pytest.approx(2.0)  # disjoint, any order
    assert union([(0.0, 10.0), (2.0, 3.0), (4.0, 5.0)]) == pytest.approx(10.0)  # nested


def test_intervals_read_from_the_timings_sidecars_not_the_outputs(tmp_path):
    def write(path: str, record: dict) -> None:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(json.dumps(record))

    write("data/prepare/digits/timings.json", {"seconds": 1.0, "started": 10.0})
    write("data/release/sw/c/timings.json",
          {"per_seed": {"0": {"seconds": 2.0, "started": 20.0}, "1": {"seconds": 1.0, "started": 21.0}}})
    write("data/evaluate/sw/c/timings.json", {"per_seed": {"0": {"seconds": 0.5, "started": 30.0}}})
    write("data/attack/sw/c/manifest.json", {"info": {"0": {"seconds": 9.0, "started": 40.0}}})  # not read
    bench = _bench()
    intervals = bench._compute_intervals(tmp_path)
    assert sorted(intervals) == [(10.0, 11.0), (20.0, 22.0), (21.0, 22.0), (30.0, 30.5)]
    assert bench.union_seconds(intervals) == pytest.approx(3.5)
