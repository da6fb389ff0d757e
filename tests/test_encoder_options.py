"""The ``pca`` encoder's ``standardize`` option and the paper embeddings that use it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from veilbench.config import ConfigError, load_config
from veilbench.embed.encoders import fit_encode
from veilbench.validation import ValidationError

ROOT = Path(__file__).resolve().parents[1]


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    scales = np.array([10.0, 1.0, 1.0, 0.1, 0.1, 0.1])  # unequal feature scales: standardising changes the axes
    x = rng.normal(size=(300, 6)) * scales
    return x[:200], x[200:]


def test_unstandardised_pca_is_the_centred_projection_on_the_covariance_eigenvectors() -> None:
    train, test = _data()
    z_train, z_test = fit_encode("pca", train, test, dim=2, seed=0, standardize=False)
    mu = train.mean(axis=0)
    _, vecs = np.linalg.eigh(np.cov(train, rowvar=False))
    basis = vecs[:, ::-1][:, :2]
    signs = np.sign(np.sum(z_train * ((train - mu) @ basis), axis=0))  # PCA's axes are defined up to sign
    np.testing.assert_allclose(z_train, (train - mu) @ basis * signs, atol=1e-9)
    np.testing.assert_allclose(z_test, (test - mu) @ basis * signs, atol=1e-9)
    standardised, _ = fit_encode("pca", train, test, dim=2, seed=0)
    assert np.abs(z_train).std(axis=0)[0] > 5 * np.abs(standardised).std(axis=0)[0], "the default still standardises"
    default_again, _ = fit_encode("pca", train, test, dim=2, seed=0, standardize=True)
    np.testing.assert_array_equal(default_again, standardised)


@pytest.mark.parametrize(("encoder", "options", "message"), [
    ("pca", {"standardize": "no"}, "must be a bool"),
    ("pca", {"whiten": True}, "unknown option"),
    ("standardize", {"standardize": False}, "unknown option"),
])
def test_bad_encoder_options_name_the_option(tmp_path: Path, encoder: str, options: dict, message: str) -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["embeddings"]["digits-pca"].update(encoder=encoder, options=options)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(ConfigError, match=message):
        load_config(path)
    with pytest.raises(ValidationError, match="options"):
        fit_encode(encoder, *_data(), dim=2, **options)


def test_paper_embeddings_feed_no_standardising_encoder_to_anchor_noise_or_scoreshield() -> None:
    """Spec anchor-noise.md §2, §8 (and ScoreShield's cosine geometry): pixels/255, then a PCA that
    centres but does not standardise, or the raw pixels with the family's own max_dim."""
    cfg = load_config(ROOT / "params.paper.yaml")
    checked = 0
    for name, sweep in cfg.sweeps.items():
        if sweep.family not in ("anchornoise", "scoreshield"):
            continue
        emb = cfg.embeddings[sweep.embedding]
        assert cfg.datasets[emb.dataset].options.get("features") == "unit", name
        assert emb.encoder in ("pca", "raw"), (name, emb.encoder)
        if emb.encoder == "pca":
            assert emb.options.get("standardize") is False, name
        checked += 1
    assert checked >= 3
