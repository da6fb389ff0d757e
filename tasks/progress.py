"""Progress bars for long loops: rich on a terminal, silent when output is piped (DVC, CI)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate ``items`` with a rich progress bar on stderr when it is a TTY (and TQDM_DISABLE unset)."""
    if not sys.stderr.isatty() or os.environ.get("TQDM_DISABLE"):
        yield from items
        return
    from rich.progress import track

    yield from track(items, description=description, total=total, transient=True)
