"""Where the report's figures put things, and the checks that nothing hides: point labels that never
overlap, series dodged sideways where their markers would coincide, and saving with every label inside.

* Point labels (:func:`place_labels`) are placed greedily: for each label the first of a few
  offsets around its point whose text box (in display pixels, from the Agg renderer) overlaps
  neither an earlier label, nor a plotted marker, nor the axes' edge is kept; a label with no free
  offset is dropped (the point is still in the tables).
* No series hides another: where the markers of two curves would fall on the same pixels, the later
  curve is shifted sideways by a few pixels (:func:`dodge`); in scatter plots each later series
  has smaller markers, so a point under another shows its rim. :func:`hidden_markers` and
  :func:`overlapping_texts` check a drawn figure (the tests run them on every report figure).
* :func:`save_figure` writes with ``bbox_inches="tight"``, so axis labels are never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
