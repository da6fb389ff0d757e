"""The CPU time a GCA cell reports (``timings["cpu_seconds"]``) counts its client threads' work when
they train on several threads, and a count resumed from a one-thread save says it is a lower bound."""

from __future__ import annotations

import time

from veilbench.gca.family import _ClockedCheckpoints
from veilbench.gca.federation import client_map

BURN = 0.3  # CPU seconds each client thread spends


def _burn(_: int) -> float:
    t0 = time.thread_time()
    while time.thread_time() - t0 < BURN:
        sum(range(1000))
    return time.thread_time() - t0


class _Memory:
    """Checkpoints kept in memory: the last saved (round, state)."""

    def __init__(self) -> None:
        self.saved = None

    def save(self, round_: int, state: dict) -> None:
        self.saved = (round_, dict(state))

    def load(self):
        return None if self.saved is None else (self.saved[0], dict(self.saved[1]))


def test_with_client_threads_the_clock_counts_their_cpu_time() -> None:
    threaded, single = _ClockedCheckpoints(None, threads=2), _ClockedCheckpoints(None, threads=1)
    spent = sum(client_map(_burn, [0, 1], threads=2))
    assert spent >= 2 * BURN
    assert threaded.cpu_seconds() >= 0.9 * spent, "the client threads' CPU time is left out"
    assert single.cpu_seconds() < BURN, "a one-thread clock counts other threads"


def test_a_run_resumed_from_a_one_thread_count_is_marked_partial() -> None:
    memory = _Memory()
    first = _ClockedCheckpoints(memory, threads=1)
    first.save(1, {"x": 1})
    assert memory.saved[1]["_cpu_clock"] == "thread" and memory.saved[1]["_cpu_partial"] is False
    resumed = _ClockedCheckpoints(memory, threads=2)
    round_, state = resumed.load()
    assert (round_, state) == (1, {"x": 1}), "the clock's keys reach the runner"
    assert resumed.partial and resumed.cpu_seconds() >= memory.saved[1]["_cpu_seconds"]
    resumed.save(2, state)
    assert memory.saved[1]["_cpu_partial"] is True and memory.saved[1]["_cpu_clock"] == "process"
    again = _ClockedCheckpoints(memory, threads=2)
    again.load()
    assert again.partial, "partial is kept across later sessions"
    clean = _ClockedCheckpoints(_Memory(), threads=2)
    clean.save(1, {})
    assert clean.inner.saved[1]["_cpu_partial"] is False
