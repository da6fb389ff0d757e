"""Ctrl-C (and SIGTERM) that stops a run within seconds, leaving nothing half-written.

The first SIGINT or SIGTERM (``kill``, a service manager, a CI timeout: handled exactly as Ctrl-C)
raises ``KeyboardInterrupt`` in the main thread (the orderly path: nothing new starts, the lock
entries of finished stages are written, the server stops) and starts a watchdog; the run ends with
status 128 + the signal's number (130, 143). A cell cannot be stopped midway, and the task runner waits for the cells in flight;
so if the process is still alive after ``grace_s`` the watchdog waits for any DVC write in
progress, runs the clean-ups (newest first: the live display, the Prefect server) and ends the
process with status 130. It does not write the lock entries of the finished stages itself (DVC
takes seconds per lock file on a loaded machine): the next run finds those stages changed and
reuses their cells, whose input keys are unchanged. Nothing is left half-written: cells write
their outputs to temporaries renamed into place (the next run removes leftovers and marks their
MLflow runs failed), and DVC files are written only under :attr:`Interrupt.dvc_writes`, which
the watchdog takes before it exits.

A signal can also stand for a failure found in another thread (the run's Prefect server died):
each of :attr:`Interrupt.causes` is asked when the signal arrives, and one that returns an
exception makes it a *failure*: no "interrupted" line, :attr:`Interrupt.failure` holds the error,
which is reported once (:meth:`Interrupt.report`) by whichever of the main thread and the watchdog
gets there first, and the status is 1.

This module imports nothing heavy (no Prefect: its settings are read at import time, after
``veilbench run`` has exported the API URL of its server).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


#: The signals handled as Ctrl-C.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupt:
    """Ctrl-C and SIGTERM handling of one run (see the module docstring). Use :meth:`installed`
    around the run in the main thread; wrap DVC writes in :meth:`writing`; append clean-ups to
    ``cleanups`` and failure checks to ``causes``."""

    def __init__(self, grace_s: float = 2.0):
        self.grace_s = grace_s
        self.dvc_writes = threading.Lock()
        self.cleanups: list[Callable[[], object]] = []
        self.causes: list[Callable[[], BaseException | None]] = []
        self.fired = threading.Event()
        self.signum: int | None = None
        self.failure: BaseException | None = None
        self._pending = False
        self._reported = threading.Lock()
        self._said = False

    @property
    def exit_status(self) -> int:
        """1 for a failure, else 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM)."""
        return 1 if self.failure is not None else 128 + int(self.signum or signal.SIGINT)

    def report(self, line: str) -> bool:
        """Print ``line`` to stderr unless a line was already reported; True when this call printed it."""
        with self._reported:
            if self._said:
                return False
            self._said = True
        print(line, file=sys.stderr, flush=True)
        return True

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold :attr:`dvc_writes`; a Ctrl-C arriving meanwhile takes effect when the write ends."""
        with self.dvc_writes:
            yield
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt

    def _handler(self, signum: int, frame: object) -> None:
        if self.fired.is_set():
            return  # already stopping; a second Ctrl-C must not cut a write short
        self.fired.set()
        self.signum = signum
        for cause in self.causes:
            self.failure = self.failure or cause()
        if self.failure is None:
            name = "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"
            print(f"\ninterrupted{name}: stopping (finished cells are kept; running cells are dropped)",
                  file=sys.stderr, flush=True)
        threading.Thread(target=self._watchdog, name="interrupt-watchdog", daemon=True).start()
        if self.dvc_writes.locked():
            self._pending = True
            return
        raise KeyboardInterrupt

    def _watchdog(self) -> None:
        time.sleep(self.grace_s)
        with self.dvc_writes:
            pass  # a DVC write in progress ends first
        for cleanup in reversed(self.cleanups):  # each takes the lock itself where it writes
            try:
                cleanup()
            except Exception as exc:  # noqa: BLE001 - exiting anyway; say what was not cleaned
                print(f"interrupted: clean-up {getattr(cleanup, '__name__', cleanup)} failed: {exc}",
                      file=sys.stderr, flush=True)
        self.dvc_writes.acquire()  # no DVC write can start (or be cut) from here on
        if self.failure is not None:
            self.report(f"error: {self.failure}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(self.exit_status)

    @contextmanager
    def installed(self) -> Iterator[Interrupt]:
        """The SIGINT and SIGTERM handlers, inside the block (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {signum: signal.signal(signum, self._handler) for signum in SIGNALS}
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def end_run(interrupt: Interrupt, exc: BaseException, message: str) -> None:
    """End the process after ``exc`` stopped the run (Ctrl-C, SIGTERM, or a failure found by one of
    ``interrupt``'s causes, or an ``exc`` of the type of those failures, ``failure_types``): one
    ``error:`` line for a failure (status 1), else ``message`` (status 128 + the signal). Worker
    threads may still be inside a cell; their outputs go to temporaries, so the process ends now
    instead of waiting for them."""
    failure = interrupt.failure or (exc if not isinstance(exc, KeyboardInterrupt) else None)
    if failure is not None:
        interrupt.report(f"error: {failure}")
    else:
        print(message, file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if failure is not None else interrupt.exit_status)


def run_child(cmd: list[str], interrupt: Interrupt, stop_signal: int = signal.SIGTERM, grace_s: float = 5.0,
              **popen: object) -> int:
    """Run ``cmd`` (a pipeline of its own: ``dvc repro``, ``python -m flows.benchmark`` with its
    Dask workers) in a session and process group of its own, inside ``interrupt``'s handling; return
    its exit status. A terminal's Ctrl-C then reaches only this process, which stops the child's
    whole group: ``stop_signal`` first (SIGINT for DVC, which stops in order on it; SIGTERM for the
    Dask path, whose workers would otherwise tear down for minutes), SIGKILL for what is left after
    ``grace_s`` (the group's leader exited, its workers not). The same clean-up runs if the watchdog
    ends this process first."""
    import subprocess

    child = subprocess.Popen(cmd, start_new_session=True, **popen)  # type: ignore[call-overload]

    def stop_child() -> None:
        """``stop_signal`` to the child's group, ``grace_s`` for it to stop in order (DVC finishing a
        lock file), then SIGKILL to what is left of the group."""
        for sig in (stop_signal, signal.SIGKILL):
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                return
            if sig == stop_signal:
                try:
                    child.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    pass

    interrupt.cleanups.append(stop_child)
    try:
        return child.wait()
    except BaseException:
        stop_child()
        raise
