"""Cross-family attack and utility (veilbench.crossfamily): exact recovery, chance, consistency errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veilbench.crossfamily import (
    ARRAYS,
    CrossFamilyArrays,
    LinkageArrays,
    UtilityArrays,
    control_linkage,
    crossfamily_metrics,
    leaked_pair_linkage,
    representation_utility,
)
from veilbench.validation import ValidationError

N, P, GROUPS = 300, 6, 3


def _records(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(N, P))


def _linear_release(pool: np.ndarray, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each group g releases r = x A_g + b_g with its own invertible A_g (P × P); rows shuffled."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(pool.shape[0])
    group = np.arange(pool.shape[0]) % GROUPS
    rep = np.empty_like(pool)
    for g in range(GROUPS):
        a = rng.normal(size=(P, P)) + 3 * np.eye(P)
        rows = group == g
        rep[rows] = pool[order[rows]] @ a + rng.normal(size=P)
    return rep, group, order


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    pool = _records(seed)
    rep, group, index = _linear_release(pool, seed + 1)
    y = (pool[:, 0] > 0).astype(np.int64)
    return {"xfam_attack_rep": rep, "xfam_attack_group": group, "xfam_attack_index": index, "xfam_pool": pool,
            "xfam_utility_rep_train": pool[:200], "xfam_utility_y_train": y[:200],
            "xfam_utility_rep_test": pool[200:], "xfam_utility_y_test": y[200:]}


def _metrics(arrays: dict[str, object], seed: int, **options: float) -> dict[str, float]:
    """:func:`crossfamily_metrics` of the view saved under the stored names ``arrays`` (one stage)."""
    return crossfamily_metrics(CrossFamilyArrays.from_stages([arrays]), seed, **options)


def test_invertible_linear_map_per_group_is_fully_linked() -> None:
    pool = _records()
    rep, group, index = _linear_release(pool)
    res = leaked_pair_linkage(rep, group, index, pool, leak_fraction=0.1, seed=0)
    assert res.rate == 1.0
    assert res.relative_error < 1e-2
    assert res.leaked_per_group == {0: 10, 1: 10, 2: 10}
    assert res.n_leaked == 30 and res.n_attacked == N - 30
    assert res.chance == pytest.approx(1 / N)


def test_one_decoder_for_all_groups_would_not_suffice() -> None:
    """Groups use different maps: relabelling every row as one group must break the attack."""
    pool = _records()
    rep, group, index = _linear_release(pool)
    pooled = leaked_pair_linkage(rep, np.zeros_like(group), index, pool, seed=0)
    assert pooled.rate < 0.5
    assert pooled.relative_error > 0.1


def test_pure_noise_representation_links_at_chance() -> None:
    pool = _records()
    rng = np.random.default_rng(5)
    rep = rng.normal(size=(N, 4))
    res = leaked_pair_linkage(rep, np.arange(N) % GROUPS, np.arange(N), pool, seed=0)
    # chance is 1/300; 270 attacked rows give ~1 hit by luck, a leak would give many
    assert res.rate * res.n_attacked <= 6
    assert res.relative_error > 0.95


def test_chance_counts_distinct_pool_records() -> None:
    pool = _records()
    pool[1] = pool[0]
    pool[2] = pool[0]
    rep, group, index = _linear_release(pool)
    res = leaked_pair_linkage(rep, group, index, pool, seed=0)
    assert res.chance == pytest.approx(1 / (N - 2))
    # the duplicated record can never be linked uniquely
    assert res.rate <= 1 - 2 / res.n_attacked


def test_small_groups_still_work_and_report_their_leaked_rows() -> None:
    pool = _records()[:40]
    rep = pool @ np.random.default_rng(2).normal(size=(P, P))
    group = np.array([0] * 33 + [1] * 5 + [2] + [3])  # groups 2 and 3 hold one record each
    res = leaked_pair_linkage(rep, group, np.arange(40), pool, seed=0)
    # at least P + 1 pairs (an affine map of a P-dim representation), at most n_g − 1
    l0, l1 = min(max(3, P + 1), 32), min(max(0, P + 1), 4)
    assert res.leaked_per_group == {0: l0, 1: l1, 2: 1, 3: 1}
    assert res.n_attacked == (33 - l0) + (5 - l1)
    assert 0.0 <= res.rate <= 1.0 and np.isfinite(res.relative_error)


def test_all_copies_of_a_leaked_record_are_leaked() -> None:
    """A record uploaded twice (e.g. in two rounds) is either known or attacked, never both."""
    pool = _records()[:100]
    rep, group, index = np.vstack([pool, pool]), np.zeros(200, dtype=np.int64), np.tile(np.arange(100), 2)
    res = leaked_pair_linkage(rep, group, index, pool, seed=3)
    assert res.n_leaked == 2 * 10


def test_leaked_pair_linkage_is_deterministic_and_seeded() -> None:
    pool = _records()
    rep = pool[:, :3] + np.random.default_rng(9).normal(scale=0.3, size=(N, 3))
    group, index = np.arange(N) % GROUPS, np.arange(N)
    a = leaked_pair_linkage(rep, group, index, pool, seed=0)
    b = leaked_pair_linkage(rep, group, index, pool, seed=0)
    c = leaked_pair_linkage(rep, group, index, pool, seed=1)
    assert a == b
    assert (a.rate, a.relative_error) != (c.rate, c.relative_error)


def test_utility_separable_vs_shuffled_labels() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=1000)
    rep = rng.normal(size=(1000, 5))
    rep[:, 0] += 6.0 * y
    assert representation_utility(rep[:500], y[:500], rep[500:], y[500:], seed=0) > 0.97
    shuffled = rng.permutation(y)  # labels independent of the representation
    acc = representation_utility(rep[:500], shuffled[:500], rep[500:], shuffled[500:], seed=0)
    assert abs(acc - 0.5) < 0.08


def test_crossfamily_metrics_keys_values_and_determinism() -> None:
    arrays = _arrays()
    m = _metrics(arrays, seed=0)
    assert set(m) == {"xfam_linkage_rate", "xfam_linkage_chance", "xfam_relative_error", "xfam_leaked_pairs",
                      "xfam_attacked_rows", "xfam_utility_balanced_accuracy", "xfam_linkage_control",
                      "xfam_linkage_advantage", "xfam_relative_error_control", "xfam_relative_error_advantage"}
    assert m["xfam_linkage_rate"] == 1.0
    assert m["xfam_leaked_pairs"] == 30.0
    assert m["xfam_attacked_rows"] == arrays["xfam_attack_rep"].shape[0] - 30
    assert m["xfam_utility_balanced_accuracy"] > 0.9
    assert _metrics(arrays, seed=0) == m


def test_crossfamily_metrics_without_arrays_is_empty() -> None:
    assert _metrics({"Z_train": np.zeros((3, 2))}, seed=0) == {}


def _bad(name: str, value: object) -> dict[str, object]:
    arrays: dict[str, object] = dict(_arrays())
    if value is None:
        del arrays[name]
    else:
        arrays[name] = value
    return arrays


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("xfam_pool", None, "xfam_pool: missing"),
        ("xfam_utility_y_test", None, "xfam_utility_y_test: missing"),
        ("xfam_attack_group", np.zeros(N - 1, dtype=np.int64), r"xfam_attack_group: expected shape \(300,\)"),
        ("xfam_attack_index", np.full(N, N, dtype=np.int64), r"xfam_attack_index: entries must lie in \[0, 299\]"),
        ("xfam_attack_index", np.arange(N) - 1, "xfam_attack_index: entries must lie"),
        ("xfam_attack_index", np.arange(N) + 0.5, "xfam_attack_index: entries must be whole numbers"),
        ("xfam_attack_rep", np.full((N, P), np.nan), "xfam_attack_rep: contains"),
        ("xfam_pool", np.zeros(N), "xfam_pool: expected a 2-d array"),
        ("xfam_utility_rep_test", np.zeros((100, P + 1)), "xfam_utility_rep_test: expected 6 columns"),
        ("xfam_utility_y_train", np.zeros(199, dtype=np.int64), "xfam_utility_y_train: expected 200 labels"),
        ("xfam_utility_y_train", np.zeros(200, dtype=np.int64), "xfam_utility_y_train: need at least 2 classes"),
    ],
)
def test_inconsistent_arrays_name_the_array(name: str, value: object, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        _metrics(_bad(name, value), seed=0)


def test_pool_dimension_mismatch_and_bad_leak_fraction() -> None:
    arrays = _arrays()
    with pytest.raises(ValidationError, match="leak_fraction: must lie in"):
        _metrics(arrays, seed=0, leak_fraction=1.0)
    with pytest.raises(ValidationError, match="xfam_attack_rep: no row left to attack"):
        leaked_pair_linkage(np.zeros((3, 2)), np.arange(3), np.arange(3), np.eye(3), seed=0)


def test_protocol_names_all_eight_arrays() -> None:
    assert len(ARRAYS) == 8 and all(a.startswith("xfam_") for a in ARRAYS)


def test_the_typed_view_round_trips_through_its_stored_names_from_two_stages() -> None:
    """A family may emit the attack side in one stage and the utility side in the next (anchor
    noise): saved under the stored names and read back from both stages, it is the same view and
    gives the same metrics as the view built directly."""
    arrays = _arrays()
    attack = LinkageArrays(*(arrays[n] for n in ("xfam_attack_rep", "xfam_attack_group", "xfam_attack_index",
                                                  "xfam_pool")))
    utility = UtilityArrays(*(arrays[n] for n in ("xfam_utility_rep_train", "xfam_utility_y_train",
                                                   "xfam_utility_rep_test", "xfam_utility_y_test")))
    release, integrate = CrossFamilyArrays(attack=attack).arrays(), CrossFamilyArrays(utility=utility).arrays()
    assert set(release) | set(integrate) == set(ARRAYS) and not set(release) & set(integrate)
    view = CrossFamilyArrays.from_stages([{"other": np.zeros(2), **release}, integrate])
    assert all(np.array_equal(view.arrays()[n], arrays[n]) for n in ARRAYS)
    assert crossfamily_metrics(view, seed=0) == crossfamily_metrics(CrossFamilyArrays(attack, utility), seed=0)
    assert crossfamily_metrics(None, seed=0) == {}
    with pytest.raises(ValidationError, match="^xfam_utility_rep_train: missing"):
        crossfamily_metrics(CrossFamilyArrays(attack=attack), seed=0)
    with pytest.raises(ValidationError, match="^xfam_utility_rep_train: missing"):
        CrossFamilyArrays.from_stages([release])


def test_a_leak_that_leaves_one_record_gives_an_undefined_error_not_a_crash() -> None:
    pool = _records()[:8]
    rep = pool @ np.random.default_rng(3).normal(size=(P, P))  # k + 1 = 7 of 8 records leak
    res = leaked_pair_linkage(rep, np.zeros(8, dtype=np.int64), np.arange(8), pool, seed=0)
    assert res.n_attacked == 1 and math.isnan(res.relative_error) and res.rate in (0.0, 1.0)


def test_control_attack_never_sees_the_release() -> None:
    """Replacing the release by noise (same shape) changes the main attack, never the control."""
    arrays = _arrays()
    noised = dict(arrays, xfam_attack_rep=np.random.default_rng(7).normal(size=arrays["xfam_attack_rep"].shape))
    a, b = _metrics(arrays, seed=0), _metrics(noised, seed=0)
    assert a["xfam_linkage_rate"] != b["xfam_linkage_rate"]
    for key in ("xfam_linkage_control", "xfam_relative_error_control"):
        assert a[key] == b[key]


def test_control_reconstructs_each_group_as_its_leaked_mean() -> None:
    pool = _records()
    rep, group, index = _linear_release(pool)
    ctrl = control_linkage(group, index, pool, rep.shape[1], seed=0)
    main = leaked_pair_linkage(rep, group, index, pool, seed=0)
    assert (ctrl.n_leaked, ctrl.leaked_per_group) == (main.n_leaked, main.leaked_per_group)  # same side knowledge
    # a constant guess per group links at most one record per group
    assert ctrl.rate * ctrl.n_attacked <= GROUPS
    # its error is that of the leaked means: about 1 (slightly above: the leaked mean is not the attacked mean)
    assert 0.98 < ctrl.relative_error < 1.2


def test_advantage_is_one_for_an_exact_attack_and_near_zero_for_noise() -> None:
    m = _metrics(_arrays(), seed=0)
    assert m["xfam_linkage_rate"] == 1.0 and m["xfam_linkage_advantage"] == 1.0
    assert m["xfam_relative_error_advantage"] > 0.99
    arrays = _arrays()
    arrays["xfam_attack_rep"] = np.random.default_rng(3).normal(size=arrays["xfam_attack_rep"].shape)
    noise = _metrics(arrays, seed=0)
    assert abs(noise["xfam_linkage_advantage"]) < 0.03
    assert abs(noise["xfam_relative_error_advantage"]) < 0.1


def test_control_linkage_rejects_a_zero_width_release() -> None:
    with pytest.raises(ValidationError, match="rep_dim: must be ≥ 1"):
        control_linkage(np.zeros(4, dtype=np.int64), np.arange(4), np.eye(4), 0)
