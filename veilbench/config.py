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
problem as ``<dotted.key>: <message>``.
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
    or *inconclusive* on the paired per-seed differences with one-sided 95% t bounds
    (``tasks/verdicts.py``). ``data_free`` lists what releases or attackers that never read the
    data would put in ``ours``' place (cell metrics, frontier curves, numbers): when one of them
    also satisfies the claim, the claim is *trivial*. ``kind: accounting_identity`` marks a claim
    true by construction of a formula (no sampling): *trivial* when it holds. ``paper`` is the
    paper's own statement or number, shown labelled as the paper's; ``why_not`` is shown only
    when the claim is not held."""

    family: str
    claim: str
    source: str = Field(description="where the paper states it (spec section, table)")
    paper: str = Field(description="the paper's number or statement, verbatim from the spec")
    ours: MetricRef | FrontierRef
    op: Literal["<", "<=", ">", ">=", "~"]
    than: float | MetricRef | FrontierRef
    factor: float = Field(1.0, gt=0.0, description="compare with factor · than (e.g. 0.16 for '84% less')")
    tolerance: float = Field(0.0, ge=0.0)
    kind: Literal["measured", "accounting_identity"] = Field(
        "measured", description="accounting_identity: true by construction of a formula, labelled as such")
    data_free: list[float | MetricRef | FrontierRef] = Field(
        default_factory=list, description="values data-free releases/attackers put in ours' place; if one satisfies "
                                          "the claim too, the claim is trivial")
    why_not: str = ""


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
        frontiers = {f.name: f for f in self.report.frontiers}
        for i, claim in enumerate(self.report.claims):
            refs = [("ours", claim.ours)] + [(f, r) for f, r in (("than", claim.than),
                                                                 *((f"data_free.{j}", d) for j, d in enumerate(claim.data_free)))
                                             if isinstance(r, MetricRef | FrontierRef)]
            for field, ref in refs:
                if isinstance(ref, FrontierRef):
                    fr = frontiers.get(ref.frontier)
                    if fr is None:
                        problems.append(f"report.claims.{i}.{field}.frontier: {ref.frontier!r} is not in report.frontiers "
                                        f"({sorted(frontiers)})")
                    elif ref.stat == "slope" and not fr.fit_loglog:
                        problems.append(f"report.claims.{i}.{field}.stat: 'slope' needs fit_loglog: true on {ref.frontier!r}")
                    elif ref.stat == "y_at_mark" and fr.mark_x is None:
                        problems.append(f"report.claims.{i}.{field}.stat: 'y_at_mark' needs mark_x on {ref.frontier!r}")
                elif ref.sweep not in self.sweeps:
                    problems.append(f"report.claims.{i}.{field}.sweep: {ref.sweep!r} is not in sweeps ({sorted(self.sweeps)})")
                elif ref.cell not in self.sweeps[ref.sweep].expand():
                    problems.append(f"report.claims.{i}.{field}.cell: {ref.cell!r} is not a cell of {ref.sweep!r} "
                                    f"({_few(list(self.sweeps[ref.sweep].expand()))})")
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
            raise ValueError("; ".join(problems))
        return self

    def family_params(self, sweep: str, cell: str) -> Any:
        """The validated family ``Params`` object of ``cell`` in ``sweep``."""
        s = self.sweeps[sweep]
        return get_family(s.family).Params(**s.expand()[cell])


def _format(exc: PydanticError, prefix: str = "") -> list[str]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "")
        msg = err["msg"].removeprefix("Value error, ")
        field = re.match(r"([A-Za-z_]\w*): ", msg)
        if err["type"] == "value_error" and field:  # a model validator naming its field: make it part of the key
            loc, msg = f"{loc}.{field.group(1)}" if loc else field.group(1), msg[field.end():]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not allowed here)"
        elif "ctx" in err and err["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
            msg = f"{msg}; got {err.get('input')!r}"
        elif err["type"] in ("literal_error", "enum"):
            msg = f"{msg}; got {err.get('input')!r}"
        out.append(f"{loc}: {msg}")
    return out


def validate_config(raw: Any) -> Config:
    """Validate a parsed ``params.yaml`` mapping; raise :class:`ConfigError` listing every problem."""
    if not isinstance(raw, dict):
        raise ConfigError(f"params: the top level must be a mapping, got {type(raw).__name__}")
    try:
        cfg = Config(**raw)
    except PydanticError as exc:
        raise ConfigError("invalid params:\n  " + "\n  ".join(_format(exc))) from None
    except TypeError as exc:
        raise ConfigError(f"invalid params: {exc}") from None
    problems: list[str] = []
    for name, sweep in cfg.sweeps.items():
        family = get_family(sweep.family)
        for cell, options in sweep.expand().items():
            try:
                family.Params(**options)
            except PydanticError as exc:
                problems += _format(exc, f"sweeps.{name}[{cell}]")
            except ValidationError as exc:
                problems.append(f"sweeps.{name}[{cell}]: {exc}")
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
