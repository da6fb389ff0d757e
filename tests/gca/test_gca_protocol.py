"""run_gca is Algorithm 1 (spec §4.4), by behaviour: its outputs equal, to the bit, a plain reference
loop written from the spec with the same primitives; each of its options changes what it should and
nothing else; a run resumed from any round's checkpoint ends as the uninterrupted run; a run of R
rounds is the prefix of a longer one."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from veilbench.checkpoints import RoundCheckpoints
from veilbench.gca import gca
from veilbench.gca.clustering import centroid_weights, fit_centroids
from veilbench.gca.federation import batch_stream, evaluate_pools, make_optimizer
from veilbench.gca.simulator import FedConfig, run_protocol
from veilbench.gca.training import flat_params, reconstruction_epoch
from veilbench.random import stream
from veilbench.validation import ValidationError

from .helpers import tiny_federation

SIZES = (12, 20, 27)
CFG = FedConfig(rounds=2, recon_epochs=2, align_epochs=2, batch_size=8, upload_fraction=0.2, n_clusters=3,
                clustering="kmeans", covariance_type="diag", reg_covar=1e-3, gmm_n_init=2, weighting="inverse",
                quantile=0.6, attack_extra_epochs=2)


def reference_gca(fed, cfg, seed):
    """Algorithm 1 as the spec writes it, one client after the other (the oracle)."""
    xs, _ = fed.tensors()
    pools = fed.pools()
    rng = batch_stream(seed)
    models = gca.init_client_models(fed, cfg, seed)
    rec = [make_optimizer(m.parameters(), cfg) for m in models]
    al = [make_optimizer(m.encoder.parameters(), cfg) for m in models]
    curve, align_curve, steps, counts, uploads = [], [], np.zeros(len(xs), dtype=np.int64), [], []
    for _ in range(cfg.rounds):
        for _ in range(cfg.recon_epochs):
            for i in range(len(xs)):
                steps[i] += reconstruction_epoch(models[i], rec[i], xs[i], cfg.batch_size, rng)
            curve.append(evaluate_pools(models, xs, pools, cfg.quantile))
        uploads = [gca.upload_codes(m, x, cfg.upload_fraction, rng) for m, x in zip(models, xs)]
        codes = np.concatenate([z for _, z in uploads])
        cent = fit_centroids(codes, min(cfg.n_clusters, codes.shape[0]), cfg.clustering, int(rng.integers(2**31)),
                             cfg.covariance_type, cfg.reg_covar, cfg.gmm_n_init)
        counts.append(cent.counts.tolist())
        mu = torch.as_tensor(cent.mu, dtype=torch.float32)
        w = torch.as_tensor(centroid_weights(cent.counts, cfg.weighting), dtype=torch.float32)
        for _ in range(cfg.align_epochs):
            for i in range(len(xs)):
                steps[i] += gca.alignment_epoch(models[i], al[i], xs[i], mu, w, cfg.batch_size, rng)
            align_curve.append(evaluate_pools(models[:1], xs[:1], pools, cfg.quantile)[0, 0])
    for _ in range(cfg.attack_extra_epochs):
        reconstruction_epoch(models[0], rec[0], xs[0], cfg.batch_size, rng)
    victim = gca.upload_codes(models[0], xs[0], cfg.upload_fraction, rng)[1]
    return {"curve": np.array(curve), "align": np.array(align_curve), "steps": steps, "counts": counts,
            "victim": victim, "params": [flat_params(m) for m in models], "last_upload": uploads}


@pytest.fixture(scope="module")
def fed():
    return tiny_federation(SIZES, validation=True)


@pytest.fixture(scope="module")
def run(fed):
    return gca.run_gca(fed, CFG, 3)


def test_run_gca_is_the_reference_algorithm_to_the_bit(fed, run):
    ref = reference_gca(fed, CFG, 3)
    assert np.array_equal(run.accuracy, ref["curve"][:, 0, 0]) and np.array_equal(run.auc, ref["curve"][:, 0, 1])
    assert np.array_equal(run.val_accuracy, ref["curve"][:, 1, 0]) and np.array_equal(run.val_auc, ref["curve"][:, 1, 1])
    assert np.array_equal(run.align_accuracy, ref["align"])
    assert np.array_equal(run.local_steps, ref["steps"]) and run.info["centroid_counts"] == ref["counts"]
    assert np.array_equal(run.victim_codes, ref["victim"])
    for model, want in zip(run.final_models, ref["params"], strict=True):
        assert np.array_equal(flat_params(model), want)
    assert np.array_equal(run.last_upload.codes, np.concatenate([z for _, z in ref["last_upload"]]))
    assert np.array_equal(run.last_upload.row, np.concatenate([i for i, _ in ref["last_upload"]]))


def test_points_rounds_steps_and_bytes(fed, run):
    assert run.method == "gca" and run.points_per_round == CFG.recon_epochs
    assert run.rounds.tolist() == [1, 1, 2, 2] and run.epochs.tolist() == [1, 2, 1, 2]
    per_epoch = np.array([math.ceil(n / CFG.batch_size) for n in SIZES])
    assert run.local_steps.tolist() == (CFG.rounds * (CFG.recon_epochs + CFG.align_epochs) * per_epoch).tolist()
    n_up = sum(max(1, int(CFG.upload_fraction * n)) for n in SIZES)
    d_z = run.victim_codes.shape[1]
    assert run.bytes_up_per_round == 4 * n_up * d_z
    assert run.info["n_clusters_used"] == [min(CFG.n_clusters, n_up)] * CFG.rounds
    k_kept = max(len(c) for c in run.info["centroid_counts"])
    assert run.bytes_down_per_round == 4 * len(SIZES) * k_kept * (d_z + 1)


def test_alignment_trains_the_encoder_only(fed):
    one = FedConfig(**{**CFG.__dict__, "rounds": 1, "attack_extra_epochs": 0})
    no_align = FedConfig(**{**one.__dict__, "align_epochs": 1})
    a, b = gca.run_gca(fed, one, 3), gca.run_gca(fed, no_align, 3)
    # after the second alignment epoch the decoders are still those the reconstruction epochs left
    for ma, mb in zip(a.final_models, b.final_models):
        assert all(torch.equal(p, q) for p, q in zip(ma.decoder.parameters(), mb.decoder.parameters()))
        assert not all(torch.equal(p, q) for p, q in zip(ma.encoder.parameters(), mb.encoder.parameters()))


@pytest.mark.parametrize("option", [{"weighting": "uniform"}, {"attack_extra_epochs": 0}, {"upload_fraction": 0.5},
                                    {"client_init": "independent"}])
def test_each_option_changes_the_run(fed, run, option):
    other = gca.run_gca(fed, FedConfig(**{**CFG.__dict__, **option}), 3)
    if "attack_extra_epochs" in option:  # only the victim's post-training upload changes
        assert np.array_equal(other.accuracy, run.accuracy)
        assert not np.array_equal(other.victim_codes, run.victim_codes)
    else:  # the trained encoders differ (the tiny data saturate the curves, so compare the models)
        assert any(not np.array_equal(flat_params(a), flat_params(b))
                   for a, b in zip(other.final_models, run.final_models, strict=True))


class _KilledAfter(RoundCheckpoints):
    """Checkpoints that stop the run (an exception, as a kill would) right after saving round ``stop``."""

    def __init__(self, directory, stop):
        super().__init__(directory)
        self.stop = stop

    def save(self, round_, state):
        super().save(round_, state)
        if round_ == self.stop:
            raise KeyboardInterrupt(f"killed after round {round_}")


def _same_run(a, b):
    for name in ("accuracy", "auc", "val_accuracy", "val_auc", "rounds", "epochs", "local_steps", "align_accuracy",
                 "victim_codes", "victim_params"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.info.keys() == b.info.keys()
    for key in a.info:
        if key == "dp_noise":
            assert a.info[key]["sum_sq"] == b.info[key]["sum_sq"]
            assert np.array_equal(a.info[key]["sample"], b.info[key]["sample"])
        else:
            assert a.info[key] == b.info[key], key
    for ma, mb in zip(a.final_models, b.final_models, strict=True):
        assert np.array_equal(flat_params(ma), flat_params(mb))


@pytest.mark.parametrize("method", ["gca", "fedavg", "dpfedavg", "fedprox", "single", "centralized"])
def test_a_run_killed_after_any_round_resumes_to_the_uninterrupted_result(tmp_path, fed, method):
    cfg = FedConfig(**{**CFG.__dict__, "rounds": 3, "local_epochs": 2})
    whole = run_protocol(method, fed, cfg, 5)
    for stop in (1, 2, 3):
        folder = tmp_path / f"{method}-{stop}"
        with pytest.raises(KeyboardInterrupt):
            run_protocol(method, fed, cfg, 5, checkpoints=_KilledAfter(folder, stop))
        assert RoundCheckpoints(folder).load()[0] == stop
        _same_run(run_protocol(method, fed, cfg, 5, checkpoints=RoundCheckpoints(folder)), whole)


def test_a_checkpoint_that_does_not_match_its_manifest_is_not_resumed(tmp_path, fed):
    cfg = FedConfig(**{**CFG.__dict__, "rounds": 2})
    with pytest.raises(KeyboardInterrupt):
        gca.run_gca(fed, cfg, 5, checkpoints=_KilledAfter(tmp_path, 1))
    state = tmp_path / "state.pt"
    state.write_bytes(state.read_bytes()[:-7] + b"garbage")
    assert RoundCheckpoints(tmp_path).load() is None
    _same_run(gca.run_gca(fed, cfg, 5, checkpoints=RoundCheckpoints(tmp_path)), gca.run_gca(fed, cfg, 5))


@pytest.mark.parametrize("method", ["gca", "fedavg"])
def test_a_shorter_run_is_the_prefix_of_a_longer_one(fed, method):
    short = run_protocol(method, fed, FedConfig(**{**CFG.__dict__, "rounds": 2}), 4)
    long = run_protocol(method, fed, FedConfig(**{**CFG.__dict__, "rounds": 3}), 4)
    k = short.accuracy.shape[0]
    for name in ("accuracy", "auc", "val_accuracy", "val_auc"):
        assert np.array_equal(getattr(short, name), getattr(long, name)[:k]), name


def test_upload_is_a_sorted_sample_without_replacement_and_its_codes():
    fed = tiny_federation()
    model = fed.spec.build(stream(0, "test.model"))
    x = torch.from_numpy(fed.clients[0])
    idx, codes = gca.upload_codes(model, x, 0.5, stream(4, "test.upload"))
    want = np.sort(stream(4, "test.upload").choice(30, size=15, replace=False))
    assert idx.dtype == np.int64 and np.array_equal(idx, want)
    assert np.array_equal(codes, gca.encode(model, x[want]))
    full, _ = gca.upload_codes(model, x, 1.0, stream(5, "test.upload"))
    assert np.array_equal(full, np.arange(30))  # every record once
    few, _ = gca.upload_codes(model, x[:, :], 0.01, stream(5, "test.upload"))
    assert few.shape == (1,)


def test_client_initial_models_come_from_the_named_streams():
    spec = tiny_federation().spec
    shared = gca.client_initial_model(spec, 7, 2, "shared")
    assert np.array_equal(flat_params(shared), flat_params(gca.initial_model(spec, 7)))
    for seed, client in ((7, 2), (7, 0), (8, 2)):
        own = gca.client_initial_model(spec, seed, client, "independent")
        want = spec.build(stream((seed, client), "gca.init-client"))
        assert np.array_equal(flat_params(own), flat_params(want))
    assert not np.array_equal(flat_params(gca.client_initial_model(spec, 7, 2, "independent")),
                              flat_params(gca.client_initial_model(spec, 7, 0, "independent")))
    with pytest.raises(ValidationError, match="^client_init: must be 'shared' or 'independent', got 'own'$"):
        gca.client_initial_model(spec, 7, 2, "own")
    with pytest.raises(ValidationError, match="^engine: must be"):
        gca.make_clients(tiny_federation(), CFG, 7, "batched")


@pytest.mark.parametrize("sizes,weighting", [(SIZES, "inverse"), ((16, 16, 16), "uniform")])
def test_the_vectorized_engine_runs_the_same_gca_to_the_bit(tmp_path, sizes, weighting):
    fed = tiny_federation(sizes, validation=True)
    cfg = FedConfig(**{**CFG.__dict__, "rounds": 3, "weighting": weighting})
    sequential = gca.run_gca(fed, cfg, 6)
    _same_run(gca.run_gca(fed, cfg, 6, engine="vectorized"), sequential)
    with pytest.raises(KeyboardInterrupt):  # and resumes from its own checkpoints
        gca.run_gca(fed, cfg, 6, checkpoints=_KilledAfter(tmp_path, 2), engine="vectorized")
    _same_run(gca.run_gca(fed, cfg, 6, checkpoints=RoundCheckpoints(tmp_path), engine="vectorized"), sequential)


@pytest.mark.parametrize("method", ["gca", "fedavg", "fedprox", "dpfedavg"])
def test_clients_trained_side_by_side_give_the_loop_s_bits(fed, method):
    cfg = FedConfig(**{**CFG.__dict__, "local_epochs": 2})
    one = run_protocol(method, fed, cfg, 8)
    _same_run(run_protocol(method, fed, FedConfig(**{**cfg.__dict__, "client_threads": 3}), 8), one)
    _same_run(run_protocol(method, fed, FedConfig(**{**cfg.__dict__, "client_threads": 2}), 8), one)
