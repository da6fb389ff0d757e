"""The suite's pytest-xdist scheduler (:mod:`tests.xdist_schedule`) against the pinned pytest-xdist:
a worker reserves its next test file only when one test is pending, where xdist's own does at two."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

from xdist.scheduler import LoadFileScheduling

from tests.xdist_schedule import OneFileAhead

REPO = Path(__file__).resolve().parents[1]

#: Three test files: ``a`` with three tests, ``b`` and ``c`` with one, ``d`` with two.
COLLECTION = ["a.py::t0", "a.py::t1", "a.py::t2", "b.py::t0", "c.py::t0", "d.py::t0", "d.py::t1"]


class _Worker:
    """What the scheduler uses of a pytest-xdist worker: its id, the test indices it was sent, shutdown."""

    def __init__(self, name: str) -> None:
        self.gateway, self.shutting_down, self.sent = SimpleNamespace(id=name), False, []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True

    def files(self) -> list[str]:
        return sorted({COLLECTION[i].split("::")[0] for i in self.sent})


def _scheduled(scheduler_class: type) -> tuple[LoadFileScheduling, _Worker, _Worker]:
    config = SimpleNamespace(getvalue=lambda name: {"tx": ["2*popen"]}[name],
                             option=SimpleNamespace(loadscopereorder=False))
    scheduler, first, second = scheduler_class(config), _Worker("gw0"), _Worker("gw1")
    for worker in (first, second):
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, COLLECTION)
    scheduler.schedule()
    return scheduler, first, second


def test_pytest_xdist_is_the_version_pinned() -> None:
    (pin,) = [d for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
              if d.startswith("pytest-xdist")]
    assert re.fullmatch(r"pytest-xdist==[\d.]+", pin), pin
    assert version("pytest-xdist") == pin.split("==")[1], (
        "pytest-xdist changed: check tests/xdist_schedule.py against its LoadFileScheduling, then move the pin")


def test_a_worker_reserves_its_next_file_only_before_its_last_test() -> None:
    scheduler, first, second = _scheduled(OneFileAhead)
    assert first.files() == ["a.py"], "three tests pending: nothing more"
    assert second.files() == ["b.py", "c.py"], "one test pending (held back until the next is known): one more file"
    scheduler.mark_test_complete(first, 0)
    assert first.files() == ["a.py"], "two tests still pending: the next file stays free for a worker that runs out"
    scheduler.mark_test_complete(first, 1)
    assert first.files() == ["a.py", "d.py"]
    assert not scheduler.workqueue and first.shutting_down is False
    scheduler.mark_test_complete(second, 3)
    assert second.shutting_down, "no file left: the worker runs what it holds and stops"


def test_xdist_own_scheduler_reserves_a_file_two_tests_ahead() -> None:
    """The control: the behaviour :class:`OneFileAhead` changes is xdist's (if this fails, xdist's
    rule moved and the subclass may no longer be needed, or no longer work)."""
    scheduler, first, _ = _scheduled(LoadFileScheduling)
    scheduler.mark_test_complete(first, 0)
    assert first.files() == ["a.py", "d.py"]


def test_the_suite_uses_it_under_loadfile_only() -> None:
    from tests.conftest import pytest_xdist_make_scheduler

    def config(dist: str) -> SimpleNamespace:
        return SimpleNamespace(getvalue=lambda name: {"dist": dist, "tx": ["3*popen"]}[name],
                               option=SimpleNamespace(loadscopereorder=False))

    assert type(pytest_xdist_make_scheduler(config("loadfile"), None)) is OneFileAhead
    assert pytest_xdist_make_scheduler(config("load"), None) is None, "other modes: xdist's own"
