"""The white-box audit's power at the default run's sizes: for every private cell of ``params.yaml`` (every
ScoreShield release that claims a finite ε, and DP-FedAvg), the exact χ² power against σ/2 and 0.8σ at the
cell's number of noise entries (a lower bound on it where the split decides) is ≥ 95 %."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sklearn.datasets import load_digits

from tasks.common import load_params
from veilbench.datasets.paraphrases import paraphrase_corpus
from veilbench.gca.accountant import dp_fedavg_epsilon
from veilbench.privacy.calibration import analytic_sigma
from veilbench.privacy.noise_audit import NOISE_AUDIT_ALPHA, chi2_power
from veilbench.scoreshield import family, gram_stages, vector_stages
from veilbench.scoreshield.params import DATA_FREE_MECHANISMS

REPO = Path(__file__).resolve().parents[2]
CFG = load_params(REPO / "params.yaml", REPO)


def _scoreshield_private_cells() -> list[tuple[str, str, family.Params]]:
    out = []
    for name, sweep in CFG.sweeps.items():
        if sweep.family == "scoreshield":
            for cell, opts in sweep.expand().items():
                params = family.Params(**opts)
                if params.mechanism not in ("clean", *DATA_FREE_MECHANISMS):
                    out.append((name, cell, params))
    return out


def _dataset(sweep: str) -> str:
    return CFG.embeddings[CFG.sweeps[sweep].embedding].dataset


def _train_rows(sweep: str) -> int:
    """Train rows of the sweep's data set: the split takes ⌈test_size · N⌉ test records."""
    name = _dataset(sweep)
    n = {"digits": lambda: load_digits().target.size, "paraphrases": lambda: len(paraphrase_corpus()[0])}[name]()
    return n - math.ceil(CFG.datasets[name].test_size * n)


def _entries_sigma_sensitivity(sweep: str, params: family.Params) -> tuple[int, float, float]:
    """(noise entries k, calibrated σ, Δ) of a cell: q·n scores, or the n(n + 1)/2 entries of an n-record Gram."""
    if params.regime == "vector":
        mech = vector_stages.mechanism(params, params.n_queries)
        return params.n_queries * _train_rows(sweep), mech.sigma, mech.sensitivity
    n = params.n_records
    if params.gram_source == "text":
        n = min(n, len(paraphrase_corpus()[0]))
    elif params.gram_source == "embed":
        n = min(n, _train_rows(sweep))
    mech = gram_stages.mechanism(params)
    return n * (n + 1) // 2, mech.sigma_for(n), mech.sensitivity_for(n)


CELLS = _scoreshield_private_cells()


def test_the_default_run_has_private_cells_of_every_kind():
    kinds = {(p.regime, p.gram_source, _dataset(s), p.adjacency) for s, _, p in CELLS}
    assert {("vector", "embed", "digits", "record"), ("gram", "embed", "digits", "output"),
            ("gram", "embed", "digits", "record"), ("gram", "embed", "paraphrases", "output"),
            ("gram", "movielens", "digits", "output")} <= kinds


@pytest.mark.parametrize(("sweep", "cell", "params"), CELLS, ids=[f"{s}/{c}" for s, c, _ in CELLS])
def test_every_private_scoreshield_cell_is_decidable_against_half_and_08_sigma(sweep, cell, params):
    k, sigma, sens = _entries_sigma_sensitivity(sweep, params)
    sigma_min = analytic_sigma(sens, params.epsilon, params.delta)
    level = params.noise_audit_alpha / 3
    assert chi2_power(0.5, sigma, sigma_min, k, level) >= 0.95
    assert chi2_power(0.8, sigma, sigma_min, k, level) >= 0.95
    assert chi2_power(1.0, sigma, sigma_min, k, level) <= level * (1 + 1e-9)  # and no more false flags than stated


@pytest.mark.parametrize("z", [0.5, 1.0, 2.0])
def test_the_default_dpfedavg_cell_is_decidable_against_half_and_08_sigma(z):
    """The DP-FedAvg cells' rounds and δ, at least 256 noise elements per round (the model is larger); the RDP
    claim leaves the server's noise above the exact minimum, which lowers the power: z covers the run's range."""
    (opts,) = [o for s in CFG.sweeps.values() if s.family == "gca" for o in s.expand().values()
               if o.get("method") == "dpfedavg"]
    rounds, delta = opts["rounds"], opts.get("dp_delta", 1e-5)
    sigma = z  # per-element std over the sensitivity c·max p (the power depends on σ/Δ only)
    sigma_min = analytic_sigma(math.sqrt(rounds), dp_fedavg_epsilon(z, rounds, delta), delta)
    assert sigma_min < sigma
    level = NOISE_AUDIT_ALPHA / 3
    for ratio in (0.5, 0.8):
        assert chi2_power(ratio, sigma, sigma_min, rounds * 256, level) >= 0.95
