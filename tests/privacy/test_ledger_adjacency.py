"""The ledger states each release's adjacency; output-adjacency Gram rows get the record-level ε of the same σ
at the cell's n; DP-FedAvg's rounds are composed by PLD with the cell's RDP figure beside them. Expected values
come from dp_accounting's PLDs and the RDP accountant, built here."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

from tasks.report.ledger import LEDGER_COLUMNS, ledger_section
from tasks.sweep import ledger_entries
from veilbench.gca.accountant import dp_fedavg_epsilon
from veilbench.io import write_bundle
from veilbench.privacy.calibration import analytic_sigma, gaussian_epsilon
from veilbench.privacy.ledger import LedgerEntry, Release, compose
from veilbench.validation import ValidationError

REPO = Path(__file__).resolve().parents[2]
DELTA = 1e-5


def _record_sensitivity(n: int) -> float:
    return 2.0 * math.sqrt(2.0 * (n - 1))


def _pld_epsilon(z: float, count: int = 1) -> float:
    """Pessimistic PLD ε at δ of ``count`` Gaussian releases of multiplier z (grid fine enough for z)."""
    step = 1e-4 * max(1.0, 1.0 / (z / math.sqrt(count)) ** 2)
    one = pld.from_gaussian_mechanism(z, sensitivity=1.0, value_discretization_interval=step)
    return (one.self_compose(count) if count > 1 else one).get_epsilon_for_delta(DELTA)


def _manifest(out: Path, cell: str, mechanism: str, release: Release) -> None:
    """A release cell's record as :func:`tasks.sweep.run_cell` writes it: seed 0 made ``release``."""
    entry = release.entry("digits", "scoreshield-gram", cell, 0, mechanism).as_dict()
    write_bundle(out / cell, {"x": np.zeros(1)}, {"per_seed": {"0": release.metrics()}, "ledger": [entry]})


@pytest.fixture()
def release_dir(tmp_path: Path) -> Path:
    """A release sweep holding an output-adjacency Gram cell (n = 200), a record one and a DP-FedAvg cell."""
    out = tmp_path / "data" / "release" / "scoreshield-gram"
    for cell, adjacency in (("output", "output"), ("record", "record")):
        sens = 1.0 if adjacency == "output" else _record_sensitivity(200)
        sigma = analytic_sigma(sens, 2.0, DELTA)
        _manifest(out, cell, "noisy", Release(2.0, DELTA, noise_multiplier=sigma / sens, adjacency=adjacency,
                                              record_noise_multiplier=sigma / _record_sensitivity(200)))
    z, rounds = 4.0, 20
    _manifest(out, "dpfedavg", "dpfedavg", Release(gaussian_epsilon(z, 1.0, DELTA), DELTA, rounds, noise_multiplier=z,
                                                   adjacency="client",
                                                   epsilon_rdp=dp_fedavg_epsilon(z, rounds, DELTA)))
    _manifest(out, "unstated", "dc", Release(1.0, DELTA))
    return out


def _entries(release_dir: Path) -> list[dict]:
    return ledger_entries(release_dir, ["output", "record", "dpfedavg", "unstated"])


def test_entries_state_adjacency_record_multiplier_and_the_rdp_figure(release_dir):
    rows = {e["cell"]: e for e in _entries(release_dir)}
    assert {c: r["adjacency"] for c, r in rows.items()} == {"output": "output", "record": "record", "dpfedavg": "client",
                                                            "unstated": ""}
    assert rows["dpfedavg"]["epsilon_rdp"] == dp_fedavg_epsilon(4.0, 20, DELTA) and rows["output"]["epsilon_rdp"] is None
    assert rows["unstated"]["record_noise_multiplier"] is None and rows["unstated"]["epsilon_record"] is None
    for r in rows.values():
        assert set(LEDGER_COLUMNS) <= set(r)
        assert LedgerEntry.from_dict(r).as_dict() == r


def test_output_adjacency_gram_gets_the_record_level_epsilon_of_its_sigma(release_dir):
    """Δ = 1 at ε = 2, n = 200: the same σ against Δ_record = 2√398 is ε ≈ 285 for a record (PLD)."""
    totals = compose(LedgerEntry.from_dict(e) for e in _entries(release_dir))
    out, rec = totals[("digits", "scoreshield-gram", "output")], totals[("digits", "scoreshield-gram", "record")]
    z_rec = analytic_sigma(1.0, 2.0, DELTA) / _record_sensitivity(200)
    assert out.adjacency == "output" and out.epsilon == pytest.approx(2.0, rel=2e-3)
    assert out.epsilon_record == pytest.approx(_pld_epsilon(z_rec), rel=2e-3)
    assert out.epsilon_record > 100 * out.epsilon
    assert rec.adjacency == "record" and rec.epsilon_record == pytest.approx(rec.epsilon, rel=2e-3)


def test_dpfedavg_rounds_are_composed_by_pld_below_the_rdp_figure(release_dir):
    c = compose(LedgerEntry.from_dict(e) for e in _entries(release_dir))[("digits", "scoreshield-gram", "dpfedavg")]
    assert c.adjacency == "client" and c.n_releases == 20
    assert c.noise_multiplier == pytest.approx(4.0 / math.sqrt(20), rel=1e-12)
    assert c.epsilon == pytest.approx(_pld_epsilon(4.0, 20), rel=2e-3)
    assert c.epsilon_rdp == dp_fedavg_epsilon(4.0, 20, DELTA) > c.epsilon


def test_ledger_section_shows_adjacency_record_level_and_rdp_in_eight_columns(release_dir):
    from tasks.common import load_params

    root = release_dir.parents[2]
    (root / "params.yaml").write_text((REPO / "params.yaml").read_text())
    from veilbench.io import write_sealed_json

    write_sealed_json(release_dir / "ledger.json", {"entries": _entries(release_dir)})  # as finish_stage writes it
    lines, rows, _ = ledger_section(load_params(None, root), root)
    table = [ln for ln in "\n".join(lines).splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in table]
    header, body = cells[0], {r[1]: dict(zip(cells[0], r)) for r in cells[2:]}
    assert len(header) <= 8
    assert body["output"]["adjacency"] == "output" and body["unstated"]["adjacency"] == "not stated"
    record_eps = float(body["output"]["ε record-level (same σ)"])
    assert record_eps == pytest.approx(gaussian_epsilon(analytic_sigma(1.0, 2.0, DELTA) / _record_sensitivity(200),
                                                        1.0, DELTA), rel=1e-3)
    assert body["dpfedavg"]["ε record-level (same σ)"] == "—"
    pld_col = next(h for h in header if h.startswith("ε (PLD)"))
    m = re.fullmatch(r"(\S+) at δ = 1e-05; RDP (\S+)", body["dpfedavg"][pld_col])
    assert m and float(m.group(1)) < float(m.group(2)) == pytest.approx(dp_fedavg_epsilon(4.0, 20, DELTA), rel=1e-3)
    assert "RDP" not in body["output"][pld_col]
    assert sorted(r["adjacency"] for r in rows) == ["", "client", "output", "record"]  # the CSV's column


@pytest.mark.parametrize(("kwargs", "field"), [
    (dict(adjacency="person"), "adjacency"), (dict(record_noise_multiplier=0.0), "record_noise_multiplier"),
    (dict(record_noise_multiplier=math.nan), "record_noise_multiplier"), (dict(epsilon_rdp=-1.0), "epsilon_rdp"),
])
def test_bad_adjacency_fields_are_rejected_by_name(kwargs, field):
    with pytest.raises(ValidationError, match=rf"^{field}: "):
        LedgerEntry("d", "s", "c", 0, "gaussian", 1.0, DELTA, 1, 2.0, **kwargs)
