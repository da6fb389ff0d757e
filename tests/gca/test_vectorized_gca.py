"""The stacked GCA clients follow run_gca's sequential client loop to the bit."""

from __future__ import annotations

import copy
import io
from dataclasses import replace

import numpy as np
import pytest

from veilbench.gca.clustering import centroid_weights
from veilbench.gca.federation import FedConfig, make_optimizer
from veilbench.gca.gca import alignment_epoch, client_initial_model
from veilbench.gca.training import LocalOptimizer, encode, flat_params, reconstruction_epoch
from veilbench.gca.vectorized_gca import StackedGCAClients
from veilbench.validation import ValidationError

from .helpers import tiny_federation

EQUAL = (30, 30, 30)
UNEQUAL = (13, 41, 30)  # 2, 5 and 3 batches of 10: partial batches, early finishers, rows re-ordered
CFG = FedConfig(batch_size=10, lr=1e-2)
COUNTS = np.array([1.0, 5.0, 20.0, 100.0])  # support of the 4 fixed centroids
# recon / align epochs of several "rounds", the victim's extra epoch, then more rounds
OPS = ("rec", "rec", "align", "align", "rec", "align", "victim", "rec", "align")


def _setup(sizes, init: str = "shared", seed: int = 3):
    import torch

    fed = tiny_federation(sizes, seed=seed)
    xs, _ = fed.tensors()
    inits = [client_initial_model(fed.spec, seed, i, init) for i in range(len(sizes))]
    codes = torch.from_numpy(encode(inits[0], xs[1][: len(COUNTS)]))
    mu = codes + 0.1 * torch.randn(codes.shape, generator=torch.Generator().manual_seed(seed))
    return xs, inits, mu


class Sequential:
    """run_gca's client loop: C modules, each with its two persistent LocalOptimizers."""

    def __init__(self, inits, cfg) -> None:
        self.models = [copy.deepcopy(m) for m in inits]
        self.rec = [make_optimizer(m.parameters(), cfg) for m in self.models]
        self.al = [make_optimizer(m.encoder.parameters(), cfg) for m in self.models]
        self.cfg = cfg

    def reconstruction_epoch(self, xs, rng):
        return np.array([reconstruction_epoch(m, o, x, self.cfg.batch_size, rng)
                         for m, o, x in zip(self.models, self.rec, xs)])

    def alignment_epoch(self, xs, mu, w, rng):
        return np.array([alignment_epoch(m, o, x, mu, w, self.cfg.batch_size, rng)
                         for m, o, x in zip(self.models, self.al, xs)])

    def client_reconstruction_epoch(self, i, x, rng):
        return reconstruction_epoch(self.models[i], self.rec[i], x, self.cfg.batch_size, rng)


def _run(engine, ops, xs, mu, w, rng) -> list:
    """``ops`` on ``engine``; after each, (steps, every client's flat parameters)."""
    trace = []
    for op in ops:
        if op == "rec":
            steps = engine.reconstruction_epoch(xs, rng)
        elif op == "align":
            steps = engine.alignment_epoch(xs, mu, w, rng)
        else:
            steps = engine.client_reconstruction_epoch(0, xs[0], rng)
        models = engine.models if isinstance(engine, Sequential) else engine.models()
        trace.append((np.asarray(steps), [flat_params(m) for m in models]))
    return trace


def _assert_same(a: list, b: list) -> None:
    for k, ((sa, pa), (sb, pb)) in enumerate(zip(a, b)):
        assert np.array_equal(sa, sb), k
        for i, (x, y) in enumerate(zip(pa, pb)):
            assert np.array_equal(x, y), (k, i, float(np.abs(x - y).max()))


CASES = {
    "equal-inverse-shared": (EQUAL, "inverse", "shared", CFG),
    "unequal-inverse-independent": (UNEQUAL, "inverse", "independent", CFG),
    "unequal-uniform-shared": (UNEQUAL, "uniform", "shared", CFG),
    # a per-step StepLR firing every 3 steps: the clients' learning rates part ways
    "unequal-step-schedule": (UNEQUAL, "inverse", "shared", replace(CFG, lr_step_unit="step", lr_step_size=3,
                                                                    lr_gamma=0.5)),
    # a per-epoch StepLR firing every 2 epochs of each optimiser: the victim's extra epoch shifts its own
    "unequal-epoch-schedule": (UNEQUAL, "inverse", "shared", replace(CFG, lr_step_size=2, lr_gamma=0.5)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stacked_clients_are_the_sequential_loop_to_the_bit(case):
    import torch

    sizes, weighting, init, cfg = CASES[case]
    xs, inits, mu = _setup(sizes, init)
    w = torch.as_tensor(centroid_weights(COUNTS, weighting), dtype=torch.float32)
    seq = _run(Sequential(inits, cfg), OPS, xs, mu, w, np.random.default_rng(5))
    stacked = _run(StackedGCAClients(inits, cfg), OPS, xs, mu, w, np.random.default_rng(5))
    _assert_same(seq, stacked)
    assert not np.array_equal(seq[0][1][0], flat_params(inits[0]))  # training moved the models


def test_optimiser_state_is_torch_adams_per_client():
    """The state dict holds, per client, the sequential optimisers' moments and step counts; the
    unequal shards give the clients different step counts (what a shared count would get wrong)."""
    import torch

    xs, inits, mu = _setup(UNEQUAL)
    w = torch.as_tensor(centroid_weights(COUNTS, "inverse"), dtype=torch.float32)
    seq, stacked = Sequential(inits, CFG), StackedGCAClients(inits, CFG)
    _run(seq, OPS, xs, mu, w, np.random.default_rng(1))
    _run(stacked, OPS, xs, mu, w, np.random.default_rng(1))
    state = stacked.state_dict()
    for name, opts in (("reconstruction", seq.rec), ("alignment", seq.al)):
        steps = []
        for i, o in enumerate(opts):
            params = [p for g in o.optimizer.param_groups for p in g["params"]]
            st = [o.optimizer.state[p] for p in params]
            for key in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(state[name][key][i], torch.cat([s[key].flatten() for s in st]))
            steps.append(float(st[0]["step"]))
            assert float(state[name]["lrs"][i]) == o.optimizer.param_groups[0]["lr"]
            assert int(state[name]["scheduler_steps"][i]) == o.scheduler.last_epoch
        assert np.array_equal(state[name]["steps"].numpy(), steps)
        assert len(set(steps)) == len(steps)  # every client its own count


def test_weights_and_centroids_change_the_alignment():
    """Inverse vs uniform weights and the centroids themselves move the encoders differently;
    the decoders are left untouched."""
    import torch

    xs, inits, mu = _setup(UNEQUAL)
    out = {}
    for name, weighting, m in (("inverse", "inverse", mu), ("uniform", "uniform", mu), ("moved", "inverse", mu + 1)):
        w = torch.as_tensor(centroid_weights(COUNTS, weighting), dtype=torch.float32)
        eng = StackedGCAClients(inits, CFG)
        eng.alignment_epoch(xs, m, w, np.random.default_rng(0))
        out[name] = eng.state_dict()["params"]
    n_dec = sum(p.numel() for p in inits[0].decoder.parameters())
    start = torch.stack([torch.from_numpy(flat_params(m)) for m in inits])
    for params in out.values():
        assert torch.equal(params[:, -n_dec:], start[:, -n_dec:])
        assert not torch.equal(params[:, :-n_dec], start[:, :-n_dec])
    assert not torch.equal(out["inverse"], out["uniform"]) and not torch.equal(out["inverse"], out["moved"])


def test_client_epoch_moves_that_client_only():
    xs, inits, _ = _setup(UNEQUAL)
    eng = StackedGCAClients(inits, CFG)
    eng.reconstruction_epoch(xs, np.random.default_rng(0))  # rows re-ordered: client 1 first
    before = eng.state_dict()
    assert eng.client_reconstruction_epoch(2, xs[2], np.random.default_rng(1)) == 3
    after = eng.state_dict()
    moved = [not np.array_equal(before["params"][i], after["params"][i]) for i in range(3)]
    assert moved == [False, False, True]
    assert after["reconstruction"]["steps"].tolist() == [2.0, 5.0, 6.0]


def test_state_dict_resumes_bit_identically():
    """Stop after part of the schedule, save (weights_only), load into an engine built from other
    models and trained a little, continue: the same parameters as the uninterrupted run."""
    import torch

    xs, inits, mu = _setup(UNEQUAL)
    w = torch.as_tensor(centroid_weights(COUNTS, "inverse"), dtype=torch.float32)
    cfg = replace(CFG, lr_step_unit="step", lr_step_size=4, lr_gamma=0.5)
    rng = np.random.default_rng(2)
    whole = StackedGCAClients(inits, cfg)
    _run(whole, OPS[:5], xs, mu, w, rng)
    blob = io.BytesIO()
    torch.save(whole.state_dict(), blob)
    blob.seek(0)
    other = [client_initial_model(tiny_federation(UNEQUAL).spec, 9, i, "independent") for i in range(3)]
    resumed = StackedGCAClients(other, cfg)
    resumed.reconstruction_epoch(xs, np.random.default_rng(0))  # rows already re-ordered, state to overwrite
    resumed.load_state_dict(torch.load(blob, weights_only=True))
    rng_copy = copy.deepcopy(rng)
    _assert_same(_run(whole, OPS[5:], xs, mu, w, rng), _run(resumed, OPS[5:], xs, mu, w, rng_copy))
    fresh = StackedGCAClients(other, cfg)  # the loaded state is what carries the run
    assert not np.array_equal(_run(fresh, OPS[5:6], xs, mu, w, copy.deepcopy(rng))[0][1][0],
                              flat_params(whole.models()[0]))


def test_models_are_live_views_and_the_inputs_stay_untouched():
    import torch

    xs, inits, _ = _setup(UNEQUAL)
    start = [flat_params(m) for m in inits]
    eng = StackedGCAClients(inits, CFG)
    models = eng.models()
    eng.reconstruction_epoch(xs, np.random.default_rng(0))
    params = eng.state_dict()["params"]
    for i, m in enumerate(models):
        assert m is eng.models()[i] and torch.equal(torch.from_numpy(flat_params(m)), params[i])
        assert np.array_equal(flat_params(inits[i]), start[i])


def _conv():
    from veilbench.gca.models import AESpec

    return AESpec("conv", 64, (1, 8, 8), latent_channels=2).build(np.random.default_rng(0))


@pytest.mark.parametrize("call,field", [
    (lambda e, xs, mu, w: StackedGCAClients([_conv()], CFG), "models\\[0\\]"),
    (lambda e, xs, mu, w: StackedGCAClients([e.models()[0], tiny_federation(d=5).spec.build(
        np.random.default_rng(0))], CFG), "models\\[1\\]"),
    (lambda e, xs, mu, w: StackedGCAClients([], CFG), "models"),
    (lambda e, xs, mu, w: StackedGCAClients(e.models(), replace(CFG, batch_size=0)), "batch_size"),
    (lambda e, xs, mu, w: e.reconstruction_epoch(xs[:2], np.random.default_rng(0)), "xs"),
    (lambda e, xs, mu, w: e.reconstruction_epoch([xs[0], xs[1][:, :4], xs[2]], np.random.default_rng(0)),
     "xs\\[1\\]"),
    (lambda e, xs, mu, w: e.alignment_epoch(xs, mu[:, :3], w, np.random.default_rng(0)), "mu"),
    (lambda e, xs, mu, w: e.alignment_epoch(xs, mu, w[:2], np.random.default_rng(0)), "w"),
    (lambda e, xs, mu, w: e.alignment_epoch(xs, mu.double(), w, np.random.default_rng(0)), "mu"),
    (lambda e, xs, mu, w: e.client_reconstruction_epoch(3, xs[0], np.random.default_rng(0)), "i"),
    (lambda e, xs, mu, w: e.load_state_dict({**e.state_dict(), "params": e.state_dict()["params"][:2]}),
     "state\\['params'\\]"),
    (lambda e, xs, mu, w: e.load_state_dict({k: v for k, v in e.state_dict().items() if k != "alignment"}),
     "state\\['alignment'\\]"),
])
def test_rejects_bad_input_naming_the_field(call, field):
    import torch

    xs, inits, mu = _setup(UNEQUAL)
    eng = StackedGCAClients(inits, CFG)
    before = eng.state_dict()
    with pytest.raises(ValidationError, match=f"^{field}"):
        call(eng, xs, mu, torch.ones(len(COUNTS)))
    after = eng.state_dict()
    assert torch.equal(before["params"], after["params"])  # nothing trained or overwritten


def test_row_adam_is_one_torch_adam_per_row_to_the_bit():
    """Rows stepping different numbers of times (different bias corrections and StepLR counts)
    each follow their own torch.optim.Adam(foreach=True) + StepLR over their two blocks."""
    import torch

    from veilbench.gca.stacked_adam import RowStackedAdam

    gen = torch.Generator().manual_seed(0)
    rows, sizes = 3, [5, 7]
    start = torch.randn(rows * sum(sizes), generator=gen)
    theta, grad = start.clone(), torch.zeros_like(start)
    opt = RowStackedAdam(theta, grad, rows, sizes, 1e-2, step_size=2, gamma=0.5, unit="step", chunk=4)
    blocks = opt.block_views(theta)
    refs = [[b[r].clone().requires_grad_(True) for b in blocks] for r in range(rows)]
    ref_opts = [LocalOptimizer.create(ps, 1e-2, step_size=2, gamma=0.5, unit="step") for ps in refs]
    schedule = [(0, 3), (0, 2), (0, 2), (1, 3), (2, 3), (0, 1), (0, 3), (1, 2)]
    for k, (lo, hi) in enumerate(schedule):
        grad.copy_(torch.randn(grad.shape, generator=gen) * 10.0 ** (k % 3 - 1))
        for r in range(lo, hi):
            for p, g in zip(refs[r], opt.block_views(grad)):
                p.grad = g[r].clone()
            ref_opts[r].step()
        opt.step(lo, hi)
        for r in range(rows):
            assert torch.equal(torch.cat([b[r] for b in blocks]), torch.cat([p.detach() for p in refs[r]])), (k, r)
    assert opt.steps.tolist() == [sum(lo <= r < hi for lo, hi in schedule) for r in range(rows)]
    assert len(set(opt.steps)) == rows
    assert opt.lrs.tolist() == [o.optimizer.param_groups[0]["lr"] for o in ref_opts] != [1e-2] * 3


def test_row_adam_segments_merge_only_whole_blocks():
    import torch

    from veilbench.gca.stacked_adam import RowStackedAdam

    opt = RowStackedAdam(torch.zeros(3 * 12), torch.zeros(3 * 12), 3, [5, 7], 1e-3)
    assert opt.segments(0, 3) == [(0, 36)]
    assert opt.segments(1, 3) == [(5, 15), (22, 36)]
    with pytest.raises(ValidationError, match="row_sizes"):
        RowStackedAdam(torch.zeros(35), torch.zeros(35), 3, [5, 7], 1e-3)


TINY = {"clients": 2, "records_per_client": 60, "recon_epochs": 1, "align_epochs": 1, "n_clusters": 2, "repeats": 1}


@pytest.fixture
def bench(monkeypatch):
    from tests.benchmark_run import ROOT, load_benchmark

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # the script imports its sibling ``measure``
    return load_benchmark("bench_gca_tabular.py")


def test_benchmark_federation_is_the_adult_like_split(bench):
    fed = bench.build_federation(3, 50, seed=1)
    assert [c.shape for c in fed.clients] == [(50, 14)] * 3
    assert set(np.unique(fed.y_test)) == {0, 1}
    train = np.vstack(fed.clients)
    assert np.allclose(train.mean(0), 0.0, atol=1e-5)  # standardised on the training normals
    assert not (fed.x_test[:, None, :] == train[None, :, :]).all(-1).any()  # no training record is tested
    with pytest.raises(ValueError, match="records_per_client"):
        bench.build_federation(20, 10**5, seed=1)


def test_benchmark_times_both_engines_on_one_trajectory(bench, tmp_path, monkeypatch):
    """A shrunk quick run through ``main``: both engines' rows with every phase, the stacked engine
    identical to the sequential one, the quick file written where asked and never citable."""
    monkeypatch.setitem(bench.MODES, "quick", TINY)
    out = tmp_path / "gca_tabular.json"
    report = bench.main(["--quick", "--out", str(out)])
    assert out.is_file() and report["mode"] == "quick" and not report["summary"]["citable"]
    rows = {r["engine"]: r for r in report["rows"]}
    assert set(rows) == {"sequential", "stacked"}
    for row in rows.values():
        assert row["clients"] == 2 and row["client_steps_per_round"] == 2 * 2 * 2  # (1 + 1) epochs x 2 batches
        assert all(row["phase_cpu_seconds"][p] > 0 for p in ("reconstruction", "alignment", "evaluation"))
        assert row["unit_cpu_seconds"] > 0
    assert report["summary"]["identical_to_sequential"] and rows["stacked"]["max_abs_diff_vs_sequential"] == 0.0
    assert rows["sequential"]["training_speedup_vs_sequential"] == 1.0
