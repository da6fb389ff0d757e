"""Ctrl-C that stops a run within seconds, leaving nothing half-written.

The first SIGINT raises ``KeyboardInterrupt`` in the main thread (the orderly path: nothing new
starts, the lock entries of finished stages are written, the server stops) and starts a
watchdog. A cell cannot be stopped midway, and the task runner waits for the cells in flight;
so if the process is still alive after ``grace_s`` the watchdog waits for any DVC write in
progress, runs the clean-ups (newest first: the live display, the Prefect server) and ends the
process with status 130. It does not write the lock entries of the finished stages itself (DVC
takes seconds per lock file on a loaded machine): the next run finds those stages changed and
reuses their cells, whose input keys are unchanged. Nothing is left half-written: cells write
their outputs to temporaries renamed into place (the next run removes leftovers and marks their
MLflow runs failed), and DVC files are written only under :attr:`Interrupt.dvc_writes`, which
the watchdog takes before it exits.

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


class Interrupt:
    """Ctrl-C handling of one run (see the module docstring). Use :meth:`installed` around the
    run in the main thread; wrap DVC writes in :meth:`writing`; append clean-ups to ``cleanups``."""

    def __init__(self, grace_s: float = 2.0):
        self.grace_s = grace_s
        self.dvc_writes = threading.Lock()
        self.cleanups: list[Callable[[], object]] = []
        self.fired = threading.Event()
        self._pending = False

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
        print("\ninterrupted: stopping (finished cells are kept; running cells are dropped)", file=sys.stderr,
              flush=True)
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
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)

    @contextmanager
    def installed(self) -> Iterator[Interrupt]:
        """The SIGINT handler, inside the block (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.signal(signal.SIGINT, self._handler)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)
