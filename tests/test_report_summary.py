"""The family summary of index.md: rows that do not beat the data-free reference say so, utility
as % of the clean reference, attacker advantages ranked and shown floored at 0 with their scale
explained, and "the attack learns nothing on this data" when no release beats its control."""

from __future__ import annotations

import re

import numpy as np
from scipy import stats

from tasks.report.headline import attack_learns_nothing, best_per_level, headline
from tasks.report.summary import summary_section, summary_table
from tests.conftest import tiny_params
from veilbench.config import validate_config

U, A = "utility_verification_accuracy", "xfam_linkage_advantage"


def _row(cell: str, params: dict, sweep: str = "ss", family: str = "scoreshield", **metrics: list[float]) -> dict:
    summary = {m: {"mean": float(np.mean(v)), "ci95": float(stats.t.ppf(0.975, len(v) - 1) * stats.sem(v)), "n": len(v)}
               for m, v in metrics.items()}
    return {"sweep": sweep, "cell": cell, "family": family, "dataset": "d", "method": params.get("mechanism", "m"),
            "params": params, "summary": summary,
            "per_seed": {str(s): {m: v[s] for m, v in metrics.items()} for s in range(3)}}


def _eps_rows() -> list[dict]:
    """A DP sweep: the clean release, the data-free identity, and one best cell per ε that ties the
    identity (ε = 0.5), loses to it (ε = 2) or beats it (ε = 8)."""
    return [
        _row("mechanism=clean", {"mechanism": "clean"}, **{U: [0.93, 0.932, 0.934], A: [0.99, 1.0, 1.0]}),
        _row("mechanism=identity", {"mechanism": "identity"}, **{U: [0.90, 0.895, 0.905], A: [0.0, 0.0, 0.0]}),
        _row("epsilon=0.5", {"mechanism": "gaussian", "epsilon": 0.5}, **{U: [0.901, 0.894, 0.905], A: [-0.01, 0.0, 0.02]}),
        _row("epsilon=2.0", {"mechanism": "gaussian", "epsilon": 2.0}, **{U: [0.85, 0.84, 0.86], A: [-0.3, -0.2, -0.25]}),
        _row("epsilon=8.0", {"mechanism": "gaussian", "epsilon": 8.0}, **{U: [0.915, 0.912, 0.914], A: [0.2, 0.3, 0.25]}),
    ]


def _table(lines: list[str]) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("|") and "---" not in line]


def test_summary_rows_say_where_the_utility_does_not_beat_the_data_free_release() -> None:
    cfg = validate_config(tiny_params())
    lines = summary_section(cfg, "scoreshield", _eps_rows(), [])
    table = _table("\n".join(lines).splitlines())
    header, body = table[0], {r[0]: r for r in table[1:]}
    assert header[:4] == ["ε (DP budget)", "best mechanism", f"utility: `{U}`", "kept: % of clean"]
    assert body["0.5"][2].endswith("(= data-free)")
    assert body["2"][2].endswith("(below data-free)")
    assert "data-free" not in body["8"][2]
    # % of the clean reference, beside the absolute value
    assert body["8"][3] == f"{100 * np.mean([0.915, 0.912, 0.914]) / np.mean([0.93, 0.932, 0.934]):.3g} %"
    assert "*= data-free*" in "\n".join(lines)


def test_attacker_advantages_are_floored_at_zero_with_their_scale_explained() -> None:
    cfg = validate_config(tiny_params())
    text = "\n".join(summary_section(cfg, "scoreshield", _eps_rows(), []))
    table = _table(text.splitlines())
    assert table[0][-1] == f"attacker: `{A}`, floored at 0"
    body = {r[0]: r for r in table[1:]}
    assert body["2"][-1] == "0 (= control)", "an attack below its control on every seed shows the control's 0"
    numbers = [float(x) for r in table[1:] for x in re.findall(r"-?\d+\.\d+", r[-1])]
    assert numbers and min(numbers) >= 0
    assert "floored at 0 because an attacker can always fall back on the control" in text
    assert "1 = a perfect attack" in text and "raw values" in text


def _pareto_rows(advantages: dict[str, list[float]]) -> list[dict]:
    utility = {"gca": [0.83, 0.84, 0.835], "fedavg": [0.86, 0.85, 0.87], "leaky": [0.90, 0.91, 0.89]}
    return [_row(f"method={m}", {"method": m}, sweep="g", family="gca", utility_accuracy=utility[m],
                 privacy_delta_cos_advantage=adv) for m, adv in advantages.items()]


def _gca_cfg():  # noqa: ANN202 - a Config
    raw = tiny_params()
    raw["sweeps"]["g"] = {"family": "gca", "embedding": "digits-pca", "seeds": [0, 1, 2],
                          "grid": {"method": ["gca", "fedavg", "single"]}}
    return validate_config(raw)


def test_the_pareto_table_ranks_by_the_advantage_floored_at_zero() -> None:
    """GCA's attack far below its control is not 'more private' than FedAvg's attack below it:
    both leak nothing, so the frontier's first row is the best utility among them."""
    rows = _pareto_rows({"gca": [-2.9, -2.6, -2.7], "fedavg": [-0.3, -0.1, -0.15], "leaky": [0.3, 0.35, 0.4]})
    h = headline(_gca_cfg(), "gca", rows)
    assert h is not None and h["attack"] == "privacy_delta_cos_advantage"
    mode, front = best_per_level(h, set())
    assert mode == "pareto" and [r["cell"] for r in front] == ["method=fedavg", "method=leaky"]
    _, body, _ = summary_table(h, set())
    assert body[0][0] == "attacker ≤ 0 (= control)" and body[0][1] == "fedavg"
    assert not attack_learns_nothing(h, set())


def test_the_summary_says_the_attack_learns_nothing_when_no_release_beats_its_control() -> None:
    # "leaky" is above 0 on average but not shown to beat its control (one-sided lower bound ≤ 0)
    rows = _pareto_rows({"gca": [-2.9, -2.6, -2.7], "fedavg": [-0.3, -0.1, -0.15], "leaky": [-0.05, 0.08, 0.03]})
    cfg = _gca_cfg()
    h = headline(cfg, "gca", rows)
    assert attack_learns_nothing(h, set())
    text = "\n".join(summary_section(cfg, "gca", rows, []))
    assert "**The attack learns nothing on this data**" in text
