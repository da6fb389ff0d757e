"""The contract between a method family and the pipeline stages.

A *cell* is one configuration of one family (e.g. ScoreShield Gaussian vector release at
ε = 1 on digits/PCA). The pipeline runs each cell through the stages
``release → integrate → attack → evaluate`` once per seed, after the generic
``prepare`` (load, split, partition) and ``embed`` (encode) stages.

Every family module exposes

* ``Params``: a pydantic model of the family's cell options (``extra="forbid"``, every range
  checked), validated before any work starts;
* ``METHOD_KEY``: the option naming a cell's method (ScoreShield's ``mechanism``, GCA's ``method``,
  …); its value tags the cell's runs and records and its privacy-ledger entries (:func:`method_of`);
* ``USES_TORCH``: whether its cells load torch; a family without torch may name in
  ``TORCH_OPTIONS`` (option → value) the options that make one of its cells load it all the same
  (:func:`cells_use_torch`). The pipeline sets torch's thread count only where a cell may load it;
* four stage functions (:data:`STAGES`) with one signature::

      def release(inputs: StageInputs, params: Params, seed: int) -> StageOutput
      def integrate(inputs: StageInputs, params: Params, seed: int) -> StageOutput
      def attack(inputs: StageInputs, params: Params, seed: int) -> StageOutput
      def evaluate(inputs: StageInputs, params: Params, seed: int) -> StageOutput

Stage functions use no process-global state: every random draw comes from a generator derived
from ``seed`` (e.g. :func:`veilbench.random.stream`), and thread limits are the pipeline's. The
pipeline therefore runs cells of any family concurrently in worker threads of one process.

Data-free references and control attacks. A module may declare ``DATA_FREE``: a tuple of option
dicts, each naming the options that make a cell a *data-free reference*, a release that never
reads the private data (same shapes, same random streams as the real releases), e.g.
``({"mechanism": "identity"}, {"mechanism": "identity_noise"})``; a cell whose options contain all
items of one of them is a reference (:func:`is_data_free`), run as an ordinary cell, whose
utility is what publishing nothing useful achieves. A module may also declare
``ADVANTAGE_METRICS``: privacy metric → ``(control metric, advantage metric)`` it emits per seed,
the control being the same attack with the same side knowledge but without the release, and the
advantage (:mod:`veilbench.metrics.advantage`) ``(main − control)/(1 − control)`` for success
rates or ``1 − main/control`` for errors.

Metric-level data-free references. Where the data-free attackers or releases are not cells but
companions computed beside every cell (e.g. GCA's control attackers, the detector that flags every
test record), a module may declare ``DATA_FREE_METRICS``: metric → :class:`DataFreeMetric`, whose
``value`` is either the name of a companion metric of the same cell (its value on that cell's data
and seed) or a constant (e.g. ROC AUC 0.5 for a detector whose score is constant), and whose
``label`` says what it is ("best data-free attacker", "flag-all detector"). The report draws each
such reference in every figure whose x or y axis shows the metric, and adds it to the family's
tables (:mod:`tasks.report.references`).

What a stage reads. A module may declare ``STAGE_INPUTS[stage]`` (the earlier stages whose arrays
the stage reads) and ``STAGE_OPTIONS[stage]`` (the options, or properties of ``Params``, it reads).
The pipeline then keys the stage's output on these only, so cells that differ in an option the
stage does not read share one output (e.g. every integrator of one DC release), and hands the stage
only what it declared: reading anything else is an error (:mod:`tasks.stage_reads`). A stage
without a declaration reads every option and every earlier stage.

``inputs`` maps each earlier stage name (``"prepare"``, ``"embed"``, ``"release"``, …) to the
arrays that stage produced for this cell and seed (:meth:`StageOutput.saved_arrays`). A stage
returns plain arrays (saved as an ``.npz`` with ``allow_pickle=False``), scalar metrics (logged to
MLflow, written to JSON) and a JSON-able ``info`` dict (solver diagnostics, the σ used, …), and two
typed fields: ``ledger``, the differentially private releases the stage made
(:class:`veilbench.privacy.ledger.Release`; those of ``release`` make the sweep's privacy
ledger), and ``crossfamily``, its part of the cross-family view
(:class:`veilbench.crossfamily.CrossFamilyArrays`: the attack rows of the release, the analyst's
representation; saved with the arrays, read back by the pipeline's ``evaluate``). ``evaluate``
returns metrics only.

Arrays produced by ``prepare`` (see :mod:`veilbench.datasets.partition`):
``X_train (n, p)``, ``y_train (n,)``, ``party_train (n,)`` (party/client index of each record),
``X_test (m, p)``, ``y_test (m,)``. ``embed`` produces ``Z_train (n, k)`` and ``Z_test (m, k)``
(plus the prepare arrays passed through by the pipeline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, NamedTuple, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

from veilbench.crossfamily import CrossFamilyArrays
from veilbench.privacy.ledger import Release

from veilbench.stages import STAGES  # noqa: F401 - re-exported: the stage functions a family implements

StageInputs = Mapping[str, Mapping[str, np.ndarray]]


class FamilyParams(BaseModel):
    """Base of every family's ``Params``: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class StageOutput:
    """What a stage hands to the next: arrays to save, metrics to log, diagnostics to record.

    ``arrays``, ``metrics`` and ``info`` must be functions of the stage's inputs, options and seed
    (they are saved in the hashed outputs); what depends on the run itself — wall or CPU seconds —
    goes in ``timings`` (name → seconds), which is stored in the output's timings sidecar and logged
    to MLflow, never in the outputs."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    ledger: list[Release] = field(default_factory=list)
    crossfamily: CrossFamilyArrays | None = None

    def saved_arrays(self) -> dict[str, np.ndarray]:
        """What the pipeline saves and hands to the later stages: ``arrays`` and the cross-family
        arrays under their stored names (:meth:`CrossFamilyArrays.arrays`)."""
        return {**self.arrays, **(self.crossfamily.arrays() if self.crossfamily is not None else {})}

    def saved_metrics(self) -> dict[str, float]:
        """What the pipeline records as the stage's metrics: ``metrics`` and, for a stage that made
        one differentially private release, its budget's columns (:meth:`Release.metrics`); the
        ledger itself holds every release."""
        extra = self.ledger[0].metrics() if len(self.ledger) == 1 else {}
        return {**{k: float(v) for k, v in self.metrics.items()}, **extra}


class StageFunction(Protocol):
    def __call__(self, inputs: StageInputs, params: Any, seed: int) -> StageOutput: ...


class DataFreeMetric(NamedTuple):
    """A metric's data-free reference: ``value`` a companion metric name or a constant; ``label``
    what achieves it, in a reader's words."""

    value: str | float
    label: str


def passthrough(inputs: StageInputs, params: Any, seed: int) -> StageOutput:
    """A stage a family does not need: produces nothing, recorded as a pass-through."""
    return StageOutput(info={"passthrough": True})


def is_data_free(data_free: tuple[Mapping[str, Any], ...], options: Mapping[str, Any]) -> bool:
    """True when ``options`` (a cell's options) contain every item of one entry of ``data_free``."""
    return any(all(k in options and options[k] == v for k, v in ref.items()) for ref in data_free)


def method_of(family: ModuleType, name: str, options: Mapping[str, Any]) -> str:
    """The method of a cell of ``family`` (registered as ``name``) with ``options``: the value of
    the family's ``METHOD_KEY`` option when the cell sets it, else the family's name."""
    return str(options.get(family.METHOD_KEY, name))


def cells_use_torch(family: ModuleType, cells: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any of ``cells`` (cell options) of ``family`` may load torch: all of them when the
    family ``USES_TORCH`` (or does not say), else those setting one of its ``TORCH_OPTIONS`` to the
    value named there."""
    if getattr(family, "USES_TORCH", True):
        return True
    triggers = getattr(family, "TORCH_OPTIONS", {})
    return any(key in cell and cell[key] == value for cell in cells for key, value in triggers.items())
