"""The *Privacy audits* section of ``reports/index.md``: what the audits of each family's private
releases decide.

The white-box audit (:mod:`veilbench.privacy.noise_audit`) tests the noise each private release
added against its claimed ε; the black-box audit (:mod:`veilbench.privacy.audit`) sees releases
only. Per audit, a cell is *decidable* when the audit's power is ≥ 95 % against a mechanism with
half the calibrated noise in every seed, and *flagged* when the audit shows more ε than claimed in
some seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tasks.report.rows import Row, seed_metrics

PRIVATE_MARKER = "privacy_noise_audit_flagged"
"""A cell is private (claims a finite ε > 0 for a noisy release) when it reports the white-box audit."""

#: The audits summarised in ``index.md`` over the private cells: (label, the cell's per-seed "decidable"
#: metric (power ≥ 95 % against half the noise; its presence marks an audited cell), per-seed "flagged"
#: test, the power metrics).
AUDITS: tuple[tuple[str, str, Callable[[dict[str, float]], bool], dict[str, str]], ...] = (
    ("white-box noise audit", "privacy_noise_audit_decidable", lambda m: m["privacy_noise_audit_flagged"] > 0,
     {"σ/2": "privacy_noise_audit_power_half_sigma", "0.8σ": "privacy_noise_audit_power_08_sigma"}),
    ("black-box audit", "privacy_audit_decidable",
     lambda m: m.get("privacy_epsilon_lower_bound", -math.inf) > m.get("privacy_epsilon_claimed", math.inf),
     {"half the noise": "privacy_audit_power_half_noise"}),
    ("black-box audit of one DP-FedAvg round", "privacy_audit_decidable_round",
     lambda m: m.get("privacy_epsilon_lower_bound_round", -math.inf) > m.get("privacy_epsilon_claimed_round", math.inf),
     {"half the noise": "privacy_audit_power_half_noise_round"}),
)


def _audit_summary(audit: tuple[str, str, Callable[[dict[str, float]], bool], dict[str, str]],
                   private: list[list[dict[str, float]]]) -> str | None:
    """One audit over the private cells (each a list of per-seed metrics): how many it audited, how
    many are decidable in every seed, how many are flagged in some seed, and the weakest power;
    None when it audited none."""
    label, decidable_metric, flagged, powers = audit
    audited = [ms for ms in ([m for m in ms if decidable_metric in m] for ms in private) if ms]
    if not audited:
        return None
    decidable = sum(all(m[decidable_metric] == 1.0 for m in ms) for ms in audited)
    n_flagged = sum(any(flagged(m) for m in ms) for ms in audited)
    power = {k: [m[name] for ms in audited for m in ms if name in m] for k, name in powers.items()}
    weakest = ", ".join(f"{min(v):.3f} against {k}" for k, v in power.items() if v)
    return f"{label}: {len(audited)} audited, {decidable} decidable, {n_flagged} flagged; weakest power {weakest}"


def audit_lines(family: str, rows: list[Row]) -> list[str]:
    """The family's line of the *Privacy audits* section of ``index.md`` (after the family summaries,
    which stay at the top): per audit of :data:`AUDITS` (white-box, :mod:`veilbench.privacy.noise_audit`;
    black-box, :mod:`veilbench.privacy.audit`), the private cells it audited, how many are decidable in
    every seed (the cell's own ``*_decidable``: power ≥ 95 % against half the noise), how many are
    flagged in some seed, and the weakest power over cells and seeds."""
    cells = [seed_metrics(r) for r in rows if r["family"] == family]
    private = [ms for ms in cells if any(PRIVATE_MARKER in m for m in ms)]
    parts = [s for audit in AUDITS if (s := _audit_summary(audit, private)) is not None]
    if not parts:
        return [f"- **{family}**: no cell claims differential privacy; nothing to audit."]
    return [f"- **{family}**: {len(private)} private cell(s); " + "; ".join(parts) + "."]


def audits_section(families: list[str], rows: list[Row]) -> list[str]:
    """The *Privacy audits* section: what the audits decide, then one line per family."""
    if not families:
        return []
    return ["## Privacy audits", "",
            "What the audits of each family's releases decide. The white-box audit tests the noise each "
            "private release added (release − clean, before clipping or projection) against its claimed ε "
            "(`veilbench.privacy.noise_audit`); the black-box audit sees releases only and cannot certify "
            "large ε (`veilbench.privacy.audit`). *Decidable*: power ≥ 95% against a mechanism with half "
            "the calibrated noise, in every seed; *flagged*: the audit shows more ε than claimed in some "
            "seed.", "",
            *(line for family in families for line in audit_lines(family, rows)), ""]
