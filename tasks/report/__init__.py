"""The ``report`` stage: the report a person reads, built from the evaluated cells.

:func:`report` (``tasks.report.build``) writes ``reports/index.md``, the family pages, tables,
figures and ``index.html``; :data:`report_task` is the same as a Prefect task. One job per module:

=====================  =================================================================================
module                 its job
=====================  =================================================================================
``build``              the stage: index page, family pages, files written, the MLflow run
``rows``               the evaluated cells as rows (one per cell: options, summary, per-seed values)
``families``           what the families supply: their question, title, data-free declarations, sections
``headline``           a family's headline comparison and its best mechanism at each privacy level
``summary``            a family's short answer (question, table, references, verdicts)
``family_page``        a family's detail page (tables per sweep, figures)
``frontier``           a configured frontier: its points, the summary under it, what its figure draws
``pareto``             what a family's Pareto figure draws
``figure_data``        what each figure draws, as data (built from the rows before any drawing)
``draw``               one drawing function per figure type
``style``              colours, markers, short names, legends and log ticks
``layout``             label placement, dodging, overlap checks and saving
``references``         data-free references beside the releases
``verdicts``           statistics: differences with bounds (:mod:`scipy.stats`), verdicts, Holm
``data_free``          cells against the data-free references of their sweep
``split``              the fixed train/test split and its measured spread
``claims``             the values and settings at which each paper claim is judged
``claims_table``       the "paper vs ours" section and ``claims.csv``
``crossfamily``        the cross-family section and what its figure draws
``audits``             the privacy-audit digest
``ledger``             the privacy ledger
``numbers``            numbers shown as what they are (intervals, counts, digits)
``glossary``           one-line definitions of the metrics shown
``tables``             markdown and CSV tables
``html_page``          ``index.html``, one offline file
=====================  =================================================================================
"""

from __future__ import annotations

from typing import Any

__all__ = ["report", "report_artifacts", "report_task"]


def __getattr__(name: str) -> Any:
    """The stage's entry points, imported on first use (the submodules stay importable without
    Prefect and MLflow, which :mod:`tasks.report.build` loads)."""
    if name in __all__:
        from tasks.report import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
