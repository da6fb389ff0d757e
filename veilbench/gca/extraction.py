r"""Server-side training-data extraction attack and its metrics (spec §6).

**Input optimisation** (§6.1): for a reconstruction map T and S starts :math:`x^{(0)}_s`, minimise
:math:`r(x) = \|x - T(x)\|_2^2` with Adam (lr 1e-2, ≤ ``max_steps`` steps) independently per
start, keeping the best state per start, stopping a start after ``patience`` consecutive steps
whose relative improvement :math:`(r_{best} - r_t)/|r_{best}|` is below ``min_rel_improvement``;
optional projection onto a box (vision: [−1, 1]). The output is :math:`T(x^*_s)`. Starts are
batched in one tensor (T acts row-wise, the loss is a sum over starts, Adam is elementwise);
stopped starts are frozen by restoring their values after every step (spec §11.14).

**GCA surrogate** (§6.3): a fresh AE of the known architecture trained on the victim's uploaded
codes only with :math:`\frac{1}{M}\sum_n \|z_n - \tilde E(\tilde D(z_n))\|_2^2` (Adam 1e-2,
batch 50, 10 % validation, ≤ 1,000 epochs, early stopping with patience 20 and min relative
improvement 1e-4, best state restored); the attacked map is :math:`\tilde T = \tilde D \circ \tilde E`.
Its initial weights come from stream ``"gca.surrogate-init"`` of the seed, its validation split
and mini-batch order from stream ``"gca.surrogate"`` (:func:`veilbench.random.stream`).

**Metrics** (§6.4), with MSE = mean over coordinates, targets 𝒯 (victim shard), outputs ℛ and
reference bank ℋ (held-out normals): :math:`r^*(x) = \arg\min_{r \in ℛ} MSE(x, r)`,
:math:`h^*(x) = \arg\min_{h \in ℋ} MSE(x, h)`,
:math:`NTMSE = \overline{MSE(x, r^*)} / \overline{MSE(x, h^*)}`,
:math:`\Delta\cos = \overline{\cos(x, r^*)} - \overline{\cos(x, h^*)}` (cosine on the
MSE-selected output). Higher NTMSE and lower Δcos mean less leakage.

**Controls and advantage** (after Anonymeter, Giomi et al. 2023): a control attacker has the same
side knowledge as the main one but not the release, and outputs a data-free bank
(:func:`trivial_outputs`: all zeros, Gaussian noise, the training mean, random held-out records).
With :math:`v_{main}` the main attack's value, :math:`v_{ctl}` the best control's (lowest NTMSE,
highest Δcos) and :math:`v_{perf}` a perfect attack's (outputs = targets: NTMSE 0,
:math:`\Delta\cos = 1 - \overline{\cos(x, h^*)}`),

.. math:: A = \frac{v_{main} - v_{ctl}}{v_{perf} - v_{ctl}},

which for NTMSE is :math:`1 - NTMSE_{main}/NTMSE_{ctl}`. :math:`A = 1`: perfect reconstruction;
:math:`A = 0`: no better than the best control; :math:`A < 0`: worse than publishing nothing was
needed for. Larger means the attacker does better (:func:`advantage`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veilbench.linalg.distances import sq_distances
from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_in_range


@dataclass(frozen=True)
class InversionResult:
    """Best inputs ``x_star`` (S, d), outputs ``T(x_star)`` (S, d), residuals (S,), steps per start (S,)."""

    x_star: np.ndarray
    outputs: np.ndarray
    residuals: np.ndarray
    steps: np.ndarray


def invert_reconstruction_map(
    transform,
    starts: np.ndarray,
    lr: float = 1e-2,
    max_steps: int = 1000,
    patience: int = 10,
    min_rel_improvement: float = 1e-3,
    bounds: tuple[float, float] | None = None,
) -> InversionResult:
    """Minimise :math:`\\|x - T(x)\\|^2` from every row of ``starts`` ``(S, d)`` (see module doc)."""
    import torch

    x0 = check_array(starts, "starts", ndim=2)
    lr = check_in_range(lr, "lr", 0.0, None, low_inclusive=False)
    if int(max_steps) < 1 or int(patience) < 1:
        raise ValidationError(f"max_steps, patience: must be ≥ 1, got {max_steps}, {patience}")
    for p in transform.parameters():
        p.requires_grad_(False)
    transform.eval()
    x = torch.tensor(x0, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.Adam([x], lr=lr)
    n = x.shape[0]
    best_x = x.detach().clone()
    best_r = torch.full((n,), float("inf"), dtype=torch.float64)
    stall = torch.zeros(n, dtype=torch.int64)
    active = torch.ones(n, dtype=torch.bool)
    steps = torch.zeros(n, dtype=torch.int64)
    for _ in range(int(max_steps)):
        r = ((x - transform(x)) ** 2).sum(1)
        r64 = r.detach().double()
        rel = torch.where(torch.isinf(best_r), torch.full_like(r64, float("inf")), (best_r - r64) / best_r.abs())
        improved = r64 < best_r
        best_x[improved & active] = x.detach()[improved & active]
        slow = active & ~(rel >= min_rel_improvement)
        stall = torch.where(slow, stall + 1, torch.where(active, torch.zeros_like(stall), stall))
        best_r = torch.where(improved & active, r64, best_r)
        active = active & (stall < patience)
        if not bool(active.any()):
            break
        frozen = x.detach()[~active].clone()
        opt.zero_grad(set_to_none=True)
        r.sum().backward()
        opt.step()
        with torch.no_grad():
            x[~active] = frozen
            if bounds is not None:
                x.clamp_(bounds[0], bounds[1])
        steps += active.long()
    with torch.no_grad():
        r = ((x - transform(x)) ** 2).sum(1).double()
        better = active & (r < best_r)
        best_x[better] = x[better]
        best_r = torch.where(better, r, best_r)
        outputs = transform(best_x)
    return InversionResult(best_x.numpy().copy(), outputs.numpy().copy(), best_r.numpy(), steps.numpy())


def train_surrogate(
    codes: np.ndarray,
    spec,
    seed: int,
    lr: float = 1e-2,
    batch_size: int = 50,
    val_fraction: float = 0.1,
    max_epochs: int = 1000,
    patience: int = 20,
    min_rel_improvement: float = 1e-4,
):
    """Fit a fresh ``spec.build(rng)`` AE so that :math:`\\tilde E(\\tilde D(z)) \\approx z` on ``codes`` ``(M, D_z)``.

    Returns the module; its ``forward`` is :math:`\\tilde T = \\tilde D \\circ \\tilde E`.
    """
    import torch

    from veilbench.gca.training import minibatches

    z = check_array(codes, "codes", ndim=2, min_rows=1, dtype=np.float32)
    val_fraction = check_in_range(val_fraction, "val_fraction", 0.0, 1.0, high_inclusive=False)
    rng = stream(seed, "gca.surrogate")
    model = spec.build(stream(seed, "gca.surrogate-init"))
    if z.shape[1] != model.latent_dim:
        raise ValidationError(f"codes: expected {model.latent_dim} columns (latent size), got {z.shape[1]}")
    perm = rng.permutation(z.shape[0])
    n_val = int(round(val_fraction * z.shape[0])) if z.shape[0] >= 2 else 0
    n_val = min(max(n_val, 1 if val_fraction > 0 and z.shape[0] >= 2 else 0), z.shape[0] - 1)
    z_val = torch.from_numpy(z[perm[:n_val]]) if n_val else None
    z_tr = torch.from_numpy(z[perm[n_val:]])
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def loss_of(batch):
        return ((batch - model.encode(model.decode(batch))) ** 2).sum(1).mean()

    best, best_state, stall = float("inf"), None, 0
    for _ in range(int(max_epochs)):
        model.train()
        for idx in minibatches(z_tr.shape[0], batch_size, rng):
            opt.zero_grad(set_to_none=True)
            loss_of(z_tr[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            val = float(loss_of(z_val if z_val is not None else z_tr))
        if best == float("inf") or (best - val) / abs(best) >= min_rel_improvement:
            best, stall = val, 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            stall += 1
            if stall >= patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    return model


def _mse_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return sq_distances(a, b) / a.shape[1]


def _nearest(targets: np.ndarray, bank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mse = _mse_matrix(targets, bank)
    j = mse.argmin(1)
    chosen = bank[j]
    cos = (targets * chosen).sum(1) / np.maximum(
        np.linalg.norm(targets, axis=1) * np.linalg.norm(chosen, axis=1), 1e-12
    )
    return mse[np.arange(targets.shape[0]), j], cos


def ntmse_delta_cos(targets: np.ndarray, outputs: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """``(NTMSE, Δcos)`` of attack ``outputs`` ``(S, d)`` on ``targets`` ``(n, d)``, reference ``(H, d)``."""
    t = check_array(targets, "targets", ndim=2)
    o = check_array(outputs, "outputs", ndim=2)
    h = check_array(reference, "reference", ndim=2)
    for name, arr in (("outputs", o), ("reference", h)):
        if arr.shape[1] != t.shape[1]:
            raise ValidationError(f"{name}: expected {t.shape[1]} columns like targets, got {arr.shape[1]}")
    mse_r, cos_r = _nearest(t, o)
    mse_h, cos_h = _nearest(t, h)
    if mse_h.mean() == 0:
        raise ValidationError("reference: every target is in the reference bank (zero held-out MSE); NTMSE undefined")
    return float(mse_r.mean() / mse_h.mean()), float(cos_r.mean() - cos_h.mean())


def perfect_values(targets: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """``(NTMSE, Δcos)`` of a perfect attack (outputs = ``targets``): ``(0, 1 − mean cos(x, h*))``."""
    return ntmse_delta_cos(targets, targets, reference)


def advantage(main: float, control: float, perfect: float) -> float:
    """:math:`A = (v_{main} - v_{ctl}) / (v_{perf} - v_{ctl})` (module doc); NaN when the control is
    already perfect (:math:`v_{perf} = v_{ctl}`)."""
    span = float(perfect) - float(control)
    return float((float(main) - float(control)) / span) if span != 0 else float("nan")


def trivial_outputs(
    kind: str, n_outputs: int, train_mean: np.ndarray, heldout: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Output banks of attacks that learn nothing, ``(n_outputs, d)``.

    ``zeros``: all-zero rows; ``noise``: :math:`N(0, I)` rows; ``mean``: the training mean ``(d,)``
    repeated; ``heldout``: rows drawn at random (with replacement) from ``heldout`` ``(H, d)``.
    """
    mean = check_array(train_mean, "train_mean", ndim=1)
    if kind == "zeros":
        return np.zeros((n_outputs, mean.shape[0]))
    if kind == "noise":
        return rng.standard_normal((n_outputs, mean.shape[0]))
    if kind == "mean":
        return np.repeat(mean[None, :], n_outputs, axis=0)
    if kind == "heldout":
        pool = check_array(heldout, "heldout", ndim=2)
        return pool[rng.integers(0, pool.shape[0], size=n_outputs)]
    raise ValidationError(f"kind: must be one of ('zeros', 'noise', 'mean', 'heldout'), got {kind!r}")
