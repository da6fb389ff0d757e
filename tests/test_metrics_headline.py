"""The headline keys of each sweep's DVC metrics file (``summary.json``): the family's primary
utility at the sweep's best release (overall and per ε) and the attacker metric there."""

from __future__ import annotations

import json

from tasks.metrics_summary import HEADLINE, headline_metrics, headline_summary, is_release, sweep_summary
from tests.conftest import REPO


def _scoreshield() -> tuple[dict, dict]:
    options = {"epsilon=2.0_mechanism=noisy": {"mechanism": "noisy", "epsilon": 2.0},
               "epsilon=2.0_mechanism=newton": {"mechanism": "newton", "epsilon": 2.0},
               "epsilon=8.0_mechanism=newton": {"mechanism": "newton", "epsilon": 8.0},
               "mechanism=clean": {"mechanism": "clean", "epsilon": 1.0},
               "mechanism=identity_noise": {"mechanism": "identity_noise", "epsilon": 8.0}}
    means = {"epsilon=2.0_mechanism=noisy": {"utility_roc_auc": 0.6, "xfam_linkage_advantage": 0.1},
             "epsilon=2.0_mechanism=newton": {"utility_roc_auc": 0.7, "xfam_linkage_advantage": 0.2},
             "epsilon=8.0_mechanism=newton": {"utility_roc_auc": 0.8, "xfam_linkage_advantage": 0.3},
             "mechanism=clean": {"utility_roc_auc": 0.99, "xfam_linkage_advantage": 1.0},
             "mechanism=identity_noise": {"utility_roc_auc": 0.95, "xfam_linkage_advantage": 0.0}}
    return means, options


def test_best_release_per_epsilon_leaves_out_the_references() -> None:
    means, options = _scoreshield()
    out = headline_summary(means, "scoreshield", options)
    assert out == {"metric_utility": "utility_roc_auc", "metric_attacker": "xfam_linkage_advantage",
                   "utility": 0.8, "attacker": 0.3, "utility_at_eps": {"2": 0.7, "8": 0.8}}
    assert not is_release("scoreshield", options["mechanism=clean"])
    assert not is_release("scoreshield", options["mechanism=identity_noise"]), "data-free (the family's DATA_FREE)"


def test_an_edited_epsilon_changes_the_headline() -> None:
    means, options = _scoreshield()
    before = headline_summary(means, "scoreshield", options)
    means["epsilon=8.0_mechanism=newton"]["utility_roc_auc"] = 0.65  # as if ε = 8 had become a smaller ε
    after = headline_summary(means, "scoreshield", options)
    assert after["utility"] == 0.7 != before["utility"] and after["attacker"] == 0.2
    assert after["utility_at_eps"] == {"2": 0.7, "8": 0.65}


def test_an_error_utility_is_best_when_smallest_and_one_epsilon_gives_no_breakdown(monkeypatch) -> None:
    monkeypatch.setitem(HEADLINE, "scoreshield", ("utility_gram_mse", ("privacy_epsilon_lower_bound",)))
    means = {"a": {"utility_gram_mse": 3.0, "privacy_epsilon_lower_bound": 1.0},
             "b": {"utility_gram_mse": 2.0, "privacy_epsilon_lower_bound": 1.5}}
    options = {"a": {"mechanism": "noisy", "epsilon": 8.0}, "b": {"mechanism": "newton", "epsilon": 8.0}}
    out = headline_summary(means, "scoreshield", options)
    assert out["utility"] == 2.0 and out["attacker"] == 1.5 and "utility_at_eps" not in out


def test_attacker_falls_back_in_order_and_a_family_without_a_listing_uses_names() -> None:
    assert headline_metrics("scoreshield", ["utility_roc_auc", "privacy_epsilon_lower_bound"]) == (
        "utility_roc_auc", "privacy_epsilon_lower_bound")
    assert headline_metrics("other", ["utility_b", "utility_a", "x_advantage", "y"]) == ("utility_a", "x_advantage")
    assert headline_metrics("gca", ["y"]) == (None, None)
    out = headline_summary({"c": {"utility_accuracy": float("nan")}}, "dc", {"c": {"method": "nki"}})
    assert out["utility"] is None and out["metric_utility"] is None


def test_every_committed_sweep_has_a_headline_and_the_summary_stays_one_narrow_row() -> None:
    from veilbench.config import load_config

    cfg = load_config(REPO / "params.yaml")
    keys: set[str] = set()
    for name, sweep in cfg.sweeps.items():
        means = json.loads((REPO / "reports" / "sweeps" / name / "metrics.json").read_text())
        summary = sweep_summary(means, len(sweep.seeds), sweep.family, sweep.expand())
        assert summary["metric_utility"] == HEADLINE[sweep.family][0], name
        if any(is_release(sweep.family, o) for o in sweep.expand().values()):
            assert summary["utility"] is not None, name
        keys |= {k if not isinstance(v, dict) else f"{k}.{kk}" for k, v in summary.items()
                 for kk in (v if isinstance(v, dict) else [None])}
        json.dumps(summary, allow_nan=False)
    assert len(keys) <= 24, sorted(keys)  # `dvc metrics show`: one column per key over all sweeps

