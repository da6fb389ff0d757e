"""The train/test split is fixed: what the report says about it, and its measured spread.

The sweep seeds re-draw each mechanism's noise, not the split, so every interval and verdict is
conditional on one split. ``benchmarks/bench_split_spread.py`` measures, for representative cells,
the seed mean on several split seeds (``reports/bench/split_spread.json``); :func:`split_spreads`
reads the between-split standard deviation of each cell mean from it (which widens a claim's
bounds, :meth:`tasks.report.verdicts.Estimate.with_split`) and :func:`split_spread_lines` shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tasks.report.tables import pipe_table


def split_spreads(spread: Mapping[str, Any] | None) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(sweep, cell, metric) → (between-split SD of the cell mean, its degrees of freedom = splits − 1)
    from ``benchmarks/bench_split_spread.py``'s JSON."""
    out = {}
    for c in (spread or {}).get("cells", []):
        if "split_component_sd" in c and len(c.get("per_split", {})) >= 2:
            out[(c["sweep"], c["cell"], c["metric"])] = (float(c["split_component_sd"]), len(c["per_split"]) - 1.0)
    return out


def split_spread_lines(spread: Mapping[str, Any] | None, split_seed: int) -> list[str]:
    """Markdown stating that the CIs are conditional on one train/test split, with the measured
    split-to-split spread of representative cells (``benchmarks/bench_split_spread.py``'s JSON:
    per cell and metric the seed mean ± 95% CI on the configured split and the standard deviation
    of the seed mean across splits) when available."""
    lines = ["### The train/test split is fixed", "",
             "The sweep seeds re-draw each mechanism's noise (and, for DC and anchor noise, the records dealt to the "
             f"parties), not the train/test split: `prepare` draws it once from `seed: {split_seed}` of `params.yaml`. "
             "Every 95% CI and every verdict above is therefore conditional on that one split.", ""]
    cells = list((spread or {}).get("cells", []))
    if not cells:
        return lines + ["The split-to-split spread has not been measured here: run "
                        "`python benchmarks/bench_split_spread.py` (writes `bench/split_spread.json`).", ""]
    k = len(cells[0]["per_split"])
    lines += [f"Measured on {k} split seeds with everything else as configured (`bench/split_spread.json`); where "
              "the spread across splits is comparable with the CI over seeds, a difference of that size can come "
              "from the split alone. *Of which the split alone*: the between-split standard deviation once each "
              "split's own seed noise is removed (one-way random-effects estimate, max(0, SD² − s²_within/n)):", ""]
    header = ["cell", "metric", f"mean ± 95% CI over seeds (split {split_seed})", f"SD of the mean across {k} splits",
              "of which the split alone", "range across splits"]
    md = [[f"{c['sweep']}/{c['cell']}", c["metric"], f"{c['seed_mean']:.4g} ± {c['seed_ci95']:.2g}", f"{c['split_sd']:.2g}",
           f"{c['split_component_sd']:.2g}" if "split_component_sd" in c else "—",
           f"{c['split_range'][0]:.4g} – {c['split_range'][1]:.4g}"] for c in cells]
    return [*lines, *pipe_table(header, md), ""]
