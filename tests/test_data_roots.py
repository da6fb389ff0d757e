"""Where public data sets are looked for: the library searches only the folders its caller names
(``data_roots``); the stages name ``$DVC_ROOT``, ``$VEILBENCH_ROOT`` and the CWD
(:func:`tasks.paths.data_roots`), read at the pipeline's edge."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from veilbench.datasets import load_dataset
from veilbench.validation import ValidationError


def _mnist_under(root: Path) -> Path:
    (root / "data" / "raw").mkdir(parents=True)
    rng = np.random.default_rng(0)
    np.savez(root / "data" / "raw" / "mnist.npz", X=rng.random((20, 784)), y=np.arange(20) % 10)
    return root


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DVC root holding data/raw/mnist.npz named by $DVC_ROOT, and an empty CWD."""
    root = _mnist_under(tmp_path / "repo")
    monkeypatch.setenv("DVC_ROOT", str(root))
    monkeypatch.delenv("VEILBENCH_ROOT", raising=False)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return root


def test_the_library_reads_no_root_from_the_environment(elsewhere: Path) -> None:
    with pytest.raises(ValidationError, match="mnist: no local copy found"):
        load_dataset("mnist")
    assert load_dataset("mnist", data_roots=[elsewhere]).meta["source"] == str(elsewhere / "data" / "raw" / "mnist.npz")


def test_the_stages_name_the_environment_roots_in_order(elsewhere: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.paths import data_roots
    from tasks.prepare import loader_options

    monkeypatch.setenv("VEILBENCH_ROOT", str(tmp_path / "cwd"))
    assert data_roots() == [elsewhere.resolve(), (tmp_path / "cwd").resolve()], "deduplicated, in order"
    cfg = SimpleNamespace(seed=0, datasets={"m": SimpleNamespace(source="mnist", options={}),
                                            "d": SimpleNamespace(source="digits", options={})})
    _, options = loader_options(cfg, "m", elsewhere)
    assert options["data_roots"] == data_roots()
    assert load_dataset("mnist", **options).X.shape == (20, 784)
    assert "data_roots" not in loader_options(cfg, "d", elsewhere)[1], "only the public loaders search data/raw"


def test_data_roots_is_not_a_params_option() -> None:
    from veilbench.config import DatasetConfig

    with pytest.raises(ValueError, match="unknown option"):
        DatasetConfig(source="mnist", options={"data_roots": ["/elsewhere"]})
