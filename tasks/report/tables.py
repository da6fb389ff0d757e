"""The report's tables: GitHub pipe tables written by :mod:`tabulate`, CSV files, and the table of a
family's cells (one row per cell, the options that vary between cells, every metric).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tabulate import tabulate

from tasks.report.numbers import fmt_stats
from tasks.report.references import is_data_free_cell
from veilbench.io import atomic_write_text


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured pipe table of ``rows`` (cells already formatted as strings, kept as they
    are: tabulate's number parsing is off), ending with a newline.

    >>> print(markdown_table(["a", "b"], [["1.50", "x"]]), end="")
    | a    | b   |
    |------|-----|
    | 1.50 | x   |
    """
    return tabulate(rows, headers=header, tablefmt="github", disable_numparse=True) + "\n"


def pipe_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A pipe table as lines, cells unpadded: ``| a | b |``, ``|---|---|``, then one line per row."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def write_csv(records: list[dict[str, Any]], path: Path) -> None:
    """Write ``records`` as a CSV file atomically (columns in order of first appearance)."""
    import pandas as pd

    atomic_write_text(path, pd.DataFrame(records).to_csv(index=False))


def varying_options(rows: list[dict[str, Any]]) -> list[str]:
    """The scalar cell options that vary between ``rows`` (sorted): only they identify a row;
    constant ones would be noise."""
    scalar = {p for r in rows for p, v in r["params"].items() if not isinstance(v, dict | list)}
    return sorted(p for p in scalar if len({repr(r["params"].get(p)) for r in rows}) > 1)


def family_table(rows: list[dict[str, Any]], only: list[str] | None = None
                 ) -> tuple[list[str], list[list[str]], list[dict[str, Any]]]:
    """(header, markdown cells, CSV records) of one family's cells; ``only`` keeps those metrics.
    In the markdown, a data-free reference cell (its family's ``DATA_FREE``) is marked ``(data-free)``;
    the CSV holds each metric's mean and its 95% t half-width ``<metric>_ci95``."""
    metric_names = sorted({m for r in rows for m in r["summary"]})
    if only:
        metric_names = [m for m in only if m in metric_names]
    param_names = varying_options(rows)
    header = ["sweep", "cell", "dataset", *param_names, *metric_names]
    md, csv = [], []
    for r in rows:
        name = f"{r['cell']} (data-free)" if is_data_free_cell(str(r.get("family", "")), r["params"]) else r["cell"]
        md.append([r["sweep"], name, r["dataset"], *[str(r["params"].get(p, "")) for p in param_names],
                   *[fmt_stats(m, r["summary"].get(m)) for m in metric_names]])
        rec: dict[str, Any] = {"sweep": r["sweep"], "cell": r["cell"], "dataset": r["dataset"],
                               **{p: r["params"].get(p) for p in param_names}}
        for m in (m for m in metric_names if m in r["summary"]):
            rec[m] = r["summary"][m]["mean"]
            rec[f"{m}_ci95"] = r["summary"][m]["ci95"]
        csv.append(rec)
    return header, md, csv
