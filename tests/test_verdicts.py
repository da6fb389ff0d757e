"""Verdicts (tasks/report/verdicts.py, tasks/report/data_free.py): paired per-seed bounds checked against scipy, the four verdicts on
synthetic per-seed rows, "a claim its data-free reference satisfies is never held", and the
per-sweep check of cells against their data-free references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tasks.report.claims_table import claims_section
from tasks.report.data_free import beats_data_free, data_free_section
from tasks.report.verdicts import Estimate, claim_p_value, difference, judge, judge_claim
from tests.conftest import tiny_params
from veilbench.config import DataFreeConfig, validate_config
from veilbench.validation import ValidationError


def _seeds(*values: float) -> Estimate:
    return Estimate.of_seeds(dict(enumerate(values)))


A = [0.71, 0.80, 0.77]
B = [0.60, 0.72, 0.70]


def test_paired_bounds_and_p_value_match_scipy_ttest_rel() -> None:
    d = difference(_seeds(*A), _seeds(*B))
    res = stats.ttest_rel(A, B, alternative="greater")
    assert d.test == "paired t over 3 seeds" and d.n == 3
    assert d.statistic == pytest.approx(res.statistic)
    assert claim_p_value(d, ">") == pytest.approx(res.pvalue)
    assert d.lower == pytest.approx(res.confidence_interval(0.95).low)
    less = stats.ttest_rel(A, B, alternative="less")
    assert d.upper == pytest.approx(less.confidence_interval(0.95).high)
    assert claim_p_value(d, "<") == pytest.approx(less.pvalue)


def test_unpaired_bounds_match_scipy_welch() -> None:
    a = Estimate.of_seeds({"0": 0.71, "1": 0.80, "2": 0.77})
    b = Estimate.of_seeds({"10": 0.60, "11": 0.72, "12": 0.70, "13": 0.66})  # no seed in common
    d = difference(a, b)
    res = stats.ttest_ind([0.71, 0.80, 0.77], [0.60, 0.72, 0.70, 0.66], equal_var=False, alternative="greater")
    assert d.test.startswith("Welch") and d.n == 0
    assert claim_p_value(d, ">") == pytest.approx(res.pvalue)
    assert d.lower == pytest.approx(res.confidence_interval(0.95).low)


def test_pairing_uses_the_shared_seeds() -> None:
    """Seed-to-seed spread shared by both cells cancels when paired: held paired, undecided unpaired."""
    base = [0.5, 0.7, 0.9]
    a = _seeds(*(x + 0.02 + e for x, e in zip(base, (0.001, -0.001, 0.0), strict=True)))
    b = _seeds(*base)
    assert judge(difference(a, b), ">") == "held"
    unpaired = difference(Estimate.of_seeds({f"x{i}": v for i, v in a.per_seed.items()}), b)
    assert unpaired.test.startswith("Welch") and judge(unpaired, ">") == "inconclusive"


def test_factor_scales_than() -> None:
    d = difference(_seeds(1.0, 1.1, 0.9), _seeds(10.0, 10.5, 9.5), factor=0.1)
    assert d.mean == pytest.approx(0.0, abs=1e-12)
    assert judge(difference(_seeds(1.0, 1.1, 0.9), _seeds(10.0, 10.5, 9.5), factor=0.05), ">") == "held"


@pytest.mark.parametrize("ours, than, op, tol, expected", [
    # clearly above / below on every seed
    (A, B, ">", 0.0, "held"),
    (A, B, ">=", 0.0, "held"),
    (A, B, "<", 0.0, "not held"),
    (A, B, "<=", 0.0, "not held"),
    (B, A, "<", 0.0, "held"),
    (B, A, ">", 0.0, "not held"),
    # overlapping per-seed differences of both signs: undecided either way
    ([0.78, 0.74, 0.82], [0.80, 0.70, 0.81], ">", 0.0, "inconclusive"),
    ([0.78, 0.74, 0.82], [0.80, 0.70, 0.81], "<", 0.0, "inconclusive"),
    # equivalence within a tolerance (TOST)
    ([0.700, 0.705, 0.695], [0.70, 0.70, 0.70], "~", 0.05, "held"),
    ([0.90, 0.91, 0.89], [0.70, 0.70, 0.70], "~", 0.05, "not held"),
    ([0.60, 0.80, 0.70], [0.70, 0.70, 0.70], "~", 0.05, "inconclusive"),
    # identical differences on every seed: exact, and ">" vs ">=" differ on a tie
    ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], ">=", 0.0, "held"),
    ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], ">", 0.0, "not held"),
])
def test_verdict_of_synthetic_per_seed_rows(ours: list, than: list, op: str, tol: float, expected: str) -> None:
    assert judge_claim(_seeds(*ours), _seeds(*than), op, tolerance=tol).verdict == expected


def test_a_constant_threshold_is_a_one_sample_test() -> None:
    d = difference(_seeds(1.77, 1.80), Estimate.of_constant(2.0))
    assert d.test == "one-sample t over 2 seeds"
    res = stats.ttest_1samp([1.77, 1.80], 2.0, alternative="less")
    assert claim_p_value(d, "<=") == pytest.approx(res.pvalue)
    assert judge(d, "<=") == "held"


def test_the_level_decides() -> None:
    """p between 0.01 and 0.05: held at α = 0.05, inconclusive at α = 0.01."""
    ours, than = _seeds(0.80, 0.74, 0.79), _seeds(0.70, 0.71, 0.72)
    p = claim_p_value(difference(ours, than), ">")
    assert 0.01 < p < 0.05
    assert judge_claim(ours, than, ">").verdict == "held"
    assert judge_claim(ours, than, ">", alpha=0.01).verdict == "inconclusive"


def test_one_seed_or_no_spread_is_inconclusive() -> None:
    assert judge_claim(_seeds(0.9), _seeds(0.1), ">").verdict == "inconclusive"
    assert judge_claim(Estimate(0.9), Estimate(0.1), ">").verdict == "inconclusive"



def test_a_claim_whose_cell_has_no_result_is_not_evaluated() -> None:
    v = judge_claim(None, _seeds(0.1, 0.2), ">")
    assert v.verdict == "not evaluated" and v.reason.startswith("not run") and not v.is_finding


def test_data_free_reference_that_satisfies_the_claim_makes_it_trivial() -> None:
    ours, than = _seeds(2.31, 2.28, 2.35), _seeds(1.43, 1.30, 1.55)
    assert judge_claim(ours, than, ">").verdict == "held"
    zero_attacker = _seeds(2.33, 2.30, 2.36)
    v = judge_claim(ours, than, ">", data_free=[zero_attacker])
    assert v.verdict == "trivial" and v.data_free_verdict == "held" and v.data_free_index == 0
    # a data-free reference that fails the claim leaves it held
    weak = _seeds(1.0, 0.9, 1.1)
    assert judge_claim(ours, than, ">", data_free=[weak]).verdict == "held"
    # any one satisfying reference is enough; the decisive one is reported
    v = judge_claim(ours, than, ">", data_free=[weak, zero_attacker])
    assert v.verdict == "trivial" and v.data_free_index == 1
    # undecided or missing data-free reference: cannot call it held
    undecided = _seeds(1.6, 1.2, 1.5)
    assert judge_claim(ours, than, ">", data_free=[undecided]).verdict == "inconclusive"
    v = judge_claim(ours, than, ">", data_free=[None])
    assert v.verdict == "inconclusive" and v.data_free_verdict == "not run"
    # a claim that does not hold is not rescued or changed by its data-free reference
    assert judge_claim(than, ours, ">", data_free=[zero_attacker]).verdict == "not held"


def test_slope_claim_is_trivial_when_the_data_free_slope_satisfies_it() -> None:
    newton = _seeds(1.77, 1.78)
    identity_noise = _seeds(1.78, 1.79)
    assert judge_claim(newton, Estimate.of_constant(2.0), "<=", data_free=[identity_noise]).verdict == "trivial"


def test_no_claim_is_held_while_its_data_free_reference_satisfies_it() -> None:
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(300):
        n = int(rng.integers(2, 6))
        shift = rng.normal(0, 0.3, size=3)
        ours, than, free = (_seeds(*(rng.normal(m, 0.1, size=n))) for m in shift)
        op = str(rng.choice([">", ">=", "<", "<=", "~"]))
        v = judge_claim(ours, than, op, tolerance=0.2, data_free=[free])
        seen.add(v.verdict)
        if v.verdict == "held":
            assert judge(difference(free, than), op, 0.2) == "not held"
        if judge(difference(ours, than), op, 0.2) == "held" and judge(difference(free, than), op, 0.2) == "held":
            assert v.verdict == "trivial"
    assert seen == {"held", "not held", "inconclusive", "trivial"}


def test_accounting_identity_is_trivial_or_not_held_never_held() -> None:
    gca, fedavg = _seeds(0.0049, 0.0049, 0.0049), _seeds(2.08, 2.08, 2.08)
    v = judge_claim(gca, fedavg, "<=", factor=0.1586, kind="accounting_identity")
    assert v.verdict == "trivial" and "accounting identity" in v.reason
    assert judge_claim(fedavg, gca, "<=", factor=0.1586, kind="accounting_identity").verdict == "not held"
    with pytest.raises(ValueError, match="kind"):
        judge_claim(gca, fedavg, "<=", kind="identity")


@pytest.mark.parametrize("kw, message", [({"op": "=="}, "op"), ({"tolerance": -1.0}, "tolerance")])
def test_bad_arguments_name_the_field(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        judge(difference(_seeds(1, 2), _seeds(0, 1)), **{"op": ">", **kw})


def test_bad_alpha_is_rejected() -> None:
    with pytest.raises(ValueError, match="alpha"):
        difference(_seeds(1, 2), _seeds(0, 1), alpha=0.7)


# --- cells against data-free references ---------------------------------------------------------

def _cell(cell: str, params: dict, **metrics: list[float]) -> dict:
    per_seed = {str(s): {m: v[s] for m, v in metrics.items()} for s in range(len(next(iter(metrics.values()))))}
    summary = {m: {"mean": float(np.mean(v)), "ci95": 0.0, "n": len(v)} for m, v in metrics.items()}
    return {"sweep": "sv", "cell": cell, "family": "scoreshield", "dataset": "d", "method": params.get("mechanism", ""),
            "params": params, "summary": summary, "per_seed": per_seed}


ROWS = [
    _cell("identity", {"mechanism": "identity"}, acc=[0.90, 0.89, 0.91], mse=[0.07, 0.08, 0.07]),
    _cell("zeros", {"mechanism": "zeros"}, acc=[0.50, 0.52, 0.48], mse=[0.30, 0.31, 0.29]),
    _cell("clean", {"mechanism": "clean"}, acc=[0.99, 0.99, 0.99], mse=[0.0, 0.0, 0.0]),
    _cell("eps=1", {"mechanism": "gaussian", "epsilon": 1.0}, acc=[0.52, 0.53, 0.51], mse=[1.9, 2.0, 2.1]),
    _cell("eps=64", {"mechanism": "gaussian", "epsilon": 64.0}, acc=[0.95, 0.96, 0.94], mse=[0.02, 0.03, 0.02]),
    _cell("eps=16", {"mechanism": "gaussian", "epsilon": 16.0}, acc=[0.93, 0.86, 0.91],
          mse=[0.05, 0.06, 0.05], companion=[0.01, 0.01, 0.01]),
]


def test_cells_are_judged_against_the_best_data_free_reference() -> None:
    got = beats_data_free(ROWS, "sv", [{"mechanism": "identity"}, "zeros"], {"acc": "higher", "mse": "lower"},
                          exclude=[{"mechanism": "clean"}])
    out = {(j["cell"], j["metric"]): j for j in got}
    assert {c for c, _ in out} == {"eps=1", "eps=64", "eps=16"}, "references and excluded cells are not judged"
    # the best reference is the identity (0.90 accuracy, not the zeros' 0.50; lowest error)
    assert all(j["reference"] == "identity" for j in got)
    assert out[("eps=1", "acc")]["outcome"] == "loses" and out[("eps=64", "acc")]["outcome"] == "beats"
    assert out[("eps=16", "acc")]["outcome"] == "indistinguishable"
    # lower is better: 0.02 < 0.07 beats, 2.0 loses (a flipped direction would swap these)
    assert out[("eps=64", "mse")]["outcome"] == "beats" and out[("eps=1", "mse")]["outcome"] == "loses"
    assert out[("eps=64", "mse")]["advantage"] == pytest.approx(0.07333 - 0.02333, abs=1e-4)


def test_a_companion_metric_in_the_same_cell_is_a_reference() -> None:
    got = beats_data_free(ROWS, "sv", [{"mechanism": "identity"}], {"mse": "lower"}, exclude=["clean"],
                          companions={"mse": "companion"})
    out = {j["cell"]: j for j in got}
    assert out["eps=16"]["reference"] == "companion (same cell)" and out["eps=16"]["outcome"] == "loses"
    assert out["eps=64"]["reference"] == "identity"  # no companion value in that cell


def test_a_constant_companion_is_a_data_free_reference() -> None:
    """ROC AUC 0.5 (the detector that flags everything) as a constant: a cell at chance level loses
    or ties, one above it beats; the constant wins over a worse reference cell."""
    rows = [
        _cell("flag", {"mechanism": "zeros"}, auc=[0.40, 0.41, 0.39]),
        _cell("chance", {"mechanism": "gaussian"}, auc=[0.48, 0.47, 0.49]),
        _cell("good", {"mechanism": "newton"}, auc=[0.91, 0.93, 0.92]),
    ]
    got = {j["cell"]: j for j in beats_data_free(rows, "sv", ["flag"], {"auc": "higher"}, companions={"auc": 0.5})}
    assert got["chance"]["outcome"] == "loses" and got["good"]["outcome"] == "beats"
    assert got["good"]["reference"].startswith("constant 0.5") and got["good"]["reference_value"] == 0.5
    assert got["good"]["advantage"] == pytest.approx(0.42)
    entry = DataFreeConfig(sweep="sv", companions={"auc": 0.5}, metrics={"auc": "higher"})
    assert entry.companions == {"auc": 0.5}


def test_match_compares_a_cell_only_with_references_sharing_the_options() -> None:
    rows = [
        _cell("free n=50", {"mechanism": "identity_noise", "n": 50}, mse=[0.30, 0.31, 0.29]),
        _cell("free n=400", {"mechanism": "identity_noise", "n": 400}, mse=[0.05, 0.06, 0.05]),
        _cell("newton n=50", {"mechanism": "newton", "n": 50}, mse=[0.20, 0.21, 0.19]),
        _cell("newton n=400", {"mechanism": "newton", "n": 400}, mse=[0.10, 0.11, 0.10]),
    ]
    rows = [{**r, "sweep": "sv"} for r in rows]
    free = [{"mechanism": "identity_noise"}]
    out = {j["cell"]: j for j in beats_data_free(rows, "sv", free, {"mse": "lower"}, match=["n"])}
    assert out["newton n=50"]["reference"] == "free n=50" and out["newton n=50"]["outcome"] == "beats"
    assert out["newton n=400"]["reference"] == "free n=400" and out["newton n=400"]["outcome"] == "loses"
    unmatched = {j["cell"]: j for j in beats_data_free(rows, "sv", free, {"mse": "lower"})}
    assert unmatched["newton n=50"]["reference"] == "free n=400" and unmatched["newton n=50"]["outcome"] == "loses"


def test_data_free_section_says_when_no_reference_has_run() -> None:
    entry = DataFreeConfig(sweep="sv", references=[{"mechanism": "random"}], metrics={"acc": "higher"})
    text = "\n".join(data_free_section("scoreshield", ROWS, [entry], {"sv": "scoreshield"}))
    assert "no evaluated cells" in text and "beats its data-free reference" not in text


def test_data_free_section_lists_the_cells_that_do_not_beat_them() -> None:
    entry = DataFreeConfig(sweep="sv", references=[{"mechanism": "identity"}], exclude=[{"mechanism": "clean"}],
                           metrics={"acc": "higher"})
    text = "\n".join(data_free_section("scoreshield", ROWS, [entry], {"sv": "scoreshield"}))
    assert "Cells that do not beat the data-free references" in text
    assert "| sv | eps=1 |" in text and "loses" in text and "| sv | eps=16 |" in text
    assert "| sv | eps=64 |" not in text and "| sv | zeros |" in text and "1 of 4" in text
    other = "\n".join(data_free_section("gca", ROWS, [entry], {"sv": "scoreshield"}))
    assert "No data-free reference is declared for gca" in other


# --- configuration and the claims table ----------------------------------------------------------

def _claim(**kw: object) -> dict:
    base = {"family": "scoreshield", "claim": "c", "source": "spec §1", "paper": "paper says so",
            "ours": {"sweep": "ss", "cell": "epsilon=8.0", "metric": "utility_a"}, "op": ">",
            "than": {"sweep": "ss", "cell": "epsilon=4.0", "metric": "utility_a"}}
    return {**base, **kw}


def _row(cell: str, values: list[float], sweep: str = "ss") -> dict:
    return {"sweep": sweep, "cell": cell, "family": "scoreshield", "dataset": "d", "method": "m", "params": {},
            "summary": {"utility_a": {"mean": float(np.mean(values)), "ci95": 0.0, "n": len(values)}},
            "per_seed": {str(s): {"utility_a": v} for s, v in enumerate(values)}}


def test_claims_table_carries_verdict_data_free_value_and_the_test() -> None:
    raw = tiny_params()
    identity = {"sweep": "ss-identity", "cell": "default", "metric": "utility_a"}
    raw["report"]["claims"] = [
        _claim(claim="plain"),
        _claim(claim="trivial", data_free=[identity]),
        _claim(claim="beats data-free", data_free=[0.1]),
        _claim(claim="identity", kind="accounting_identity", op="<=", factor=0.5),
    ]
    cfg = validate_config(raw)
    rows = [_row("epsilon=8.0", [0.80, 0.85, 0.82]), _row("epsilon=4.0", [0.60, 0.66, 0.61]),
            _row("default", [0.90, 0.91, 0.90], sweep="ss-identity")]
    lines, records = claims_section(cfg, rows)
    got = {r["claim"]: r for r in records}
    assert {r["verdict"] for r in records} <= {"held", "not held", "inconclusive", "trivial"}
    assert got["plain"]["verdict"] == "held" and got["plain"]["test"] == "paired t over 3 seeds"
    assert got["plain"]["p_value"] == pytest.approx(
        stats.ttest_rel([0.80, 0.85, 0.82], [0.60, 0.66, 0.61], alternative="greater").pvalue)
    assert got["trivial"]["verdict"] == "trivial" and got["trivial"]["data_free_value"] == pytest.approx(0.9033, abs=1e-4)
    assert got["beats data-free"]["verdict"] == "held" and got["beats data-free"]["data_free_value"] == 0.1
    assert got["identity"]["kind"] == "accounting identity" and got["identity"]["verdict"] == "not held"
    text = "\n".join(lines)
    assert "trivial" in text and "data-free" in text and "one-sided 95%" in text
    assert math.isnan(got["plain"]["data_free_value"] or math.nan)


@pytest.mark.parametrize("change, message", [
    ({"report": {"claims": [_claim(premise={"sweep": "ss", "cell": "epsilon=8.0", "metric": "utility_a"})]}},
     r"report\.claims\.0\.premise\.metric: a premise is an attacker advantage"),
    ({"report": {"claims": [_claim(kind="identity")]}}, r"report\.claims\.0\.kind"),
    ({"report": {"data_free": [{"sweep": "nope", "references": ["x"], "metrics": {"m": "higher"}}]}},
     r"report\.data_free\.0\.sweep"),
    ({"report": {"data_free": [{"sweep": "ss", "references": ["nope"], "metrics": {"m": "higher"}}]}},
     r"report\.data_free\.0\.references"),
    ({"report": {"data_free": [{"sweep": "ss", "references": [{"mechanism": "clean"}], "metrics": {"m": "up"}}]}},
     r"report\.data_free\.0\.metrics\.m"),
    ({"report": {"data_free": [{"sweep": "ss", "metrics": {"m": "higher"}}]}}, "at least one data-free cell"),
    ({"report": {"data_free": [{"sweep": "ss", "companions": {"other": "x"}, "metrics": {"m": "higher"}}]}},
     r"companions\.other"),
])
def test_bad_data_free_config_is_rejected_naming_the_field(change: dict, message: str) -> None:
    raw = tiny_params()
    raw["report"].update(change["report"])
    with pytest.raises(ValidationError, match=message):
        validate_config(raw)


def test_split_note_states_the_fixed_split_and_shows_the_measured_spread() -> None:
    from tasks.report.split import split_spread_lines

    bare = "\n".join(split_spread_lines(None, 3))
    assert "seed: 3" in bare and "not been measured" in bare
    spread = {"cells": [{"sweep": "dc-parties", "cell": "nki", "metric": "utility_accuracy",
                         "per_split": {"0": 0.78, "1": 0.79, "2": 0.80}, "split_sd": 0.0123,
                         "split_range": [0.78, 0.80], "seed_mean": 0.78, "seed_ci95": 0.03, "split_component_sd": 0.0071}]}
    text = "\n".join(split_spread_lines(spread, 0))
    assert "3 split seeds" in text and "| dc-parties/nki | utility_accuracy | 0.78 ± 0.03 | 0.012 | 0.0071 | 0.78 – 0.8 |" in text
    assert "not been measured" not in text
