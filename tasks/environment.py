"""Environment variables pinned for the length of a block (run plumbing: never part of a cell's code)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


@contextmanager
def pinned_environment(restore: Iterable[str] = (), /, **values: str | None) -> Iterator[None]:
    """Inside the block, each variable of ``values`` is set (``None``: unset); when the block ends,
    normally or by an exception, every variable named in ``values`` or ``restore`` is back as it was
    before: its old value, or unset again if it was unset. ``restore`` names variables the block
    itself may set (a command pinning its params file) without setting them here.

    >>> with pinned_environment(VEILBENCH_EXAMPLE="on"):
    ...     os.environ["VEILBENCH_EXAMPLE"]
    'on'
    >>> "VEILBENCH_EXAMPLE" in os.environ
    False
    """
    saved = {k: os.environ.get(k) for k in (*restore, *values)}
    try:
        _apply(values)
        yield
    finally:
        _apply(saved)


def _apply(values) -> None:
    """Set every variable of ``values`` to its value; a value of None unsets it."""
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def project_prefect_home() -> None:
    """``PREFECT_HOME`` in the project's ``.prefect`` (the parent workspace's for a DVC experiment's
    copy, :func:`tasks.paths.tracking_root`) where unset, before Prefect loads: Prefect creates its
    home when imported, so a ``python -m flows.…`` process (a stage run by DVC) writes nothing under
    ``~/.prefect``."""
    if not os.environ.get("PREFECT_HOME"):
        from tasks.paths import tracking_root

        os.environ["PREFECT_HOME"] = str(tracking_root() / ".prefect")
