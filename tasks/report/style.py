"""How the report's figures look: colour-blind safe colours, distinct markers, dashed references,
legends outside the data, short point labels, readable titles and log ticks.

* Colours: the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"), distinguishable
  under the common colour-vision deficiencies; curves also differ by marker.
* References are dashed (:data:`REFERENCE_STYLE`); metric-level data-free references are grey
  (:data:`METRIC_REFERENCE_GREYS`).
* Legends sit to the right of the axes (:func:`legend_outside`), never over plotted points.
* Point labels are short (:func:`short_cell`); where they go: :mod:`tasks.report.layout`.
* Titles are readable names (each family's ``TITLE``, :mod:`tasks.report.families`; the axes'
  labels), not configuration ids.
* A log axis spanning under two decades is labelled at 1, 2, 5 × 10ᵏ in plain numbers
  (:func:`short_log_ticks`), not at every minor tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.report.families import all_option_names
from tasks.report.families import title as family_title

#: Okabe–Ito: blue, vermillion, bluish green, orange, reddish purple, sky blue, yellow, black
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: dashed reference lines (data-free and other references)
REFERENCE_STYLE = {"linestyle": "--", "linewidth": 1.2}
#: colours of the metric-level data-free references (vertical: an x metric's; horizontal: a y
#: metric's), greys outside the palette so that no reference shares a curve's colour
METRIC_REFERENCE_GREYS = {"x": "0.15", "y": "0.5"}

#: cell option → its symbol in point labels
OPTION_SYMBOLS = {"epsilon": "ε", "sigma": "σ", "d_tilde": "d̃", "n_parties": "K", "n_anchor": "n_a", "n_clusters": "K"}
#: options whose value alone names a curve (``mechanism=aap`` → ``aap``)
NAME_OPTIONS = ("mechanism", "method", "obfuscation", "variant", "protocol", "weighting")


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


#: greys for references beyond the palette (never a curve's colour)
_REFERENCE_GREYS = ("0.3", "0.55", "0.75")


def reference_colour(j: int) -> str:
    """The colour of the ``j``-th series of a figure when it is a reference line: the palette's
    ``j``-th colour while the palette lasts, then greys (a reference never takes a curve's colour)."""
    return PALETTE[j] if j < len(PALETTE) else _REFERENCE_GREYS[(j - len(PALETTE)) % len(_REFERENCE_GREYS)]


def cell_options(cell: str) -> dict[str, str]:
    """The ``key=value`` pairs of a cell name (:func:`veilbench.names.cell_name`: sorted keys joined
    by ``_``; keys and values may hold ``_`` too, so each ``value_nextkey`` piece is split where
    the next key is a family option, else at its last ``_``); ``{}`` for a name without ``=``."""
    pieces = cell.split("=")
    if len(pieces) < 2:
        return {}
    known = all_option_names()
    keys, values = [pieces[0]], []
    for piece in pieces[1:-1]:
        cuts = [i for i, ch in enumerate(piece) if ch == "_"]
        good = [i for i in cuts if piece[i + 1:] in known] or cuts[-1:]
        if not good:
            return {}
        cut = good[0]
        values.append(piece[:cut])
        keys.append(piece[cut + 1:])
    values.append(pieces[-1])
    return dict(zip(keys, values, strict=True))


def short_cell(cell: str, drop: Sequence[str] = ()) -> str:
    """A cell name for a point label: the names of :data:`NAME_OPTIONS` first, then the other options
    as ``symbol=value`` (:data:`OPTION_SYMBOLS`), leaving out ``drop``:
    ``d_tilde=16_obfuscation=orthogonal`` → ``orthogonal d̃=16``."""
    options = cell_options(cell)
    if not options:
        return cell
    names = [v for k, v in options.items() if k in NAME_OPTIONS and k not in drop]
    rest = [f"{OPTION_SYMBOLS.get(k, k)}={v}" for k, v in options.items() if k not in NAME_OPTIONS and k not in drop]
    return " ".join(names + rest)


def readable_title(family: str, y_label: str, x_label: str) -> str:
    """``<family name>: <y> vs <x>``, each label up to its first parenthesis or semicolon, wrapped
    at 64 characters (a title no wider than its axes)."""
    def head(label: str) -> str:
        return label.split(" (")[0].split(";")[0].strip()

    import textwrap

    title = f"{family_title(family)}: {head(y_label)} vs {head(x_label)}"
    return "\n".join(textwrap.wrap(title, 64))


def marker(i: int) -> str:
    return MARKERS[i % len(MARKERS)]


def legend_outside(ax: Any, **kw: Any) -> Any:
    """Put ``ax``'s legend to the right of the axes (outside the plotted area); None without entries."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                     fontsize=kw.pop("fontsize", 8), frameon=False, **kw)


def short_log_ticks(axis: Any, decades: float = 2.0) -> None:
    """On a log ``axis`` (``ax.xaxis``) spanning fewer than ``decades`` decades, label ticks at 1, 2
    and 5 × 10ᵏ as plain numbers (``2``, ``5``, ``10``, ``20``) and leave the minor ticks unlabelled:
    matplotlib's default there labels every minor tick as ``2×10⁰``, ``3×10⁰``, …, which overlap."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    if lo <= 0 or math.log10(hi / lo) >= decades:
        return
    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


