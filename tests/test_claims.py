"""Claims that say something: the premise of attack comparisons (vacuous when both attacks lose to
their control), Holm's adjustment per family, theorem checks apart from findings, claims judged
at every value of a sweep option, the split spread in their uncertainty, and claims whose cell a
grid edit removed (not evaluated, never a refused edit)."""

from __future__ import annotations

import copy
import math
import random
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from tasks.report.claims import ClaimNotEvaluated
from tasks.report.claims_table import claims_section
from tasks.report.summary import verdicts_line
from tasks.report.verdicts import Estimate, combine_settings, difference, holm, judge_claim
from tests.conftest import tiny_params
from veilbench.config import ConfigError, validate_config

REPO = Path(__file__).resolve().parents[1]
ADV = "privacy_x_advantage"


def _row(cell: str, sweep: str = "ss", family: str = "scoreshield", params: dict | None = None,
         **metrics: list[float]) -> dict:
    """A cell row as ``load_cell_metrics`` returns it, from per-seed values."""
    summary = {}
    for m, v in metrics.items():
        n = len(v)
        half = float(stats.t.ppf(0.975, n - 1) * stats.sem(v)) if n > 1 else 0.0
        summary[m] = {"mean": float(np.mean(v)), "ci95": half, "n": n}
    return {"sweep": sweep, "cell": cell, "family": family, "dataset": "d", "method": (params or {}).get("mechanism", "m"),
            "params": params or {}, "summary": summary,
            "per_seed": {str(s): {m: v[s] for m, v in metrics.items()} for s in range(len(next(iter(metrics.values()))))}}


def _ref(cell: str, metric: str = ADV, sweep: str = "ss") -> dict:
    return {"sweep": sweep, "cell": cell, "metric": metric}


def _claim(**kw: object) -> dict:
    base = {"family": "scoreshield", "claim": "c", "source": "spec §1", "paper": "the paper says so",
            "ours": _ref("epsilon=8.0"), "op": "<", "than": _ref("epsilon=4.0")}
    return {**base, **kw}


def _section(claims: list[dict], rows: list[dict], raw: dict | None = None, spread: dict | None = None
             ) -> tuple[str, dict[str, list[dict]]]:
    raw = copy.deepcopy(raw or tiny_params())
    raw["report"]["claims"] = claims
    lines, records = claims_section(validate_config(raw), rows, spread)
    by: dict[str, list[dict]] = {}
    for r in records:
        by.setdefault(r["claim"], []).append(r)
    return "\n".join(lines), by


# --- the premise of an attack comparison ------------------------------------------------------------

GCA_LIKE = [-0.95, -0.90, -0.87]      # an attack far below its control
FEDAVG_LIKE = [-0.22, -0.10, -0.02]    # an attack below its control on every seed
LEAKS = [0.20, 0.26, 0.31]             # an attack that beats its control


def test_two_attacks_below_their_control_make_a_vacuous_claim_never_held() -> None:
    """'Against GCA the attack gains less than against FedAvg' with both advantages negative is the
    comparison the paired test alone calls held: with the premise it is vacuous, and it is judged
    (held) once the attack on the reference beats its control."""
    assert judge_claim(Estimate.of_seeds(dict(enumerate(GCA_LIKE))), Estimate.of_seeds(dict(enumerate(FEDAVG_LIKE))),
                       "<").verdict == "held", "without a premise the paired test holds it"
    _, got = _section([_claim(claim="both below")],
                      [_row("epsilon=8.0", **{ADV: GCA_LIKE}), _row("epsilon=4.0", **{ADV: FEDAVG_LIKE})])
    (rec,) = got["both below"]
    assert rec["verdict"] == "vacuous" and rec["claim_verdict"] == "vacuous"
    assert "learns nothing on this data" in rec["why_not"] and rec["premise_ref"] == "[ss/epsilon=4.0: privacy_x_advantage]"
    assert rec["premise_lower"] <= 0 and rec["p_holm"] is None, "a vacuous claim is no finding"
    _, got = _section([_claim(claim="reference leaks")],
                      [_row("epsilon=8.0", **{ADV: GCA_LIKE}), _row("epsilon=4.0", **{ADV: LEAKS})])
    assert got["reference leaks"][0]["verdict"] == "held" and got["reference leaks"][0]["premise_lower"] > 0


def test_no_held_row_compares_two_attacks_below_their_control() -> None:
    """The before-stop check on claims.csv: over random advantage pairs and directions, a held row
    never has both advantages ≤ 0."""
    raw = tiny_params()
    raw["sweeps"]["pairs"] = {"family": "scoreshield", "embedding": "digits-pca", "seeds": [0, 1, 2],
                              "params": {"mechanism": "gaussian", "epsilon": 1.0, "audit_releases": 400},
                              "cells": [{"n_queries": 10 + i} for i in range(80)]}
    rng = np.random.default_rng(3)
    rows, claims = [], []
    for k in range(40):
        a, b = (f"n_queries={10 + 2 * k + j}" for j in (0, 1))
        rows += [_row(a, sweep="pairs", **{ADV: list(rng.normal(rng.uniform(-1, 0.5), 0.05, 3))}),
                 _row(b, sweep="pairs", **{ADV: list(rng.normal(rng.uniform(-1, 0.5), 0.05, 3))})]
        claims.append(_claim(claim=f"c{k}", ours=_ref(a, sweep="pairs"), than=_ref(b, sweep="pairs"),
                             op=str(rng.choice(["<", ">"]))))
    _, got = _section(claims, rows, raw)
    assert {"held", "vacuous"} <= {recs[0]["verdict"] for recs in got.values()}
    for (rec,) in got.values():
        if rec["verdict"] == "held":
            assert not (rec["ours"] <= 0 and rec["than"] <= 0), rec


def test_the_premise_is_the_side_the_claim_says_leaks_more() -> None:
    """'ours > than': the attack on ours must beat its control (than may be below its own)."""
    rows = [_row("epsilon=8.0", **{ADV: LEAKS}), _row("epsilon=4.0", **{ADV: FEDAVG_LIKE})]
    _, got = _section([_claim(claim="ours leaks more", op=">")], rows)
    assert got["ours leaks more"][0]["verdict"] == "held"
    assert got["ours leaks more"][0]["premise_ref"] == "[ss/epsilon=8.0: privacy_x_advantage]"
    rows = [_row("epsilon=8.0", **{ADV: FEDAVG_LIKE}), _row("epsilon=4.0", **{ADV: GCA_LIKE})]
    _, got = _section([_claim(claim="failures", op=">")], rows)
    assert got["failures"][0]["verdict"] == "vacuous"


def test_a_configured_premise_guards_a_raw_metric_comparison() -> None:
    """Raw NTMSE-like metrics get no automatic premise; a configured one makes the claim vacuous
    while the named advantage does not beat its control."""
    raw_rows = lambda adv: [_row("epsilon=8.0", privacy_ntmse=[2.3, 2.4, 2.5], **{ADV: [0.0] * 3}),  # noqa: E731
                            _row("epsilon=4.0", privacy_ntmse=[1.3, 1.4, 1.5], **{ADV: adv})]
    claim = _claim(claim="raw", op=">", ours=_ref("epsilon=8.0", "privacy_ntmse"), than=_ref("epsilon=4.0", "privacy_ntmse"))
    _, got = _section([claim], raw_rows(FEDAVG_LIKE))
    assert got["raw"][0]["verdict"] == "held" and got["raw"][0]["premise_ref"] == ""
    guarded = {**claim, "premise": _ref("epsilon=4.0")}
    _, got = _section([guarded], raw_rows(FEDAVG_LIKE))
    assert got["raw"][0]["verdict"] == "vacuous"
    _, got = _section([guarded], raw_rows(LEAKS))
    assert got["raw"][0]["verdict"] == "held"


def test_a_premise_that_has_not_run_leaves_the_claim_not_evaluated() -> None:
    rows = [_row("epsilon=8.0", **{ADV: GCA_LIKE}), _row("epsilon=4.0", other_advantage=LEAKS)]
    _, got = _section([_claim(claim="c", than=_ref("epsilon=4.0", "other_advantage"),
                              premise=_ref("epsilon=4.0"))], rows)
    assert got["c"][0]["verdict"] == "not evaluated" and "premise has not run" in got["c"][0]["why_not"]


def test_the_family_summary_says_the_attack_learns_nothing() -> None:
    records = [{"claim_id": 0, "family": "gca", "claim": "gains less", "kind": "measured", "verdict": "vacuous",
                "claim_verdict": "vacuous", "where": ""}]
    assert "vacuous (the attack learns nothing on this data)**: gains less" in verdicts_line("gca", records)


# --- multiplicity, theorem checks, refutations ----------------------------------------------------------

def test_holm_matches_the_step_down_procedure() -> None:
    """Holm's procedure: sort, reject while p_(i) ≤ α/(m − i + 1), stop at the first failure. The
    adjusted p-values reject exactly that set at every α, are ≥ the raw ones and keep NaN out."""
    rng = random.Random(5)
    for _ in range(200):
        p = [rng.choice([rng.random() * 0.05, rng.random()]) for _ in range(rng.randint(1, 9))]
        adj = holm(p)
        assert all(a >= x for a, x in zip(adj, p, strict=True)) and all(a <= 1 for a in adj)
        for alpha in (0.01, 0.05, 0.1):
            rejected, m = set(), len(p)
            for rank, i in enumerate(sorted(range(m), key=lambda i: p[i])):
                if p[i] > alpha / (m - rank):
                    break
                rejected.add(i)
            assert {i for i, a in enumerate(adj) if a <= alpha} == rejected
    out = holm([0.01, math.nan, 0.04])
    assert math.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.04)


# two claims each held on its own at α = 0.05 (p ≈ 0.02–0.03), not both after Holm over the pair
MODEST = {"hi": [0.80, 0.74, 0.79], "lo": [0.70, 0.71, 0.72]}


def _modest_rows() -> list[dict]:
    return [_row("epsilon=8.0", utility_a=MODEST["hi"]), _row("epsilon=4.0", utility_a=MODEST["lo"]),
            _row("mechanism=clean", utility_a=[0.60, 0.64, 0.61])]


def _utility_claim(name: str, **kw: object) -> dict:
    return _claim(**{"claim": name, "op": ">", "ours": _ref("epsilon=8.0", "utility_a"),
                     "than": _ref("epsilon=4.0", "utility_a"), **kw})


def test_a_claim_held_alone_is_inconclusive_after_holm_across_its_family() -> None:
    p = stats.ttest_rel(MODEST["hi"], MODEST["lo"], alternative="greater").pvalue
    assert 0.025 < p < 0.05
    _, got = _section([_utility_claim("first"), _utility_claim("second")], _modest_rows())
    for name in ("first", "second"):
        (rec,) = got[name]
        assert rec["p_value"] == pytest.approx(p) and rec["p_holm"] == pytest.approx(2 * p) and rec["holm_tests"] == 2
        assert rec["verdict"] == "inconclusive" and "Holm" in rec["why_not"]
    # another family is another multiplicity family: alone in its own, each is held
    _, got = _section([_utility_claim("first"), _utility_claim("second", family="dc")], _modest_rows())
    assert got["first"][0]["verdict"] == got["second"][0]["verdict"] == "held"


def test_theorem_checks_are_judged_but_not_counted_as_findings() -> None:
    _, got = _section([_utility_claim("finding"), _utility_claim("check", kind="theorem_check")], _modest_rows())
    assert got["finding"][0]["verdict"] == "held" and got["finding"][0]["holm_tests"] == 1
    check = got["check"][0]
    assert check["kind"] == "theorem check" and check["verdict"] == "held" and check["p_holm"] is None
    line = verdicts_line("scoreshield", [*got["finding"], *got["check"]])
    assert line.index("**held**: finding") < line.index("Not findings") < line.index("**held, theorem check**: check")


def test_a_shortfall_whose_bounds_exclude_the_claimed_bound_is_not_held() -> None:
    """'GCA ≥ 0.9908 × FedAvg' with GCA below that on every seed: not held, not inconclusive, and
    the multiplicity adjustment does not soften a refutation."""
    rows = [_row("epsilon=8.0", utility_a=[0.80, 0.83, 0.81]), _row("epsilon=4.0", utility_a=[0.86, 0.87, 0.85])]
    claims = [_utility_claim("comparable", op=">=", factor=0.9908), _utility_claim("other")]
    _, got = _section(claims, rows)
    rec = got["comparable"][0]
    assert rec["diff_upper"] < 0 and rec["verdict"] == "not held" and "wrong side" in rec["why_not"]


# --- settings -------------------------------------------------------------------------------------------

def _two_mechanisms() -> dict:
    raw = tiny_params()
    raw["sweeps"]["ss"]["grid"] = {"epsilon": [2.0, 4.0, 8.0], "mechanism": ["gaussian", "noisy"]}
    return raw


def test_a_claim_over_a_sweep_option_is_judged_at_every_value_and_says_where_it_holds() -> None:
    rows = [_row("epsilon=2.0_mechanism=noisy", utility_a=[0.60, 0.70, 0.65]),
            _row("epsilon=2.0_mechanism=gaussian", utility_a=[0.62, 0.66, 0.67]),
            _row("epsilon=4.0_mechanism=noisy", utility_a=[0.81, 0.86, 0.84]),
            _row("epsilon=4.0_mechanism=gaussian", utility_a=[0.70, 0.75, 0.72]),
            _row("epsilon=8.0_mechanism=noisy", utility_a=[0.90, 0.95, 0.93]),
            _row("epsilon=8.0_mechanism=gaussian", utility_a=[0.70, 0.76, 0.72]),
            _row("mechanism=clean", utility_a=[0.10, 0.12, 0.11])]
    claim = _claim(claim="newton beats gaussian", op=">", over="epsilon",
                   ours=_ref("epsilon=8.0_mechanism=noisy", "utility_a"),
                   than=_ref("epsilon=8.0_mechanism=gaussian", "utility_a"),
                   data_free=[_ref("mechanism=clean", "utility_a")])
    text, got = _section([claim], rows, _two_mechanisms())
    recs = got["newton beats gaussian"]
    assert [r["setting"] for r in recs] == ["epsilon=2.0", "epsilon=4.0", "epsilon=8.0"]
    assert [r["ours_ref"] for r in recs] == [f"[ss/epsilon={e}_mechanism=noisy: utility_a]" for e in ("2.0", "4.0", "8.0")]
    assert {r["data_free_ref"] for r in recs if r["verdict"] == "held"} == {"[ss/mechanism=clean: utility_a]"}
    assert [r["verdict"] for r in recs] == ["inconclusive", "held", "held"]
    assert {r["claim_verdict"] for r in recs} == {"partly held"}
    assert recs[0]["where"] == "inconclusive at epsilon=2.0; held at epsilon=4.0, epsilon=8.0"
    assert all(r["holm_tests"] == 3 for r in recs), "each setting is one test of the family"
    assert "partly held: inconclusive at epsilon=2.0" in text and "| newton beats gaussian | epsilon=4.0 |" in text
    # without `over`, the same claim is one test at the named cell
    _, got = _section([{**claim, "over": None}], rows, _two_mechanisms())
    assert [r["setting"] for r in got["newton beats gaussian"]] == [""]


def test_combined_verdicts_name_every_setting() -> None:
    assert combine_settings([("k=2", "held")]) == ("held", "")
    assert combine_settings([("k=2", "held"), ("k=4", "held")]) == ("held", "at every setting (k=2, k=4)")
    assert combine_settings([("k=2", "inconclusive"), ("k=4", "not held")])[0] == "not held"
    assert combine_settings([("k=2", "trivial"), ("k=4", "held")]) == ("partly held", "trivial at k=2; held at k=4")


def test_the_split_spread_widens_the_claims_it_covers() -> None:
    """A measured between-split SD of the ours cell enters d's variance (Welch–Satterthwaite): a claim
    held on three seeds of one split is inconclusive once a split spread larger than its margin
    is added; a spread measured on another metric changes nothing."""
    hi, lo = [0.80, 0.81, 0.82], [0.70, 0.70, 0.71]
    rows = [_row("epsilon=8.0", utility_a=hi), _row("epsilon=4.0", utility_a=lo)]
    spread = lambda metric, sd: {"cells": [{"sweep": "ss", "cell": "epsilon=8.0", "metric": metric,  # noqa: E731
                                             "per_split": {str(k): 0.8 for k in range(8)}, "split_component_sd": sd,
                                             "split_sd": sd, "split_range": [0.8, 0.8], "seed_mean": 0.81,
                                             "seed_ci95": 0.02}]}
    _, alone = _section([_utility_claim("c")], rows)
    assert alone["c"][0]["verdict"] == "held" and "split" not in alone["c"][0]["test"]
    _, other = _section([_utility_claim("c")], rows, spread=spread("utility_b", 0.2))
    assert other["c"][0]["diff_lower"] == pytest.approx(alone["c"][0]["diff_lower"])
    _, wide = _section([_utility_claim("c")], rows, spread=spread("utility_a", 0.2))
    rec = wide["c"][0]
    assert rec["verdict"] == "inconclusive" and "split spread (8 splits)" in rec["test"]
    d = np.array(hi) - np.array(lo)
    se2, v = stats.sem(d) ** 2, 0.2 ** 2
    df = (se2 + v) ** 2 / (se2 ** 2 / 2 + v ** 2 / 7)
    assert rec["diff_lower"] == pytest.approx(d.mean() - stats.t.ppf(0.95, df) * math.sqrt(se2 + v))


def test_split_spread_is_a_variance_term_of_either_side() -> None:
    a = Estimate.of_seeds({0: 1.0, 1: 1.2, 2: 1.1}).with_split(0.3, 7)
    b = Estimate.of_seeds({0: 0.5, 1: 0.6, 2: 0.4}).with_split(0.1, 5)
    d = difference(a, b, factor=2.0)
    seed = difference(Estimate.of_seeds(a.per_seed), Estimate.of_seeds(b.per_seed), factor=2.0)
    assert d.se == pytest.approx(math.sqrt(seed.se ** 2 + 0.3 ** 2 + (2 * 0.1) ** 2))
    with pytest.raises(ValueError, match="split_sd"):
        a.with_split(-1.0, 7)


# --- claims and grid edits --------------------------------------------------------------------------------

def _shipped_with_eps16() -> dict:
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    grid = raw["sweeps"]["scoreshield-gram"]["grid"]
    grid["epsilon"] = [16.0 if e == 32.0 else e for e in grid["epsilon"]]
    return raw


def test_editing_a_claimed_cell_out_of_the_grid_validates_and_the_claim_is_not_evaluated() -> None:
    raw = _shipped_with_eps16()
    cfg = validate_config(raw)  # the edit is accepted
    gone = [i for i, c in enumerate(cfg.report.claims) if c.ours.__dict__.get("cell") == "epsilon=32.0_mechanism=newton"]
    assert gone and set(cfg.missing_claim_cells()) == set(gone)
    for problems in cfg.missing_claim_cells().values():
        assert all(p.startswith("report.claims.") and "'epsilon=32.0_mechanism=newton' is not in this grid" in p
                   for p in problems)
    rows = [_row(c, sweep="scoreshield-gram", params={"mechanism": c.rsplit("=", 1)[1]},
                 utility_clustering_nmi=[0.5, 0.55, 0.52]) for c in ("epsilon=16.0_mechanism=newton", "mechanism=clean")]
    with pytest.warns(ClaimNotEvaluated, match="epsilon=32.0_mechanism=newton"):
        lines, records = claims_section(cfg, rows)
    for i in gone:
        (rec,) = [r for r in records if r["claim_id"] == i]
        assert rec["verdict"] == "not evaluated" and rec["why_not"].startswith("not evaluated (cell not in this grid)")
    assert "not evaluated" in "\n".join(lines)
    others = [r for r in records if r["claim_id"] not in gone]
    assert others and not any(r["why_not"].startswith("not evaluated (cell not in this grid)") for r in others)
    assert all(r["why_not"].startswith("not run") for r in others if r["verdict"] == "not evaluated"), \
        "a claim of the grid whose cells have no rows here is not run, not out of the grid"


def test_validate_accepts_the_edit_and_warns_once_per_gone_cell(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(_shipped_with_eps16(), sort_keys=False, allow_unicode=True))
    result = CliRunner().invoke(app, ["validate", "--params", str(path)])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.output.splitlines() if line.startswith("warning: report.claims.")]
    assert warned and all("'epsilon=32.0_mechanism=newton' is not in this grid" in w for w in warned)
    assert len(warned) == len(set(warned)) == sum(len(p) for p in validate_config(
        _shipped_with_eps16()).missing_claim_cells().values())


def test_a_removed_sweep_is_a_warning_too_and_locations_never_start_empty() -> None:
    raw = tiny_params()
    raw["report"]["claims"] = [_claim(ours=_ref("x", sweep="gone"))]
    cfg = validate_config(raw)
    assert cfg.missing_claim_cells() == {0: ["report.claims.0.ours: sweep 'gone' is not in this params file "
                                             "(['ss', 'ss-identity'])"]}
    bad = tiny_params()
    bad["embeddings"]["digits-pca"]["dataset"] = "nope"
    with pytest.raises(ConfigError) as err:
        validate_config(bad)
    problems = str(err.value).splitlines()[1:]
    assert problems and all(not p.strip().startswith(":") for p in problems)
    assert problems[0].strip().startswith("embeddings.digits-pca.dataset: 'nope'")


@pytest.mark.slow  # builds the whole report (figures, HTML, the MLflow report run) from synthetic cells
def test_the_report_runs_after_the_edit_and_marks_the_claim_not_evaluated(tmp_path: Path, migrated_mlflow_db: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from tasks.report import report
    from veilbench.io import write_sealed_json

    raw = _shipped_with_eps16()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    shutil.copy(migrated_mlflow_db, tmp_path / "mlflow.db")
    monkeypatch.setenv("VEILBENCH_ROOT", str(tmp_path))
    cfg = validate_config(raw)
    for cell, options in cfg.sweeps["scoreshield-gram"].expand().items():
        vals = {"utility_clustering_nmi": [0.5, 0.55, 0.52], "utility_verification_accuracy": [0.9, 0.91, 0.9],
                "xfam_linkage_advantage": [0.1, 0.2, 0.15]}
        rec = {"dataset": "digits", "method": options["mechanism"], "params": {"family_params": options},
               "summary": _row(cell, **vals)["summary"], "per_seed": _row(cell, **vals)["per_seed"]}
        write_sealed_json(tmp_path / "reports" / "sweeps" / "scoreshield-gram" / "cells" / f"{cell}.json", rec)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = report(root=tmp_path)
    assert any(issubclass(w.category, ClaimNotEvaluated) for w in seen)
    text = out.read_text()
    row = next(line for line in text.splitlines() if "As ε grows the projected Gram approaches the clean one" in line
               and line.startswith("| scoreshield"))
    assert "| not evaluated | not evaluated (cell not in this grid)" in re.sub(" +", " ", row)
