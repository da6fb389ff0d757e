"""Comparison tables from MLflow: the evaluate metrics of each (sweep, cell) on two or more *sides*.

A side is a selection of evaluate runs with a label: an MLflow experiment (``-e``), a git revision
(runs tagged ``mlflow.source.git.commit``, ``--rev``) or a params file (runs tagged with the
file's ``params_sha``, or its name ``params_file`` when the file is not at hand, ``--params-file``).
On each side the record of a sweep is its latest finished evaluate parent run and the cell runs
nested under it (:func:`tasks.tracking.latest_cell_runs`), so a cell removed from the sweep does
not linger. Rows are keyed by (sweep, cell): ``mechanism=clean`` of four sweeps is four rows.
Columns are ``<metric> [<side>]`` (means over seeds; per-seed and ``_ci95`` columns only when
asked for by name). With ``headline=True`` (what ``veilbench compare`` shows unless given metrics)
each row holds only its family's headline metrics (:func:`tasks.metrics_summary.headline_metrics`:
the primary utility and the attacker metric), as columns ``utility [<side>]`` and ``attacker
[<side>]`` beside ``utility metric`` / ``attacker metric`` naming them for the row's sweep: one
narrow table whatever the families. A (sweep, cell) present on one side and absent on another is
reported in :attr:`Comparison.missing` and as a warning line at the top of the markdown.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.paths import repo_root
from tasks.tracking import file_sha, latest_cell_runs, tracking_uri, verify_run_metrics
from veilbench.io import atomic_write_text
from veilbench.validation import ValidationError


@dataclass(frozen=True)
class Side:
    """One side of a comparison: runs of ``experiments`` (None: every experiment) matching
    ``filter_string`` (an MLflow search filter, "" for all), shown under ``label``."""

    label: str
    experiments: tuple[str, ...] | None = None
    filter_string: str = ""


def experiment_side(name: str) -> Side:
    """The runs of the MLflow experiment ``name``."""
    return Side(name, (name,))


def revision_side(rev: str, experiments: tuple[str, ...] | None = None, root: Path | None = None) -> Side:
    """Runs whose ``mlflow.source.git.commit`` is the commit ``rev`` names (a ref such as ``HEAD~1``
    or a branch is resolved with ``git rev-parse`` in ``root``; otherwise ``rev`` is taken as a
    commit prefix)."""
    if not rev or "'" in rev:
        raise ValueError(f"rev: must be a git revision (commit, prefix or ref), got {rev!r}")
    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=root or repo_root(),
                             capture_output=True, text=True, timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 else rev
    except (OSError, subprocess.SubprocessError):
        commit = rev
    return Side(rev, experiments, f"tags.`mlflow.source.git.commit` LIKE '{commit}%'")


def params_side(params_file: str | Path, experiments: tuple[str, ...] | None = None) -> Side:
    """Runs that read this params file: by content (``params_sha``) when the file exists, else by
    file name (``params_file``)."""
    path = Path(params_file)
    if "'" in str(params_file):
        raise ValueError(f"params_file: must be a path or file name without quotes, got {params_file!r}")
    if path.is_file():
        return Side(f"{path.name}@{file_sha(path)[:8]}", experiments, f"tags.params_sha = '{file_sha(path)}'")
    return Side(path.name, experiments, f"tags.params_file = '{path.name}'")


@dataclass
class Comparison:
    """``table``: DataFrame indexed by (sweep, cell), columns ``<metric> [<side label>]``;
    ``missing``: side label → the (sweep, cell) keys other sides have and it lacks."""

    table: Any
    missing: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def warnings(self) -> list[str]:
        """One line per side that lacks cells (empty when every side has every cell)."""
        return [f"warning: {len(keys)} cell(s) missing from [{label}]: "
                + ", ".join(f"{s}/{c}" for s, c in keys[:20]) + (" …" if len(keys) > 20 else "")
                for label, keys in self.missing.items() if keys]


def _shown(metric: str, wanted: list[str] | None) -> bool:
    if wanted:
        return metric in wanted
    return not (metric.endswith("_ci95") or ".seed_" in metric)


def _headline_choice(runs_by_side: dict[str, list[Any]]) -> dict[str, tuple[str | None, str | None]]:
    """sweep → its (utility, attacker) headline metrics, from the family tag and the metrics its
    cell runs report on any side."""
    from tasks.metrics_summary import headline_metrics

    family: dict[str, str] = {}
    present: dict[str, set[str]] = {}
    for runs in runs_by_side.values():
        for run in runs:
            sweep = run.data.tags.get("sweep", "")
            family.setdefault(sweep, run.data.tags.get("family", ""))
            present.setdefault(sweep, set()).update(run.data.metrics)
    return {sweep: headline_metrics(family[sweep], present[sweep]) for sweep in family}


def _client_and_ids(sides: list[Side], root: Path | None) -> tuple[Any, str, list[str]]:
    """(MLflow client, tracking URI, every experiment's id); a named experiment that does not exist
    is a :class:`~veilbench.validation.ValidationError` naming it."""
    from tasks.tracking import open_client

    uri = tracking_uri(root or repo_root())
    client = open_client(uri)
    named = sorted({e for s in sides for e in (s.experiments or ())})
    missing_exp = [e for e in named if client.get_experiment_by_name(e) is None]
    if missing_exp:
        raise ValidationError(f"experiment: no MLflow experiment named {missing_exp} in {uri}")
    return client, uri, [e.experiment_id for e in client.search_experiments()]


def _side_runs(client: Any, side: Side, all_ids: list[str]) -> list[Any]:
    """The cell runs of a side's latest finished evaluate runs (:func:`tasks.tracking.latest_cell_runs`)."""
    ids = [client.get_experiment_by_name(e).experiment_id for e in side.experiments] if side.experiments else all_ids
    return latest_cell_runs(client, ids, "evaluate", side.filter_string) if ids else []


def _values(run: Any, label: str, metrics: list[str] | None, chosen: tuple[str | None, str | None] | None
            ) -> list[tuple[str, float | None]]:
    """(column, value) of one cell run on side ``label``: the headline roles' metrics when
    ``chosen`` (utility, attacker) is given, else every shown metric."""
    if chosen is not None:
        shown = {role: name for role, name in zip(("utility", "attacker"), chosen, strict=True) if name}
        return [(f"{role} [{label}]", run.data.metrics.get(name)) for role, name in shown.items()]
    return [(f"{name} [{label}]", v) for name, v in run.data.metrics.items() if _shown(name, metrics)]


def _headline_table(table: Any, labels: list[str], chosen: dict[str, tuple[str | None, str | None]]) -> Any:
    """The headline table: per role the metric's name for the row's sweep, then its value per side."""
    order = [c for role in ("utility", "attacker") for c in [f"{role} metric"] + [f"{role} [{s}]" for s in labels]]
    for i, role in enumerate(("utility", "attacker")):
        table[f"{role} metric"] = [chosen[sweep][i] or "" for sweep in table.index.get_level_values("sweep")]
    return table[[c for c in order if c in table.columns]]


def comparison(sides: list[Side | str], metrics: list[str] | None = None, root: Path | None = None,
               headline: bool = False) -> Comparison:
    """The evaluate metrics of each (sweep, cell) on each side (a string is an experiment name);
    ``headline``: only each family's headline metrics (module docstring; ``metrics`` then unused).

    Raises :class:`~veilbench.validation.ValidationError` naming experiments that do not exist and
    ``ValueError`` when two sides share a label or a run's metrics no longer match the digest logged
    with them (:func:`tasks.tracking.verify_run_metrics`)."""
    import pandas as pd

    sides = [experiment_side(s) if isinstance(s, str) else s for s in sides]
    labels = [s.label for s in sides]
    if len(set(labels)) != len(labels):
        raise ValueError(f"sides: labels must differ, got {labels}")
    client, uri, all_ids = _client_and_ids(sides, root)
    runs_by_side = {side.label: _side_runs(client, side, all_ids) for side in sides}
    keys = {label: {(r.data.tags.get("sweep", ""), r.data.tags["cell"]) for r in runs} for label, runs in runs_by_side.items()}
    chosen = _headline_choice(runs_by_side) if headline else {}
    rows: list[dict[str, Any]] = []
    for label, runs in runs_by_side.items():
        for run in runs:
            verify_run_metrics(run, uri)  # an edited metric is an error naming the run, never a table entry
            sweep = run.data.tags.get("sweep", "")
            rows += [{"sweep": sweep, "cell": run.data.tags["cell"], "column": c, "value": v}
                     for c, v in _values(run, label, metrics, chosen[sweep] if headline else None) if v is not None]
    every = set().union(*keys.values()) if keys else set()
    missing = {label: sorted(every - have) for label, have in keys.items()}
    index = pd.MultiIndex.from_tuples(sorted(every), names=["sweep", "cell"])
    if not rows:
        return Comparison(pd.DataFrame(index=index), missing)
    table = pd.DataFrame(rows).pivot_table(index=["sweep", "cell"], columns="column", values="value", aggfunc="last")
    table = table.reindex(index)
    table.columns.name = None
    if headline:  # the metric names first, then each role's value per side
        return Comparison(_headline_table(table, labels, chosen), missing)
    return Comparison(table.sort_index(axis=1), missing)


def write_comparison(result: Comparison, out_dir: Path | None = None, root: Path | None = None) -> tuple[Path, Path]:
    """Write ``compare.md`` (warning lines first, then the table) and ``compare.csv`` (columns
    sweep, cell, then the metric columns) under ``out_dir`` (default ``reports/compare``)."""
    out_dir = out_dir or (root or repo_root()) / "reports" / "compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, csv_path = out_dir / "compare.md", out_dir / "compare.csv"
    table = result.table
    body = table.reset_index().to_markdown(index=False, floatfmt=".4g") if len(table.columns) else "No evaluate runs found."
    head = "".join(f"> {line}\n" for line in result.warnings())
    atomic_write_text(md_path, head + ("\n" if head else "") + body + "\n")
    atomic_write_text(csv_path, table.to_csv())
    return md_path, csv_path


def compare(sides: list[Side | str], out_dir: Path | None = None, metrics: list[str] | None = None,
            root: Path | None = None, headline: bool = False) -> tuple[Path, Path]:
    """:func:`comparison` of ``sides`` written by :func:`write_comparison`; returns (markdown, CSV)."""
    root = root or repo_root()
    return write_comparison(comparison(sides, metrics, root, headline), out_dir, root)
