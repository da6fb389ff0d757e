"""The schema of ``params.yaml``, validated on load before any work starts.

``params.yaml`` has one section per concern::

    seed: 0                       # base seed; cells add their own seeds
    tracking: {experiment: veilbench}
    datasets:   {<name>: {source, options, test_size, n_parties, scheme, alpha, max_records}}
    embeddings: {<name>: {dataset, encoder, dim, options}}
    sweeps:     {<name>: {family, embedding, seeds, params, grid, cells}}
    report:     {title, frontiers: [...]}

A *sweep* expands to *cells*, one per configuration of its family: the cartesian product of
``grid`` (each combination merged over the shared ``params``), plus each entry of ``cells``
(explicit configurations, e.g. baselines, merged over ``params``). A sweep without grid and
cells is a single cell. Each cell is named by the keys it sets, in sorted order
(:func:`veilbench.names.cell_name`), e.g. ``epsilon=4.0_mechanism=newton``: the order in which a
grid's axes or a cell's keys are written changes no name, and two cells that differ only in key
order are duplicates. Cells are listed in the order written (the grid's product in its axis
order, then ``cells``); only names and options are independent of it.

Every mapping forbids unknown keys, every number is range-checked, cross-references
(a sweep's ``embedding``, an embedding's ``dataset``) must exist, and every expanded cell is
validated by its family's ``Params`` model. Errors are :class:`ConfigError` listing every
problem once, as ``<dotted.key>: <message>``: a cell option at the key where it is written
(``sweeps.<s>.params.delta``, ``sweeps.<s>.grid.epsilon``, ``sweeps.<s>.cells.<i>.…``) with the
cells it concerns, an unknown key with the closest allowed key ("did you mean …?").
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError as PydanticError, field_validator, model_validator

from veilbench import strict_yaml
from veilbench.datasets.registry import CALLER_OPTIONS, DATASETS
from veilbench.families import FAMILY_MODULES, get_family
from veilbench.names import cell_name, safe_name
from veilbench.validation import UsageError, ValidationError

#: Most cells one sweep may expand to, and all sweeps together (checked before expanding: the
#: product of the grid's axis lengths plus the explicit cells).
MAX_CELLS_PER_SWEEP = 5_000
MAX_CELLS = 20_000
#: Seeds are 32-bit (every generator in the pipeline and torch accept them).
MAX_SEED = 2**32 - 1
#: Most names listed in one message (the rest are counted).
_LIST_AT_MOST = 8


def _few(names: list[Any]) -> str:
    """``names`` for a message: the first :data:`_LIST_AT_MOST`, then how many more."""
    shown = ", ".join(repr(n) for n in names[:_LIST_AT_MOST])
    return f"[{shown}{f', … {len(names) - _LIST_AT_MOST} more' if len(names) > _LIST_AT_MOST else ''}]"


def _accepted_options(fn: Any) -> list[str]:
    """The keyword options ``fn`` accepts by name (a ``**kwargs`` catch-all accepts none)."""
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _check_options(options: dict[str, Any], accepted: list[str], where: str) -> None:
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        valid = ", ".join(sorted(accepted)) if accepted else "none"
        raise ValueError(f"{where}: unknown option(s) {unknown}; valid options: {valid}")


class ConfigError(ValidationError):
    """``params.yaml`` is invalid; the message lists each bad key with its allowed range."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetConfig(_Strict):
    source: str = Field(description="registered dataset name (see `veilbench datasets`)")
    options: dict[str, Any] = Field(default_factory=dict, description="loader options, e.g. path=")
    test_size: float = Field(0.3, gt=0.0, lt=1.0)
    n_parties: int = Field(1, ge=1, le=100_000)
    scheme: Literal["iid", "dirichlet"] = "iid"
    alpha: float = Field(0.5, gt=0.0)
    max_records: int | None = Field(None, ge=4)

    @field_validator("source")
    @classmethod
    def _known_source(cls, v: str) -> str:
        if v not in DATASETS:
            raise ValueError(f"must be one of {sorted(DATASETS)}, got {v!r}")
        return v

    @model_validator(mode="after")
    def _loader_options(self) -> DatasetConfig:
        """Every key of ``options`` must be a named parameter of the source's loader."""
        accepted = [o for o in _accepted_options(DATASETS[self.source][0]) if o not in CALLER_OPTIONS]
        _check_options(self.options, accepted, f"options of source {self.source!r}")
        return self


class EmbeddingConfig(_Strict):
    dataset: str
    encoder: Literal["raw", "standardize", "pca", "kernel_pca", "umap", "random_orthogonal", "sentence"] = "standardize"
    dim: int = Field(32, ge=1, le=100_000)
    options: dict[str, Any] = Field(default_factory=dict, description="encoder options (umap only: umap.UMAP's)")

    @model_validator(mode="after")
    def _encoder_options(self) -> EmbeddingConfig:
        """``umap`` takes ``umap.UMAP``'s keyword arguments but the three set from ``dim``, ``seed``
        and the thread count; the others take those of ``ENCODER_OPTIONS`` (``pca``: ``standardize``)."""
        if not self.options:
            return self
        if self.encoder != "umap":
            from veilbench.embed.encoders import ENCODER_OPTIONS

            accepted = ENCODER_OPTIONS.get(self.encoder, {})
            _check_options(self.options, list(accepted), f"options of encoder {self.encoder!r}")
            for key, value in self.options.items():
                if not isinstance(value, accepted[key]):
                    raise ValueError(f"options.{key} of encoder {self.encoder!r}: must be a {accepted[key].__name__}, "
                                     f"got {value!r}")
        else:
            import umap

            set_here = {"self", "n_components", "random_state", "n_jobs"}
            _check_options(self.options, [n for n in _accepted_options(umap.UMAP.__init__) if n not in set_here],
                           "options of encoder 'umap'")
        return self


class SweepConfig(_Strict):
    family: str
    embedding: str
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1, max_length=100,
                             description=f"distinct seeds in [0, {MAX_SEED}]")
    params: dict[str, Any] = Field(default_factory=dict, description="options shared by every cell")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="cartesian product → one cell each")
    cells: list[dict[str, Any]] = Field(default_factory=list, description="explicit extra cells")

    @field_validator("grid")
    @classmethod
    def _non_empty_axes(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for axis, values in v.items():
            if not values:
                raise ValueError(f"grid axis {axis!r} has no values")
            if len({repr(x) for x in values}) != len(values):
                raise ValueError(f"grid axis {axis!r} repeats a value")
        return v

    def _assignments(self) -> list[tuple[str, dict[str, Any]]]:
        pairs: list[tuple[str, dict[str, Any]]] = []
        if self.grid:
            axes = list(self.grid)
            for combo in itertools.product(*(self.grid[a] for a in axes)):
                assignment = dict(zip(axes, combo, strict=True))
                pairs.append((cell_name(assignment), {**self.params, **assignment}))
        pairs += [(cell_name(extra), {**self.params, **extra}) for extra in self.cells]
        return pairs or [("default", dict(self.params))]

    @model_validator(mode="after")
    def _distinct_cells(self) -> SweepConfig:
        n = self.n_cells()
        if n > MAX_CELLS_PER_SWEEP:
            raise ValueError(f"grid: expands to {n} cells (the product of the axis lengths "
                             f"{[len(v) for v in self.grid.values()]} plus {len(self.cells)} explicit cells); at most "
                             f"{MAX_CELLS_PER_SWEEP} per sweep: split the sweep or shorten the axes")
        names = [n for n, _ in self._assignments()]
        counts: dict[str, int] = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        dupes = sorted(name for name, k in counts.items() if k > 1)
        if dupes:
            raise ValueError(f"cells: two cells expand to the same configuration {_few(dupes)}")
        return self

    def n_cells(self) -> int:
        """How many cells the sweep expands to, computed without expanding it."""
        grid = math.prod(len(v) for v in self.grid.values()) if self.grid else 0
        return max(grid + len(self.cells), 1)

    def expand(self) -> dict[str, dict[str, Any]]:
        """Cell name → the cell's full family options, in a stable order."""
        return dict(self._assignments())

    @field_validator("family")
    @classmethod
    def _known_family(cls, v: str) -> str:
        if v not in FAMILY_MODULES:
            raise ValueError(f"must be one of {sorted(FAMILY_MODULES)}, got {v!r}")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if any(s < 0 for s in v) or len(set(v)) != len(v):
            raise ValueError("seeds must be distinct non-negative integers")
        if any(s > MAX_SEED for s in v):
            raise ValueError(f"seeds must be at most {MAX_SEED} (32-bit), got {max(v)}")
        return v


class TrackingConfig(_Strict):
    experiment: str = Field("veilbench", min_length=1)

    @field_validator("experiment")
    @classmethod
    def _safe(cls, v: str) -> str:
        return _safe_field(v)


class FrontierConfig(_Strict):
    """One privacy–utility figure: x = privacy metric, y = utility metric, one curve per group."""

    name: str
    family: str
    title: str = Field("", description="the figure's title (default: the family and the axes' labels)")
    x: str = Field(description="a metric name, or param:<option> for a cell option such as ε")
    y: str
    group_by: str | list[str] = Field("mechanism", description="option(s) whose values name the curves")
    reference_groups: list[str] = Field(
        default_factory=list, description="groups drawn as horizontal reference lines (e.g. clean, identity)")
    sweeps: list[str] = Field(default_factory=list, description="only cells of these sweeps (default: all)")
    x_label: str = ""
    y_label: str = ""
    log_x: bool | None = Field(None, description="log-scale x axis (default: only when x is param:epsilon)")
    log_y: bool = False
    fit_loglog: bool = Field(False, description="fit and report the slope of log y vs log x per curve")
    mark_x: float | None = Field(None, description="mark this x on the figure and report each curve's y there "
                                                   "(linear interpolation between neighbouring points)")
    mark_label: str = ""
    paper_y: float | None = Field(None, description="a paper's y value at mark_x, drawn and labelled as the paper's")
    paper_label: str = Field("", description="what paper_y is (source, data set); shown with 'paper:'")

    @field_validator("name")
    @classmethod
    def _safe(cls, v: str) -> str:
        return _safe_field(v)

    @model_validator(mode="after")
    def _paper_needs_mark(self) -> FrontierConfig:
        if self.paper_y is not None and self.mark_x is None:
            raise ValueError("paper_y: needs mark_x (the x at which the paper reports its value)")
        return self


class MetricRef(_Strict):
    """One cell metric: ``metric`` of cell ``cell`` in sweep ``sweep`` (mean over the cell's seeds)."""

    sweep: str
    cell: str
    metric: str


class FrontierRef(_Strict):
    """A number read off a frontier: the fitted log-log ``slope`` of one curve (needs
    ``fit_loglog``), or the curve's ``y_at_mark`` (needs ``mark_x``)."""

    frontier: str
    curve: str = Field(description="the curve's name as in the figure's legend (the group_by values)")
    stat: Literal["slope", "y_at_mark"]


class ClaimConfig(_Strict):
    """A headline claim of a paper checked against our runs, for the "paper vs ours" table.

    ``ours`` is the measured value (a cell metric, or a frontier's slope / value at its mark); the
    claim is ``ours <op> factor · than`` (``than`` a number or another reference), with
    ``tolerance`` for ``~`` (|ours − factor · than| ≤ tolerance). It is judged *held*, *not held*
    or *inconclusive* on the paired per-seed differences with one-sided 95% t bounds, *held* only
    when the Holm-adjusted p-value over the family's findings is ≤ α as well
    (``tasks/report/verdicts.py``). ``data_free`` lists what releases or attackers that never read the
    data would put in ``ours``' place (cell metrics, frontier curves, numbers): when one of them
    also satisfies the claim, the claim is *trivial*. ``kind: accounting_identity`` marks a claim
    true by construction of a formula (no sampling): *trivial* when it holds; ``kind:
    theorem_check`` a property every release has, data-free ones included (judged, not counted as
    a finding). ``over`` names an option of ``ours``' cell (e.g. ``n_parties``, ``d_tilde``,
    ``epsilon``): the claim is judged at every value of it that the sweep holds, each reference
    whose cell sets that option moved to the same value. ``premise`` is an attacker advantage
    (``*_advantage``) that must beat its data-free control for the claim to be judged (else
    *vacuous*); a claim whose ``ours`` and ``than`` are both advantages gets one automatically (the
    side the claim says leaks more). ``paper`` is the paper's own statement or number, shown
    labelled as the paper's; ``why_not`` is shown only when the claim is not held. A referenced
    sweep or cell that is not in the params file leaves the claim *not evaluated* (a warning,
    :meth:`Config.missing_claim_cells`), never an error: grids can be edited freely."""

    family: str
    claim: str
    source: str = Field(description="where the paper states it (spec section, table)")
    paper: str = Field(description="the paper's number or statement, verbatim from the spec")
    ours: MetricRef | FrontierRef
    op: Literal["<", "<=", ">", ">=", "~"]
    than: float | MetricRef | FrontierRef
    factor: float = Field(1.0, gt=0.0, description="compare with factor · than (e.g. 0.16 for '84% less')")
    tolerance: float = Field(0.0, ge=0.0)
    kind: Literal["measured", "accounting_identity", "theorem_check"] = Field(
        "measured", description="accounting_identity: true by construction of a formula; theorem_check: a property "
                                "every release has (data-free ones too): judged, not counted as a finding")
    data_free: list[float | MetricRef | FrontierRef] = Field(
        default_factory=list, description="values data-free releases/attackers put in ours' place; if one satisfies "
                                          "the claim too, the claim is trivial")
    over: str | None = Field(None, description="an option of ours' cell: judge the claim at every value the sweep holds")
    premise: MetricRef | None = Field(
        None, description="an attacker advantage (*_advantage) that must beat its control (lower bound > 0) for the "
                          "claim to be judged; automatic when ours and than are both advantages")
    why_not: str = ""

    @field_validator("premise")
    @classmethod
    def _premise_is_an_advantage(cls, v: MetricRef | None) -> MetricRef | None:
        if v is not None and not v.metric.endswith("_advantage"):
            raise ValueError(f"metric: a premise is an attacker advantage over its control (a metric named "
                             f"*_advantage), got {v.metric!r}")
        return v

    def metric_refs(self) -> list[tuple[str, MetricRef]]:
        """(field, reference) of every cell metric the claim reads: ours, than, data_free.<j>, premise."""
        refs = [("ours", self.ours), ("than", self.than),
                *((f"data_free.{j}", d) for j, d in enumerate(self.data_free)), ("premise", self.premise)]
        return [(f, r) for f, r in refs if isinstance(r, MetricRef)]


class DataFreeConfig(_Strict):
    """The data-free references of one sweep and the utility metrics on which every other cell of
    the sweep must beat the best of them (the report lists the cells that do not).

    ``references`` select data-free cells by name or by an option filter (``{mechanism: identity}``:
    every key must match the cell's option); ``companions`` map a metric to a metric of the same
    cell that holds a data-free release's value (e.g. ``utility_gram_mse:
    reference_identity_gram_mse``) or to a constant that a data-free release attains by definition
    (e.g. ``utility_roc_auc: 0.5``, the ROC AUC of a detector that flags every record); ``exclude`` drops cells that are not releases (e.g. the clean
    reference); ``match`` names options a reference must share with a cell to be compared with it
    (e.g. ``n_records``); ``metrics`` map each utility metric to ``higher`` or ``lower`` (which is
    better)."""

    sweep: str
    references: list[str | dict[str, Any]] = Field(default_factory=list)
    companions: dict[str, str | float] = Field(default_factory=dict)
    exclude: list[str | dict[str, Any]] = Field(default_factory=list)
    match: list[str] = Field(default_factory=list, description="options a reference must share with the cell")
    metrics: dict[str, Literal["higher", "lower"]] = Field(min_length=1)

    @model_validator(mode="after")
    def _some_reference(self) -> DataFreeConfig:
        if not self.references and not self.companions:
            raise ValueError("references: give at least one data-free cell (name or option filter) or a companion metric")
        for m in self.companions:
            if m not in self.metrics:
                raise ValueError(f"companions.{m}: not one of the checked metrics ({sorted(self.metrics)})")
        return self


class ReportConfig(_Strict):
    title: str = "veilbench report"
    frontiers: list[FrontierConfig] = Field(default_factory=list)
    columns: dict[str, list[str]] = Field(
        default_factory=dict, description="family → metrics shown in index.md (default: all; tables/ hold all)")
    claims: list[ClaimConfig] = Field(default_factory=list, description="the paper vs ours table")
    data_free: list[DataFreeConfig] = Field(
        default_factory=list, description="per sweep: its data-free reference cells and the utility metrics checked")
    crossfamily_sweeps: list[str] = Field(
        default_factory=list, description="sweeps shown in the cross-family view (default: every sweep whose cells "
                                          "emit the cross-family metrics)")


#: Joins the problems one model validator found into one pydantic message; :func:`_format` splits
#: them again, one line each.
_PROBLEM_SEP = "\n"


def _report_references(cfg: Config) -> list[str]:
    """Problems of the ``report`` section that only the whole file can show: a frontier's family
    and sweeps (which must exist and be of that family), ``columns``' families, repeated frontier
    names (each names a figure file)."""
    problems = []
    seen: set[str] = set()
    for i, fr in enumerate(cfg.report.frontiers):
        where = f"report.frontiers.{i}"
        if fr.name in seen:
            problems.append(f"{where}.name: {fr.name!r} names an earlier frontier too (each is one figure file)")
        seen.add(fr.name)
        if fr.family not in FAMILY_MODULES:
            problems.append(f"{where}.family: {fr.family!r} is not a family ({sorted(FAMILY_MODULES)})"
                            f"{did_you_mean(fr.family, list(FAMILY_MODULES))}")
            continue
        for j, sweep in enumerate(fr.sweeps):
            if sweep not in cfg.sweeps:
                problems.append(f"{where}.sweeps.{j}: {sweep!r} is not in sweeps{did_you_mean(sweep, list(cfg.sweeps))}")
            elif cfg.sweeps[sweep].family != fr.family:
                problems.append(f"{where}.sweeps.{j}: {sweep!r} is a {cfg.sweeps[sweep].family} sweep, not {fr.family}")
    for family in cfg.report.columns:
        if family not in FAMILY_MODULES:
            problems.append(f"report.columns.{family}: not a family ({sorted(FAMILY_MODULES)})"
                            f"{did_you_mean(family, list(FAMILY_MODULES))}")
    return problems


def did_you_mean(word: str, choices: list[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices`` to a misspelt ``word`` (difflib's
    ratio ≥ 0.6), else ``""``."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _safe_field(v: str) -> str:
    """:func:`safe_name` for a field validator (pydantic names the field)."""
    try:
        return safe_name(v, "name")
    except UsageError as exc:
        raise ValueError(str(exc).removeprefix("name: ")) from None


class Config(_Strict):
    seed: int = Field(0, ge=0, le=MAX_SEED)
    tracking: TrackingConfig = TrackingConfig()
    datasets: dict[str, DatasetConfig]
    embeddings: dict[str, EmbeddingConfig]
    sweeps: dict[str, SweepConfig]
    report: ReportConfig = ReportConfig()

    @model_validator(mode="after")
    def _references(self) -> Config:
        problems = []
        for group in ("datasets", "embeddings", "sweeps"):
            for name in getattr(self, group):
                try:
                    safe_name(name, f"{group}.{name}"[:80])
                except UsageError as exc:
                    problems.append(str(exc))
        total = sum(s.n_cells() for s in self.sweeps.values())
        if total > MAX_CELLS:
            problems.append(f"sweeps: expand to {total} cells in all; at most {MAX_CELLS}")
        for name, emb in self.embeddings.items():
            if emb.dataset not in self.datasets:
                problems.append(f"embeddings.{name}.dataset: {emb.dataset!r} is not in datasets ({sorted(self.datasets)})")
        for name, sweep in self.sweeps.items():
            if sweep.embedding not in self.embeddings:
                problems.append(f"sweeps.{name}.embedding: {sweep.embedding!r} is not in embeddings ({sorted(self.embeddings)})")
        for sweep in self.report.crossfamily_sweeps:
            if sweep not in self.sweeps:
                problems.append(f"report.crossfamily_sweeps: {sweep!r} is not in sweeps ({sorted(self.sweeps)})")
        problems += _report_references(self)
        frontiers = {f.name: f for f in self.report.frontiers}
        for i, claim in enumerate(self.report.claims):
            refs = [(f, r) for f, r in (("ours", claim.ours), ("than", claim.than),
                                        *((f"data_free.{j}", d) for j, d in enumerate(claim.data_free)))
                    if isinstance(r, FrontierRef)]
            for field, ref in refs:
                fr = frontiers.get(ref.frontier)
                if fr is None:
                    problems.append(f"report.claims.{i}.{field}.frontier: {ref.frontier!r} is not in report.frontiers "
                                    f"({sorted(frontiers)})")
                elif ref.stat == "slope" and not fr.fit_loglog:
                    problems.append(f"report.claims.{i}.{field}.stat: 'slope' needs fit_loglog: true on {ref.frontier!r}")
                elif ref.stat == "y_at_mark" and fr.mark_x is None:
                    problems.append(f"report.claims.{i}.{field}.stat: 'y_at_mark' needs mark_x on {ref.frontier!r}")
            if claim.over is not None:
                if not isinstance(claim.ours, MetricRef):
                    problems.append(f"report.claims.{i}.over: needs ours to be a cell metric (sweep, cell, metric), "
                                    "not a frontier")
                elif (options := self.sweeps[claim.ours.sweep].expand().get(claim.ours.cell)
                      if claim.ours.sweep in self.sweeps else None) is not None and claim.over not in options:
                    problems.append(f"report.claims.{i}.over: {claim.over!r} is not an option of cell "
                                    f"{claim.ours.cell!r} of {claim.ours.sweep!r} ({_few(sorted(options))})")
        for i, entry in enumerate(self.report.data_free):
            if entry.sweep not in self.sweeps:
                problems.append(f"report.data_free.{i}.sweep: {entry.sweep!r} is not in sweeps ({sorted(self.sweeps)})")
                continue
            cells = self.sweeps[entry.sweep].expand()
            for field in ("references", "exclude"):
                for sel in getattr(entry, field):
                    if isinstance(sel, str) and sel not in cells:
                        problems.append(f"report.data_free.{i}.{field}: {sel!r} is not a cell of {entry.sweep!r} "
                                        f"({_few(list(cells))})")
        if problems:
            raise ValueError(_PROBLEM_SEP.join(problems))
        return self

    def missing_claim_cells(self) -> dict[int, list[str]]:
        """Claim index → what it names that this params file does not hold (a sweep, or a cell of
        a sweep), one line each (``report.claims.<i>.<field>: …``). Such a claim is reported as
        not evaluated: a grid edit that drops a claim's cell is allowed, and ``validate`` and the
        report warn about it."""
        out: dict[int, list[str]] = {}
        for i, claim in enumerate(self.report.claims):
            for field, ref in claim.metric_refs():
                if ref.sweep not in self.sweeps:
                    why = f"sweep {ref.sweep!r} is not in this params file ({_few(sorted(self.sweeps))})"
                elif ref.cell not in (cells := self.sweeps[ref.sweep].expand()):
                    why = f"cell {ref.cell!r} is not in this grid of {ref.sweep!r} ({_few(list(cells))})"
                else:
                    continue
                out.setdefault(i, []).append(f"report.claims.{i}.{field}: {why}")
        return out

    def family_params(self, sweep: str, cell: str) -> Any:
        """The validated family ``Params`` object of ``cell`` in ``sweep``."""
        s = self.sweeps[sweep]
        return get_family(s.family).Params(**s.expand()[cell])


def _model_at(model: Any, loc: tuple[Any, ...]) -> Any:
    """The pydantic model class that holds the key at ``loc`` (a pydantic error location under
    ``model``), or None where the path leaves the schema (free-form mappings, unions)."""
    import typing

    ann: Any = model
    for part in loc[:-1]:
        if inspect.isclass(ann) and issubclass(ann, BaseModel):
            field = ann.model_fields.get(str(part))
            ann = field.annotation if field is not None else None
        elif typing.get_origin(ann) in (dict, list):
            ann = typing.get_args(ann)[-1]
        else:
            return None
        models = [a for a in (typing.get_args(ann) or (ann,)) if inspect.isclass(a) and issubclass(a, BaseModel)]
        if typing.get_args(ann) and typing.get_origin(ann) not in (dict, list):  # Optional[X] / X | Y
            ann = models[0] if len(models) == 1 else None
    return ann if inspect.isclass(ann) and issubclass(ann, BaseModel) else None


def _message(err: dict[str, Any], model: Any, loc: tuple[Any, ...]) -> str:
    """The reader's message of one pydantic error: what is wrong, the value seen, and for an unknown
    key the closest allowed key."""
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        holder = _model_at(model, loc) if model is not None else None
        allowed = list(holder.model_fields) if holder is not None else []
        return "unknown key (not allowed here)" + did_you_mean(str(loc[-1]), allowed)
    if "ctx" in err and err["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{msg}; got {err.get('input')!r}"
    if err["type"] in ("literal_error", "enum"):
        return f"{msg}; got {err.get('input')!r}"
    return msg


def _format(exc: PydanticError, prefix: str = "", model: Any = None) -> list[str]:
    """One ``<dotted.key>: <message>`` line per problem of ``exc`` (errors of ``model``, under ``prefix``)."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "")
        msg = _message(err, model, tuple(err["loc"]))
        if err["type"] == "value_error":
            for part in msg.split(_PROBLEM_SEP):  # a model validator may list several problems
                field = re.match(r"([A-Za-z_][\w.\-\[\]=]*): ", part)
                if field and not loc:  # a whole-file check names its own location
                    out.append(part)
                elif field and "." not in field.group(1):  # a model validator naming its field: part of the key
                    out.append(f"{loc}.{field.group(1)}: {part[field.end():]}" if loc else part)
                else:
                    out.append(f"{loc}: {part}" if loc else part)
            continue
        out.append(f"{loc}: {msg}" if loc else msg)
    return out


def _cell_origin(sweep: SweepConfig) -> dict[str, int | None]:
    """Cell name → the index of the explicit ``cells`` entry it comes from (None: the grid or the
    single default cell)."""
    origin: dict[str, int | None] = {name: None for name in sweep.expand()}
    for i, extra in enumerate(sweep.cells):
        origin[cell_name(extra)] = i
    return origin


def _where_set(sweep: SweepConfig, origin: int | None, key: str) -> str:
    """Where in a sweep the option ``key`` of a cell is written: ``cells.<i>.<key>``, ``grid.<key>``
    or ``params.<key>`` (also for an option written nowhere: that is where to add it)."""
    if origin is not None and key in sweep.cells[origin]:
        return f"cells.{origin}.{key}"
    if origin is None and key in sweep.grid:
        return f"grid.{key}"
    return f"params.{key}"


def _cell_problems(name: str, sweep: SweepConfig) -> list[str]:
    """The problems of a sweep's cells, each named once at the key where it is written: an option
    shared through ``params`` is one problem, not one per cell. A problem that concerns some cells
    only names them (``cell epsilon=0.0``; ``3 cells: a, b, c``)."""
    family = get_family(sweep.family)
    origin = _cell_origin(sweep)
    found: dict[str, list[str]] = {}
    for cell, options in sweep.expand().items():
        try:
            family.Params(**options)
        except PydanticError as exc:
            for err in exc.errors():
                loc = tuple(err["loc"])
                msg = _message(err, family.Params, loc)
                field = re.match(r"([A-Za-z_]\w*): ", msg) if err["type"] == "value_error" else None
                if field:  # a model validator naming the option
                    loc, msg = (field.group(1),), msg[field.end():]
                where = f"sweeps.{name}" + (f".{_where_set(sweep, origin[cell], str(loc[0]))}" if loc else "")
                where += "".join(f".{p}" for p in loc[1:])
                found.setdefault(f"{where}: {msg}", []).append(cell)
        except ValidationError as exc:
            found.setdefault(f"sweeps.{name}: {exc}", []).append(cell)
    n = len(origin)
    out = []
    for line, cells in found.items():
        if len(cells) == n and n > 1:
            out.append(f"{line} (every cell)")
        elif len(cells) == 1 and n > 1:
            out.append(f"{line} (cell {cells[0]})")
        elif len(cells) > 1:
            out.append(f"{line} ({len(cells)} cells: {', '.join(cells[:3])}{', …' if len(cells) > 3 else ''})")
        else:
            out.append(line)
    return out


def validate_config(raw: Any) -> Config:
    """Validate a parsed ``params.yaml`` mapping; raise :class:`ConfigError` listing every problem."""
    if not isinstance(raw, dict):
        raise ConfigError(f"params: the top level must be a mapping, got {type(raw).__name__}")
    try:
        cfg = Config(**raw)
    except PydanticError as exc:
        raise ConfigError("invalid params:\n  " + "\n  ".join(_format(exc, model=Config))) from None
    except TypeError as exc:
        raise ConfigError(f"invalid params: {exc}") from None
    problems: list[str] = []
    for name, sweep in cfg.sweeps.items():
        problems += _cell_problems(name, sweep)
    for name, ds in cfg.datasets.items():
        if ds.max_records is not None and ds.n_parties > ds.max_records:
            problems.append(
                f"datasets.{name}.n_parties: more parties ({ds.n_parties}) than records (max_records={ds.max_records})"
            )
    if problems:
        shown = problems[:_LIST_AT_MOST] + ([f"… and {len(problems) - _LIST_AT_MOST} more problems"]
                                            if len(problems) > _LIST_AT_MOST else [])
        raise ConfigError("invalid params:\n  " + "\n  ".join(shown))
    return cfg


def load_config(path: str | Path = "params.yaml") -> Config:
    """Read and validate ``params.yaml``; YAML syntax errors become :class:`ConfigError` too.

    Validation builds every cell's family parameters and stage
    code asks for the config once per cell, so the validated config is memoised on the file's
    text; each call returns its own deep copy.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"params: file not found: {p}")
    if p.stat().st_size > strict_yaml.MAX_BYTES:
        raise ConfigError(f"{p}: {p.stat().st_size} bytes is larger than the limit of {strict_yaml.MAX_BYTES} bytes "
                          f"for a params file")
    return _validated(p.read_bytes(), str(p)).model_copy(deep=True)


@functools.lru_cache(maxsize=8)
def _validated(data: bytes, where: str) -> Config:
    """Parse ``data`` strictly (:mod:`veilbench.strict_yaml`: UTF-8, no duplicate keys, no
    aliases, string keys, a size limit) and validate it."""
    try:
        raw = strict_yaml.loads(data, where)
    except strict_yaml.YamlError as exc:
        raise ConfigError(str(exc)) from None
    return validate_config(raw)
