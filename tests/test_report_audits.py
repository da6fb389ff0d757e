"""index.md's *Privacy audits* section: per family, the private cells, and for each audit how many cells it
audited, how many it can decide, how many it flagged (in any seed) and its weakest power."""

from __future__ import annotations

import re

from tasks.report.audits import audit_lines


def _row(family: str, seeds: list[dict[str, float]]) -> dict:
    return {"family": family, "sweep": "s", "cell": "c", "summary": {}, "per_seed": dict(enumerate(seeds))}


def _white(flagged: float = 0.0, half: float = 1.0, p08: float = 1.0, **more: float) -> dict[str, float]:
    return {"privacy_noise_audit_flagged": flagged, "privacy_noise_audit_power_half_sigma": half,
            "privacy_noise_audit_power_08_sigma": p08, "privacy_noise_audit_decidable": float(half >= 0.95), **more}


def _black(lower: float, claimed: float, power: float) -> dict[str, float]:
    return {"privacy_audit_decidable": float(power >= 0.95), "privacy_audit_power_half_noise": power,
            "privacy_epsilon_lower_bound": lower, "privacy_epsilon_claimed": claimed}


def _numbers(text: str, label: str) -> tuple[int, int, int, list[float]]:
    """(audited, decidable, flagged, weakest powers) stated for ``label`` in an audit line."""
    segment = text.split(f"{label}: ", 1)[1].split("; black-box", 1)[0]
    counts = [int(x) for x in re.findall(r"(\d+) (?:audited|decidable|flagged)", segment)]
    return (*counts, [float(x) for x in re.findall(r"(\d\.\d{3}) against", segment)])


def test_audit_line_counts_private_cells_decidable_flagged_and_the_weakest_power():
    rows = [
        _row("ss", [{**_white(), **_black(1.0, 8.0, 0.0)}, {**_white(flagged=1.0), **_black(9.0, 8.0, 0.0)}]),
        _row("ss", [{**_white(half=0.9, p08=0.42), **_black(0.5, 1.0, 0.99)}]),
        _row("ss", [{**_white(p08=0.97), **_black(0.2, 1.0, 0.97)}]),
        _row("ss", [_black(0.0, 0.0, 0.0)]),  # a data-free reference: not private, not counted
        _row("other", [{"utility": 1.0}]),
    ]
    (line,) = audit_lines("ss", rows)
    assert line.startswith("- **ss**: 3 private cell(s);")
    assert _numbers(line, "white-box noise audit") == (3, 2, 1, [0.9, 0.42])
    assert _numbers(line, "black-box audit") == (3, 2, 1, [0.0])
    assert "DP-FedAvg round" not in line
    assert audit_lines("other", rows) == ["- **other**: no cell claims differential privacy; nothing to audit."]


def test_audit_line_reads_the_dpfedavg_round_audit_and_means_without_per_seed_values():
    metrics = {**_white(p08=0.99), "privacy_audit_decidable_round": 1.0, "privacy_audit_power_half_noise_round": 0.96,
               "privacy_epsilon_lower_bound_round": 5.0, "privacy_epsilon_claimed_round": 4.7}
    row = {"family": "gca", "sweep": "s", "cell": "c", "per_seed": {},
           "summary": {k: {"mean": v, "ci95": 0.0, "n": 1} for k, v in metrics.items()}}
    (line,) = audit_lines("gca", [row])
    assert _numbers(line, "white-box noise audit") == (1, 1, 0, [1.0, 0.99])
    assert _numbers(line, "black-box audit of one DP-FedAvg round") == (1, 1, 1, [0.96])
