"""What the families supply to the report: the one place the report reads a family.

Two modules of a family's package speak to the report. Its family module
(:data:`veilbench.families.FAMILY_MODULES`, the stages: :mod:`veilbench.families.base`) declares its
data-free references, ``DATA_FREE`` and ``DATA_FREE_METRICS``. Its *report module*, the module
``report`` beside it (``veilbench/<family>/report.py``; kept apart so that editing the report's text
recomputes no cell), may declare

* ``QUESTION: str`` — the question the family answers, in a reader's words; it opens the family's
  summary (default: "How much utility does <family> keep, and how much does an attacker get back?");
* ``TITLE: str`` — its name in figure titles (default: the family's registered name);
* ``LOG_SCALE_OPTIONS: frozenset[str]`` — cell options that a frontier against ``param:<option>``
  draws on a log x axis unless the frontier sets ``log_x`` (a privacy budget ε spanning decades);
* ``report_section(reports: Path, sweeps: Sequence[str]) -> list[str]`` — the family's own part of
  ``reports/index.md``: it may write files under ``reports/<family>/`` and returns markdown lines
  (none when it has nothing to say). It is called for every registered family on every build, with
  the family's configured sweeps (possibly none), so that the files it writes always exist.

A name that is not a registered family (a test fixture's) declares none of these.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from veilbench.families.base import DataFreeMetric


def family_module(family: str) -> ModuleType | None:
    """The registered family module of ``family``; None for a name that is not registered."""
    from veilbench.families import FAMILY_MODULES, get_family

    return get_family(family) if family in FAMILY_MODULES else None


def report_module_names() -> tuple[str, ...]:
    """The dotted name of each registered family's report module, ``<family package>.report``, in
    registry order (whether or not the module exists)."""
    from veilbench.families import FAMILY_MODULES

    return tuple(path.rpartition(".")[0] + ".report" for path in FAMILY_MODULES.values())


def report_module(family: str) -> ModuleType | None:
    """The report module of ``family`` (module docstring); None when it has none or is not registered."""
    from veilbench.families import FAMILY_MODULES

    if family not in FAMILY_MODULES:
        return None
    name = dict(zip(FAMILY_MODULES, report_module_names(), strict=True))[family]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise  # the report module exists and fails to import: never hidden
        return None


def _attribute(family: str, name: str, default: Any) -> Any:
    mod = report_module(family)
    return default if mod is None else getattr(mod, name, default)


def question(family: str) -> str:
    """The family's ``QUESTION`` (module docstring)."""
    return _attribute(family, "QUESTION",
                      f"How much utility does {family} keep, and how much does an attacker get back?")


def title(family: str) -> str:
    """The family's ``TITLE``: its name in figure titles."""
    return _attribute(family, "TITLE", family)


def log_scale(family: str, x: str) -> bool:
    """Whether a frontier of ``family`` against ``x`` has a log x axis by default: ``x`` is
    ``param:<option>`` with the option in the family's ``LOG_SCALE_OPTIONS``."""
    return x.startswith("param:") and x.removeprefix("param:") in _attribute(family, "LOG_SCALE_OPTIONS", ())


def declarations(family: str) -> tuple[tuple[Mapping[str, Any], ...], dict[str, DataFreeMetric]]:
    """``(DATA_FREE, DATA_FREE_METRICS)`` of the family module; empty for a name that is not registered."""
    mod = family_module(family)
    if mod is None:
        return (), {}
    return tuple(getattr(mod, "DATA_FREE", ())), dict(getattr(mod, "DATA_FREE_METRICS", {}))


def all_option_names() -> frozenset[str]:
    """Every option name of every registered family's ``Params``."""
    from veilbench.families import FAMILY_MODULES, get_family

    return frozenset(name for f in FAMILY_MODULES for name in get_family(f).Params.model_fields)


def sections(reports: Path, sweeps: Mapping[str, Sequence[str]]) -> list[str]:
    """The families' own sections of ``index.md`` (``report_section`` of each registered family that
    declares one, in registry order; ``sweeps``: family → its configured sweeps)."""
    from veilbench.families import FAMILY_MODULES

    lines: list[str] = []
    for family in FAMILY_MODULES:
        hook = getattr(report_module(family), "report_section", None)
        if hook is not None:
            lines += hook(reports, list(sweeps.get(family, ())))
    return lines
