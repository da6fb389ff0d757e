"""Per-party obfuscation functions (spec §1.3)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.dc.obfuscation import draw_umap_settings, make_obfuscator, obfuscate_parties, party_seed


@pytest.fixture(scope="module")
def parties():
    rng = np.random.default_rng(0)
    return [rng.normal(size=(40, 8)) for _ in range(3)], rng.normal(size=(25, 8))


def test_each_party_fits_its_own_pca(parties):
    data, shared = parties
    own, others, _ = obfuscate_parties("pca", 3, data, [shared], seed=1)
    for x, x_ir, (s_ir,) in zip(data, own, others, strict=True):
        centred = x - x.mean(0)
        axes = np.linalg.svd(centred, full_matrices=False)[2][:3]
        np.testing.assert_allclose(np.abs(x_ir), np.abs(centred @ axes.T), atol=1e-8)
        np.testing.assert_allclose(np.abs(s_ir), np.abs((shared - x.mean(0)) @ axes.T), atol=1e-8)


def test_random_orthogonal_is_an_isometry_onto_its_image_and_differs_per_party(parties):
    data, shared = parties
    own, others, _ = obfuscate_parties("orthogonal", 8, data, [shared], seed=2)
    d_orig = np.linalg.norm(shared[:, None] - shared[None], axis=-1)
    for (s_ir,) in others:
        np.testing.assert_allclose(np.linalg.norm(s_ir[:, None] - s_ir[None], axis=-1), d_orig, atol=1e-10)
    assert not np.allclose(others[0][0], others[1][0])


def test_kernel_pca_is_finite_and_seeded(parties):
    data, shared = parties
    a = obfuscate_parties("kpca", 4, data, [shared], seed=3)[1]
    b = obfuscate_parties("kpca", 4, data, [shared], seed=3)[1]
    assert np.all(np.isfinite(a[0][0])) and a[0][0].shape == (25, 4)
    np.testing.assert_allclose(a[0][0], b[0][0])


def test_umap_settings_are_in_the_paper_ranges_and_per_party():
    settings = [draw_umap_settings(party_seed(7, k)) for k in range(30)]
    assert {s["metric"] for s in settings} <= {"correlation", "cosine", "euclidean"}
    assert all(2 <= s["n_neighbors"] <= 7 and 0.0 <= s["min_dist"] < 0.8 for s in settings)
    assert len({(s["metric"], s["n_neighbors"]) for s in settings}) > 3


@pytest.mark.slow
def test_umap_obfuscator_transforms_new_rows():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 6))
    f = make_obfuscator("umap", 2, 60, 6, seed=1)
    out = f.fit(x).transform(rng.normal(size=(5, 6)))
    assert out.shape == (5, 2) and np.all(np.isfinite(out))


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["euclidean", "cosine", "correlation"])
def test_precomputed_umap_equals_umap_with_the_metric(metric):
    """The party-side UMAP runs on precomputed distances; its embedding and transforms equal
    umap.UMAP(metric=...)'s bit for bit (fails when a UMAP release changes either path)."""
    import umap
    from sklearn.datasets import load_digits

    from veilbench.dc.obfuscation import PrecomputedUMAP

    x = load_digits().data / 16.0
    own, new = x[:100], x[100:700]
    settings = {"n_components": 4, "n_neighbors": 5, "min_dist": 0.3, "random_state": 11}
    ref = umap.UMAP(metric=metric, n_jobs=1, **settings)
    ours = PrecomputedUMAP(metric=metric, **settings)
    np.testing.assert_array_equal(ours.fit_transform(own), ref.fit_transform(own))
    np.testing.assert_array_equal(ours.transform(new), ref.transform(new))


def test_umap_parties_use_the_precomputed_path_below_umaps_small_data_size():
    from veilbench.dc.obfuscation import PrecomputedUMAP

    f = make_obfuscator("umap", 4, 100, 8, seed=party_seed(3, 1))
    assert isinstance(f, PrecomputedUMAP)
    assert {"metric": f.metric, "n_neighbors": f.n_neighbors, "min_dist": f.min_dist} == draw_umap_settings(party_seed(3, 1))
    assert (f.n_components, f.random_state) == (4, party_seed(3, 1))
    assert not isinstance(make_obfuscator("umap", 4, 5000, 8, seed=1), PrecomputedUMAP)
