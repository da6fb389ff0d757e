"""Report features on fixtures of cell rows: log-log slopes, marked operating points, the paper vs
ours claims table, multi-option curve names, and the schema checks of these options."""

from __future__ import annotations

import re

import math
from pathlib import Path

import pytest

from tasks.report.claims_table import claims_section
from tasks.report.draw import draw_frontier
from tasks.report.frontier import frontier_figure, frontier_points, frontier_summary, loglog_slope, y_at
from tasks.report.layout import save_figure
from veilbench.config import FrontierConfig, validate_config
from veilbench.validation import ValidationError
from tests.conftest import tiny_params


def _row(cell: str, params: dict, **metrics: float) -> dict:
    return {"sweep": "s", "cell": cell, "family": "f", "dataset": "d", "method": params.get("mechanism", "m"),
            "params": params, "summary": {k: {"mean": v, "ci95": 0.01, "n": 3} for k, v in metrics.items()}}


def test_loglog_slope_recovers_a_power_law_and_rejects_degenerate_input() -> None:
    xs = [50.0, 100.0, 200.0, 400.0]
    slope, se = loglog_slope(xs, [3.0 * x ** -1.5 for x in xs])
    assert slope == pytest.approx(-1.5) and se == pytest.approx(0.0, abs=1e-9)
    noisy = loglog_slope(xs, [x ** 2 * (1.1 if i % 2 else 0.9) for i, x in enumerate(xs)])
    assert noisy is not None and 1.5 < noisy[0] < 2.5 and noisy[1] > 0
    assert loglog_slope([1.0], [1.0]) is None
    assert loglog_slope([1.0, 2.0], [0.0, 1.0]) is None, "log of a non-positive value"


def test_y_at_interpolates_inside_and_refuses_outside() -> None:
    curve = [{"x": 0.0, "y": 1.0}, {"x": 0.2, "y": 0.5}, {"x": 0.4, "y": 0.1}]
    assert y_at(curve, 0.1) == pytest.approx(0.75)
    assert y_at(curve, 0.3) == pytest.approx(0.3)
    assert y_at(curve, 0.5) is None


def test_frontier_summary_and_figure_show_slopes_marks_and_the_paper_value(tmp_path: Path) -> None:
    rows = [_row(f"n={n},{m}", {"n_records": n, "mechanism": m, "adjacency": "record"},
                 risk=(1.0 if m == "noisy" else 0.1) * n ** (2.0 if m == "noisy" else 1.0))
            for n in (50, 100, 200) for m in ("noisy", "newton")]
    fr = FrontierConfig(name="risk", family="f", x="param:n_records", y="risk", group_by=["mechanism", "adjacency"],
                        log_x=True, log_y=True, fit_loglog=True, mark_x=150.0, paper_y=2.0e4, paper_label="a paper")
    pts = frontier_points(rows, fr)
    assert {p["group"] for p in pts} == {"noisy, record", "newton, record"}
    text = re.sub(" +", " ", "\n".join(frontier_summary(pts, fr)))  # table cells are padded
    assert "| noisy, record | 3 | 2.000" in text and "| newton, record | 3 | 1.000" in text
    # at n = 150: noisy interpolates between 100² and 200²; the paper's value is labelled as the paper's
    assert f"{(1e4 + 4e4) / 2:.4g}" in text and "paper: a paper" in text
    png = tmp_path / "risk.png"
    save_figure(draw_frontier(frontier_figure(pts, fr)), png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _claims_cfg(claims: list[dict]) -> object:
    raw = tiny_params()
    raw["report"]["claims"] = claims
    return validate_config(raw)


def _claim(**kw: object) -> dict:
    base = {"family": "scoreshield", "claim": "c", "source": "spec §1", "paper": "paper says 0.9",
            "ours": {"sweep": "ss", "cell": "epsilon=8.0", "metric": "utility_a"}, "op": ">=", "than": 0.5}
    return {**base, **kw}


def test_claims_table_holds_fails_and_reports_missing_runs() -> None:
    cfg = _claims_cfg([
        _claim(claim="holds"),
        _claim(claim="fails", op="<", why_not="because"),
        _claim(claim="vs cell", op=">", than={"sweep": "ss", "cell": "mechanism=clean", "metric": "utility_a"},
               why_not="clean is better"),
        _claim(claim="approx", op="~", than=0.62, tolerance=0.05),
        _claim(claim="missing", ours={"sweep": "ss", "cell": "epsilon=4.0", "metric": "utility_a"}, why_not="n/a"),
    ])
    rows = [{**_row("epsilon=8.0", {"epsilon": 8.0}, utility_a=0.6), "sweep": "ss"},
            {**_row("mechanism=clean", {"mechanism": "clean"}, utility_a=0.9), "sweep": "ss"}]
    lines, records = claims_section(cfg, rows)
    verdict = {r["claim"]: r["verdict"] for r in records}
    # summaries only (no per-seed values): Welch's t on the stored half-widths
    assert verdict == {"holds": "held", "fails": "not held", "vs cell": "not held", "approx": "held",
                       "missing": "not evaluated"}
    why = {r["claim"]: r["why_not"] for r in records}
    assert why["fails"].endswith("because") and why["holds"] == "" and why["vs cell"].endswith("clean is better")
    assert why["missing"].startswith("not run")
    text = "\n".join(lines)
    assert "## Paper vs ours" in text and "paper says 0.9" in text and "not run" in text
    assert math.isclose(next(r for r in records if r["claim"] == "vs cell")["than"], 0.9)


@pytest.mark.parametrize("claim, message", [
    (_claim(over="n_parties"), "report.claims.0.over: 'n_parties' is not an option of cell 'epsilon=8.0'"),
    (_claim(ours={"frontier": "ss-frontier", "curve": "c", "stat": "slope"}, over="epsilon"), "report.claims.0.over"),
    (_claim(kind="finding"), "report.claims.0.kind"),
    (_claim(op="=="), "report.claims.0.op"),
    (_claim(tolerance=-1.0), "report.claims.0.tolerance"),
])
def test_bad_claims_are_rejected_naming_the_field(claim: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace(".", r"\.")):
        _claims_cfg([claim])


def test_paper_value_needs_a_marked_x() -> None:
    raw = tiny_params()
    raw["report"]["frontiers"][0]["paper_y"] = 0.5
    with pytest.raises(ValidationError, match="paper_y"):
        validate_config(raw)


def test_claims_read_frontier_slopes_marks_and_scale_by_a_factor() -> None:
    raw = tiny_params()
    raw["report"]["frontiers"].append({"name": "risk", "family": "scoreshield", "x": "param:n", "y": "risk",
                                       "group_by": "mechanism", "fit_loglog": True, "mark_x": 150.0})
    raw["report"]["claims"] = [
        _claim(claim="noisy cubic", ours={"frontier": "risk", "curve": "noisy", "stat": "slope"}, op="~", than=3.0,
               tolerance=0.1),
        _claim(claim="projection flatter", ours={"frontier": "risk", "curve": "newton", "stat": "slope"}, op="<",
               than={"frontier": "risk", "curve": "noisy", "stat": "slope"}),
        _claim(claim="at the mark", ours={"frontier": "risk", "curve": "newton", "stat": "y_at_mark"}, op="<=",
               than={"frontier": "risk", "curve": "noisy", "stat": "y_at_mark"}, factor=0.01),
        _claim(claim="factor fails", ours={"frontier": "risk", "curve": "newton", "stat": "y_at_mark"}, op="<=",
               than={"frontier": "risk", "curve": "noisy", "stat": "y_at_mark"}, factor=0.0001),
    ]
    cfg = validate_config(raw)
    def risk(n: int, m: str, scale: float) -> float:
        return scale * (n ** 3 if m == "noisy" else n ** 2)

    rows = [{**_row(f"n={n},{m}", {"n": n, "mechanism": m}, risk=risk(n, m, 1.0)), "family": "scoreshield",
             "per_seed": {str(s): {"risk": risk(n, m, scale)} for s, scale in enumerate((0.9, 1.0, 1.1))}}
            for n in (50, 100, 200) for m in ("noisy", "newton")]
    _, records = claims_section(cfg, rows)
    got = {r["claim"]: r for r in records}
    assert got["noisy cubic"]["verdict"] == "held" and got["noisy cubic"]["ours"] == pytest.approx(3.0)
    assert got["projection flatter"]["verdict"] == "held"
    # newton at n=150: (100² + 200²)/2 = 25 000; noisy: (100³ + 200³)/2 = 4.5e6; 0.01 × that = 45 000
    assert got["at the mark"]["ours"] == pytest.approx(25_000) and got["at the mark"]["verdict"] == "held"
    assert got["at the mark"]["test"] == "paired t over 3 seeds"
    assert got["factor fails"]["verdict"] == "not held"


@pytest.mark.parametrize("ref, message", [
    ({"frontier": "nope", "curve": "c", "stat": "slope"}, "report.claims.0.ours.frontier"),
    ({"frontier": "ss-frontier", "curve": "c", "stat": "slope"}, "needs fit_loglog"),
    ({"frontier": "ss-frontier", "curve": "c", "stat": "y_at_mark"}, "needs mark_x"),
])
def test_frontier_references_are_checked(ref: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _claims_cfg([_claim(ours=ref)])


def test_crossfamily_sweeps_must_exist() -> None:
    raw = tiny_params()
    raw["report"]["crossfamily_sweeps"] = ["ss", "missing"]
    with pytest.raises(ValidationError, match="report.crossfamily_sweeps: 'missing'"):
        validate_config(raw)


# --- data-free references in frontier figures and family tables ------------------------------------


def _gca_row(method: str, acc: float, auc: float, dcos: float, control: float, sweep: str = "g") -> dict:
    row = _row(f"method={method}", {"method": method}, utility_accuracy=acc, utility_accuracy_paper=acc,
               utility_accuracy_matched=acc - 0.01, utility_accuracy_flag_all=0.3, utility_roc_auc=auc,
               privacy_delta_cos=dcos, privacy_delta_cos_control_best=control, privacy_delta_cos_advantage=-0.5)
    return {**row, "family": "gca", "sweep": sweep, "method": method}


def _dashed(ax: object) -> list:
    return [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]


def test_gca_frontier_draws_the_best_data_free_attacker_and_the_flag_all_detector() -> None:
    from tasks.report.references import frontier_reference_lines, metric_references

    rows = [_gca_row("gca", 0.84, 0.92, -0.7, -0.2), _gca_row("fedavg", 0.86, 0.93, -0.1, -0.4)]
    fr = FrontierConfig(name="g", family="gca", x="privacy_delta_cos", y="utility_roc_auc", group_by="method")
    lines = frontier_reference_lines(rows, fr, metric_references(None, "gca"))
    by_axis = {ln["axis"]: ln for ln in lines}
    assert by_axis["x"]["value"] == pytest.approx(-0.3), "mean of the cells' best control"
    assert by_axis["x"]["label"] == "best data-free attacker"
    assert by_axis["y"]["value"] == 0.5, "a constant score has ROC AUC 0.5"
    ax = draw_frontier(frontier_figure(frontier_points(rows, fr), fr, lines)).axes[0]
    dashed = {ln.get_label(): ln for ln in _dashed(ax)}
    vertical = [ln for label, ln in dashed.items() if label.startswith("best data-free attacker")]
    horizontal = [ln for label, ln in dashed.items() if label.startswith("flag-all detector")]
    assert len(vertical) == 1 and list(vertical[0].get_xdata()) == pytest.approx([-0.3, -0.3])
    assert len(horizontal) == 1 and list(horizontal[0].get_ydata()) == pytest.approx([0.5, 0.5])


def test_gca_selection_frontier_marks_flag_all_accuracy_on_both_axes() -> None:
    from tasks.report.references import frontier_reference_lines, metric_references

    rows = [_gca_row("gca", 0.84, 0.92, -0.7, -0.2), _gca_row("fedavg", 0.86, 0.93, -0.1, -0.4)]
    fr = FrontierConfig(name="s", family="gca", x="utility_accuracy_matched", y="utility_accuracy_paper",
                        group_by="method")
    lines = frontier_reference_lines(rows, fr, metric_references(None, "gca"))
    assert sorted((ln["axis"], round(ln["value"], 9)) for ln in lines) == [("x", 0.3), ("y", 0.3)]
    ax = draw_frontier(frontier_figure(frontier_points(rows, fr), fr, lines)).axes[0]
    flag_all = [ln for ln in _dashed(ax) if ln.get_label().startswith("flag-all detector")]
    vertical = [ln for ln in flag_all if list(ln.get_xdata()) == pytest.approx([0.3, 0.3])]
    horizontal = [ln for ln in flag_all if list(ln.get_ydata()) == pytest.approx([0.3, 0.3])]
    assert len(flag_all) == 2 and len(vertical) == 1 and len(horizontal) == 1


def test_a_data_free_cell_run_at_each_epsilon_is_one_dashed_curve() -> None:
    eps = [1.0, 4.0, 16.0, 64.0]
    rows = [_row(f"epsilon={e}_mechanism={m}", {"mechanism": m, "epsilon": e}, auc=v)
            for e in eps for m, v in (("gaussian", 0.5 + e / 200), ("identity_noise", 0.5 + e / 1000))]
    rows += [_row("mechanism=clean", {"mechanism": "clean", "epsilon": 1.0}, auc=0.88),  # a default ε, not swept
             _row("mechanism=identity", {"mechanism": "identity"}, auc=0.5)]
    rows = [{**r, "family": "scoreshield"} for r in rows]
    fr = FrontierConfig(name="v", family="scoreshield", x="param:epsilon", y="auc", group_by="mechanism",
                        reference_groups=["clean", "identity", "identity_noise"])
    pts = frontier_points(rows, fr)
    assert all(p["reference"] and p["data_free"] for p in pts if p["group"] == "identity_noise")
    assert next(p for p in pts if p["group"] == "clean")["x"] is None, "one reference cell: a flat line"
    ax = draw_frontier(frontier_figure(pts, fr)).axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert [lb for lb in labels if lb.startswith("identity_noise")] == ["identity_noise (data-free)"]
    curve = next(ln for ln in _dashed(ax) if ln.get_label() == "identity_noise (data-free)")
    assert list(curve.get_xdata()) == eps and list(curve.get_ydata()) == pytest.approx([0.5 + e / 1000 for e in eps])
    assert "clean (reference)" in labels and "identity (data-free)" in labels
    release = next(c for c in ax.containers if c.get_label() == "gaussian")
    assert release.lines[0].get_linestyle() == "-", "the release stays a solid curve with error bars"


def test_a_companion_reference_varying_with_the_x_option_is_a_curve_a_constant_one_a_line() -> None:
    from tasks.report.references import frontier_reference_lines
    from veilbench.families.base import DataFreeMetric

    ns = [50.0, 100.0, 200.0]
    rows = [{**_row(f"n={n}", {"n_records": n, "mechanism": "newton"}, risk=n, ref_risk=2 * n, flat=1.0),
             "family": "scoreshield"} for n in ns]
    fr = FrontierConfig(name="r", family="scoreshield", x="param:n_records", y="risk", group_by="mechanism")
    (line,) = frontier_reference_lines(rows, fr, {"risk": DataFreeMetric("ref_risk", "identity")})
    assert line["xs"] == ns and line["ys"] == [100.0, 200.0, 400.0]
    (flat,) = frontier_reference_lines(rows, fr, {"risk": DataFreeMetric("flat", "constant")})
    assert "xs" not in flat and flat["value"] == 1.0


def test_gca_family_table_shows_the_control_column_and_names_the_data_free_references() -> None:
    from tasks.report.family_page import sweep_tables

    raw = tiny_params()
    raw["sweeps"]["g"] = {"family": "gca", "embedding": "digits-pca", "seeds": [0],
                          "grid": {"method": ["gca", "fedavg"]}}
    raw["report"]["columns"] = {"gca": ["utility_accuracy", "utility_roc_auc", "privacy_delta_cos"]}
    cfg = validate_config(raw)
    rows = [_gca_row("gca", 0.84, 0.92, -0.7, -0.2), _gca_row("fedavg", 0.86, 0.93, -0.1, -0.4)]
    for r in rows:
        r["summary"]["privacy_delta_cos_trivial_zeros"] = {"mean": -0.79, "ci95": 0.01, "n": 3}
    lines, shown = sweep_tables(cfg, "gca", rows)
    text = "\n".join(lines)
    header = next(ln for ln in lines if ln.startswith("| cell"))
    cols = [c.strip() for c in header.split("|")[1:-1]]
    assert cols.index("privacy_delta_cos_control_best") == cols.index("privacy_delta_cos") + 1
    assert "privacy_delta_cos_control_best" in shown
    assert "`utility_roc_auc`: flag-all detector, 0.5" in text
    assert "`utility_accuracy`: flag-all detector, column `utility_accuracy_flag_all`" in text
    assert "data-free attackers on `privacy_delta_cos` (mean over the cells): zeros -0.79" in text


def test_data_free_cells_are_marked_in_the_family_table() -> None:
    from tasks.report.family_page import sweep_tables

    cfg = validate_config(tiny_params())
    rows = [{**_row(c, p, utility_verification_accuracy=v), "family": "scoreshield", "sweep": "ss"}
            for c, p, v in (("epsilon=4.0", {"mechanism": "gaussian", "epsilon": 4.0}, 0.7),
                            ("mechanism=identity", {"mechanism": "identity"}, 0.5))]
    text = "\n".join(sweep_tables(cfg, "scoreshield", rows)[0])
    assert "mechanism=identity (data-free)" in text and "epsilon=4.0 (data-free)" not in text


def test_data_free_cells_against_an_attack_metric_are_one_dashed_curve_unless_listed_as_reference_lines() -> None:
    rows = [{**_row(f"obfuscation={o}_d_tilde={d}", {"obfuscation": o, "d_tilde": d}, adv=a, acc=u),
             "family": "dc"}
            for o, pts in (("pca", ((4, 0.5, 0.6), (16, 0.8, 0.9))), ("random", ((4, 0.01, 0.1), (16, -0.02, 0.11))))
            for d, a, u in pts]
    fr = FrontierConfig(name="a", family="dc", x="adv", y="acc", group_by="obfuscation")
    ax = draw_frontier(frontier_figure(frontier_points(rows, fr), fr)).axes[0]
    (curve,) = [ln for ln in _dashed(ax) if ln.get_label() == "random (data-free)"]
    assert list(curve.get_xdata()) == [-0.02, 0.01] and list(curve.get_ydata()) == [0.11, 0.1]
    listed = FrontierConfig(name="b", family="dc", x="adv", y="acc", group_by="obfuscation", reference_groups=["random"])
    pts = frontier_points(rows, listed)
    assert [p["x"] for p in pts if p["group"] == "random"] == [None, None], "a listed reference is a line"
