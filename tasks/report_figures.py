"""Figure conventions of the report: colour-blind safe colours, legends outside the data, point
labels that never overlap, and saving with the whole of every label inside the image.

* Colours: the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"), distinguishable
  under the common colour-vision deficiencies; curves also differ by marker.
* References are dashed (:data:`REFERENCE_STYLE`); metric-level data-free references are grey
  (:data:`METRIC_REFERENCE_GREYS`).
* Legends sit to the right of the axes (:func:`legend_outside`), never over plotted points.
* Point labels (:func:`place_labels`) are placed greedily: for each label the first of a few
  offsets around its point whose text box (in display pixels, from the Agg renderer) overlaps
  neither an earlier label, nor a plotted marker, nor the axes' edge is kept; a label with no free
  offset is dropped (the point is still in the tables). Labels are short (:func:`short_cell`).
* No series hides another: where the markers of two curves would fall on the same pixels, the later
  curve is shifted sideways by a few pixels (:func:`dodge`); in scatter plots each later series
  has smaller markers, so a point under another shows its rim. :func:`hidden_markers` and
  :func:`overlapping_texts` check a drawn figure (the tests run them on every report figure).
* Titles are readable names (:data:`FAMILY_NAMES`, the axes' labels), not configuration ids.
* A log axis spanning under two decades is labelled at 1, 2, 5 × 10ᵏ in plain numbers
  (:func:`short_log_ticks`), not at every minor tick.
* :func:`save_figure` writes with ``bbox_inches="tight"``, so axis labels are never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Okabe–Ito: blue, vermillion, bluish green, orange, reddish purple, sky blue, yellow, black
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: dashed reference lines (data-free and other references)
REFERENCE_STYLE = {"linestyle": "--", "linewidth": 1.2}
#: colours of the metric-level data-free references (vertical: an x metric's; horizontal: a y
#: metric's), greys outside the palette so that no reference shares a curve's colour
METRIC_REFERENCE_GREYS = {"x": "0.15", "y": "0.5"}


#: family → its name in titles
FAMILY_NAMES = {"scoreshield": "ScoreShield", "gca": "GCA", "dc": "Data collaboration", "anchornoise": "Anchor noise"}

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


def _option_names() -> frozenset[str]:
    """Every option name of every family's ``Params``."""
    from veilbench.families import FAMILY_MODULES, get_family

    return frozenset(name for f in FAMILY_MODULES for name in get_family(f).Params.model_fields)


def cell_options(cell: str) -> dict[str, str]:
    """The ``key=value`` pairs of a cell name (:func:`veilbench.names.cell_name`: sorted keys joined
    by ``_``; keys and values may hold ``_`` too, so each ``value_nextkey`` piece is split where
    the next key is a family option, else at its last ``_``); ``{}`` for a name without ``=``."""
    pieces = cell.split("=")
    if len(pieces) < 2:
        return {}
    known = _option_names()
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

    title = f"{FAMILY_NAMES.get(family, family)}: {head(y_label)} vs {head(x_label)}"
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


_OFFSETS = ((5, 5), (5, -11), (-5, 5), (-5, -11), (8, -3), (-8, -3), (0, 10), (0, -14), (12, 12), (-12, -16))


def place_labels(ax: Any, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str], fontsize: float = 7) -> list[Any]:
    """Annotate points with ``texts`` so that no two labels overlap, none covers a plotted marker
    and each stays inside the axes; returns the annotations kept (see the module docstring)."""
    fig = ax.figure
    fig.canvas.draw()  # final axis limits before measuring
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    kept: list[Any] = []
    boxes: list[Any] = [m["box"] for m in marker_points(ax)]
    for x, y, text in zip(xs, ys, texts, strict=True):
        for dx, dy in _OFFSETS:
            ha = "left" if dx >= 0 else "right"
            ann = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize, ha=ha,
                              va="bottom", annotation_clip=True)
            box = ann.get_window_extent(renderer)
            inside = (box.x0 >= axes_box.x0 and box.x1 <= axes_box.x1 and box.y0 >= axes_box.y0
                      and box.y1 <= axes_box.y1)
            if inside and not any(box.overlaps(b) for b in boxes):
                kept.append(ann)
                boxes.append(box)
                break
            ann.remove()
    return kept


#: cap markers of error bars: part of their curve, not a point of their own
_CAP_MARKERS = {"|", "_", "", " ", "None", "none", None}


def marker_points(ax: Any) -> list[dict[str, Any]]:
    """Every plotted marker of ``ax`` in display pixels: ``{"series", "name", "order", "xy", "size",
    "filled", "box"}`` (``series`` the artist drawing it: a line's markers or a scatter, ``name`` its
    legend label, an error bar's included; ``order``
    its drawing order; ``size`` its width in pixels). Cap markers of error bars are left out."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.transforms import Bbox

    px = ax.figure.dpi / 72.0
    names = {id(c.lines[0]): c.get_label() for c in ax.containers if hasattr(c, "lines") and c.lines}
    artists = sorted((a for a in [*ax.lines, *ax.collections] if a.get_visible()),
                     key=lambda a: a.get_zorder())  # stable: insertion order within a z-order
    out = []
    for order, artist in enumerate(artists):
        if isinstance(artist, Line2D):
            if artist.get_marker() in _CAP_MARKERS:
                continue
            xy = artist.get_transform().transform(np.asarray(artist.get_xydata(), float))
            size = [artist.get_markersize() * px] * len(xy)
            face = artist.get_markerfacecolor()
            filled = artist.get_fillstyle() != "none" and not (isinstance(face, str) and face.lower() == "none")
        elif isinstance(artist, PathCollection) and len(artist.get_offsets()):
            xy = artist.get_offset_transform().transform(np.asarray(artist.get_offsets(), float))
            sizes = artist.get_sizes()
            size = [float(np.sqrt(sizes[i % len(sizes)])) * px for i in range(len(xy))]
            filled = len(artist.get_facecolors()) > 0
        else:
            continue
        for (x, y), w in zip(xy, size, strict=True):
            if np.isfinite(x) and np.isfinite(y):
                out.append({"series": artist, "name": names.get(id(artist), str(artist.get_label())), "order": order,
                            "xy": (float(x), float(y)), "size": w, "filled": filled,
                            "box": Bbox.from_extents(x - w / 2, y - w / 2, x + w / 2, y + w / 2)})
    return out


def hidden_markers(fig: Any) -> list[tuple[str, str, tuple[float, float]]]:
    """Markers a later series covers: ``(lower series, upper series, display xy)`` for each marker
    whose centre lies within half its width of a marker of another series drawn above it that is
    filled and at least 70% its width (a smaller or hollow marker on top leaves the lower one seen)."""
    fig.canvas.draw()
    hidden = []
    for ax in fig.axes:
        points = marker_points(ax)
        for a in points:
            for b in points:
                if b["order"] <= a["order"] or b["series"] is a["series"] or not b["filled"]:
                    continue
                dist = ((a["xy"][0] - b["xy"][0]) ** 2 + (a["xy"][1] - b["xy"][1]) ** 2) ** 0.5
                if dist < a["size"] / 2 and b["size"] >= 0.7 * a["size"]:
                    hidden.append((a["name"], b["name"], a["xy"]))
    return hidden


def overlapping_texts(fig: Any) -> list[tuple[str, str]]:
    """Pairs of text boxes of a drawn figure that overlap: point labels, titles, axis labels, tick
    labels and legends (tick labels are only compared with the others and within their own axis)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    items: list[tuple[str, str, Any]] = []  # (kind, text, box)
    for i, ax in enumerate(fig.axes):
        texts = [(f"label:{t.get_text()}", t) for t in ax.texts] + [(f"title:{ax.get_title()}", ax.title),
                                                                     ("xlabel", ax.xaxis.label), ("ylabel", ax.yaxis.label)]
        items += [("text", name, t.get_window_extent(renderer)) for name, t in texts if t.get_visible() and t.get_text()]
        if (leg := ax.get_legend()) is not None:
            items.append(("text", f"legend {i}", leg.get_window_extent(renderer)))
        for axis in ("x", "y"):
            ticks = getattr(ax, f"get_{axis}ticklabels")()
            items += [(f"tick{i}{axis}", f"tick {t.get_text()}", t.get_window_extent(renderer))
                      for t in ticks if t.get_visible() and t.get_text()]
    pairs = []
    for j, (kind_a, name_a, a) in enumerate(items):
        for kind_b, name_b, b in items[j + 1:]:
            if kind_a != "text" and kind_b != "text" and kind_a != kind_b:
                continue  # tick labels of different axes meet at the corner by design
            if a.width and b.width and a.overlaps(b):
                pairs.append((name_a, name_b))
    return pairs


def dodge(ax: Any, series: Sequence[Sequence[Any]], step: float | None = None) -> list[float]:
    """Shift whole series sideways, in display pixels, so that no marker of one falls within half
    a marker of another's (:func:`hidden_markers` finds none); ``series`` are the artists of each
    series (its marker line first: an errorbar's data line, its bars and caps follow), earlier ones
    staying in place. A series moves by the smallest multiple of ``step`` (default: 0.8 of its
    marker's width) that clears the series placed before it, trying right, then left, up to four
    steps. Returns each series' shift in pixels (0: in place). The data are unchanged: only where
    the markers are drawn, as a grouped bar chart dodges its bars."""
    import numpy as np
    from matplotlib.transforms import Affine2D

    fig = ax.figure
    fig.canvas.draw()  # final limits
    px = fig.dpi / 72.0
    placed: list[tuple[float, float, float]] = []  # (x, y, width) of markers already placed
    shifts = []
    for artists in series:
        line = artists[0]
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        width = max(line.get_markersize(), 1.0) * px
        d = step or 0.8 * width
        shift = 0.0
        for k in (0, 1, -1, 2, -2, 3, -3, 4, -4):
            if all(((x + k * d - px_) ** 2 + (y - py_) ** 2) ** 0.5 >= max(w, width) / 2
                   for x, y in xy for px_, py_, w in placed):
                shift = k * d
                break
        else:
            shift = 4 * d
        if shift:
            for artist in artists:
                artist.set_transform(artist.get_transform() + Affine2D().translate(shift, 0.0))
        placed += [(x + shift, y, width) for x, y in xy]
        shifts.append(shift)
    return shifts


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


def layout(fig: Any) -> dict[str, list[Any]]:
    """Display-pixel boxes of a drawn figure, for checks: ``axes`` (each axes' plotting area),
    ``legends`` (each axes legend, as ``(axes index, box)``), ``labels`` (every annotation's text)
    and ``xlabels`` (each axes' x-axis label, a string)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out: dict[str, list[Any]] = {"axes": [], "legends": [], "labels": [], "xlabels": []}
    for i, ax in enumerate(fig.axes):
        out["axes"].append(ax.get_window_extent(renderer))
        out["xlabels"].append(ax.get_xlabel())
        if (leg := ax.get_legend()) is not None:
            out["legends"].append((i, leg.get_window_extent(renderer)))
        out["labels"] += [t.get_window_extent(renderer) for t in ax.texts if t.get_visible() and t.get_text()]
    return out


def save_figure(fig: Any, path: Path) -> dict[str, list[Any]]:
    """Write a matplotlib figure as PNG atomically (temporary file, then rename), with every label
    inside the image (``bbox_inches="tight"``), and close it; returns its :func:`layout`."""
    import matplotlib.pyplot as plt

    boxes = layout(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    tmp.replace(path)
    return boxes
