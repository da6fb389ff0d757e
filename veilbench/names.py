"""The one rule for names that become folder, file or DVC stage names.

Sweeps, datasets, embeddings, frontiers and the MLflow experiment are named by the user in
``params.yaml``; each name becomes a path component (``data/release/<sweep>/``,
``reports/figures/<frontier>.png``) and, for the first three, a DVC stage name
(``release@<sweep>``) and a dotted DVC params key (``sweeps.<sweep>``). :func:`safe_name`
accepts a name only when it

* matches ``[A-Za-z0-9][A-Za-z0-9_-]*``: no path separator, no ``..``, no leading dot (a hidden
  temporary), no newline, no ``.`` (which would split the DVC params key), no ``@``;
* is at most :data:`MAX_NAME_CHARS` characters (file systems allow 255 bytes per component, and
  the name is embedded in longer ones).

Cell names are made, not chosen (:func:`cell_name`): the keys a cell sets, sorted, ``k=v``
joined by ``_``, each character outside ``[A-Za-z0-9._=+-]`` replaced by ``_``; one longer than
:data:`MAX_CELL_CHARS` keeps its first characters and ends in 12 hex digits of the SHA-256 of the
full name, so distinct cells keep distinct names.

The keys are sorted (code-point order of the key strings) so that a cell's name, and with it
its folder, its DVC outputs, its MLflow run and every claim naming it, is a function of the
*set* of ``(key, value)`` pairs it assigns and of nothing else: writing a grid's axes or an
explicit cell's keys in another order in ``params.yaml`` renames nothing, and two cells equal up
to key order get the same name (so they are reported as duplicates). The other
order-independent candidate, the family's declared option order (its ``Params`` fields) and
sorted for the rest, was rejected: it ties every cell name to the field order of a class, so
reordering a model's fields would rename cells, and over the shipped params files together it
renames more of the names written before this rule than sorting does.

:func:`inside` resolves a path built from names and refuses one that leaves its root (a
symbolic link pointing out, for instance).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from veilbench.validation import UsageError

#: Longest user-chosen name (characters).
MAX_NAME_CHARS = 64
#: Longest cell name (characters); longer ones are shortened with a digest.
MAX_CELL_CHARS = 120

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")
_CELL_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")


def safe_name(name: Any, field: str) -> str:
    """Return ``name`` when it is a safe folder and stage name (see the module docstring); else
    raise :class:`UsageError` naming ``field`` and the rule."""
    if not isinstance(name, str):
        raise UsageError(f"{field}: a name must be a string, got {type(name).__name__} {name!r}")
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(f"{field}: name {name[:20]!r}… is {len(name)} characters long; at most {MAX_NAME_CHARS}")
    if not _SAFE.fullmatch(name):
        raise UsageError(f"{field}: name {name!r}: names may hold letters, digits, '_' and '-' only, "
                         f"starting with a letter or digit")
    return name


def cell_name(assignment: Mapping[str, Any]) -> str:
    """The folder name of a cell that sets ``assignment`` (``"default"`` for none): its keys in
    sorted order whatever the mapping's order; see the module docstring.

    >>> cell_name({"mechanism": "newton", "epsilon": 8.0}) == cell_name({"epsilon": 8.0, "mechanism": "newton"})
    True
    >>> cell_name({"mechanism": "newton", "epsilon": 8.0})
    'epsilon=8.0_mechanism=newton'
    """
    if not assignment:
        return "default"
    name = _CELL_UNSAFE.sub("_", "_".join(f"{k}={assignment[k]}" for k in sorted(assignment)))
    if name[0] in "._-=+":
        name = "c" + name
    if len(name) > MAX_CELL_CHARS:
        name = f"{name[: MAX_CELL_CHARS - 13]}_{hashlib.sha256(name.encode()).hexdigest()[:12]}"
    return name


def inside(root: str | Path, *parts: str) -> Path:
    """``root / parts…`` resolved; :class:`UsageError` when it is not inside ``root`` (resolved)."""
    base = Path(root).resolve()
    path = base.joinpath(*parts).resolve()
    if path != base and base not in path.parents:
        raise UsageError(f"{'/'.join(parts)}: resolves to {path}, outside {base}; use a plain name")
    return path
