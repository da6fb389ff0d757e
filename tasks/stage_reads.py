"""What a cell stage reads, as its family declares it: the key material and the stage's view of it.

A family module may declare, per stage, ``STAGE_INPUTS[stage]`` (the earlier stages whose arrays
the stage reads, e.g. ``("prepare", "release")``) and ``STAGE_OPTIONS[stage]`` (the options, or
properties of its ``Params``, the stage reads). A stage with a declaration is keyed on what it
declares only — so cells that differ in an option the stage does not read share its output
(:mod:`tasks.store`) — and is handed only that: its ``inputs`` hold the declared stages and its
``params`` is a :class:`DeclaredView` that raises :class:`UndeclaredRead` on any other attribute.
An undeclared read is therefore an error on its first run, never a wrong reuse. A stage without a
declaration reads everything: every option and every earlier stage enter its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, NamedTuple



class UndeclaredRead(RuntimeError):
    """A stage read an option or input its family did not declare for it (a bug in the family:
    its outputs would be reused for cells they were not computed for)."""


class StageReads(NamedTuple):
    """The declared inputs and options of one stage (``None``: all)."""

    inputs: tuple[str, ...] | None
    options: tuple[str, ...] | None


def stage_reads(family: ModuleType, stage: str) -> StageReads:
    """The declaration of ``stage`` in ``family`` (module docstring)."""
    inputs = getattr(family, "STAGE_INPUTS", {}).get(stage)
    options = getattr(family, "STAGE_OPTIONS", {}).get(stage)
    return StageReads(None if inputs is None else tuple(inputs), None if options is None else tuple(options))


def key_options(params: Any, reads: StageReads) -> dict[str, Any]:
    """The options that enter the stage's key: all of ``params.model_dump()`` without a
    declaration, else the declared names (options or properties) with their values."""
    if reads.options is None:
        return params.model_dump()
    return {name: getattr(params, name) for name in reads.options}


class DeclaredView:
    """Read-only view of a family's ``Params`` exposing only the ``names`` a stage declared."""

    __slots__ = ("_params", "_names", "_where")

    def __init__(self, params: Any, names: tuple[str, ...], where: str):
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_names", frozenset(names))
        object.__setattr__(self, "_where", where)

    def __getattr__(self, name: str) -> Any:
        if name not in self._names:
            raise UndeclaredRead(f"{self._where}: reads option {name!r}, which is not in its STAGE_OPTIONS "
                                 f"{sorted(self._names)}; declare it (it then enters the stage's input key)")
        return getattr(self._params, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._where}: options are read-only")

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self._params, n)!r}" for n in sorted(self._names))
        return f"DeclaredView({shown})"


class DeclaredInputs(Mapping[str, Any]):
    """The earlier stages' arrays a stage declared; any other stage is an :class:`UndeclaredRead`."""

    def __init__(self, inputs: Mapping[str, Any], names: tuple[str, ...], where: str):
        self._inputs = {k: v for k, v in inputs.items() if k in names}
        self._names, self._where = frozenset(names), where

    def __getitem__(self, stage: str) -> Any:
        if stage not in self._names:
            raise UndeclaredRead(f"{self._where}: reads the arrays of stage {stage!r}, which is not in its "
                                 f"STAGE_INPUTS {sorted(self._names)}")
        return self._inputs[stage]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._inputs)

    def __len__(self) -> int:
        return len(self._inputs)


def stage_view(inputs: Mapping[str, Any], params: Any, reads: StageReads, where: str) -> tuple[Mapping[str, Any], Any]:
    """``(inputs, params)`` as the stage may see them under its declaration ``reads`` (the order of
    a stage function's arguments)."""
    view_inputs = inputs if reads.inputs is None else DeclaredInputs(inputs, reads.inputs, where)
    view_params = params if reads.options is None else DeclaredView(params, reads.options, where)
    return view_inputs, view_params
