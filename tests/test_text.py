"""Text data: the embedded paraphrase corpus, user text files, and the offline sentence encoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from veilbench.datasets import load_dataset, prepare_dataset
from veilbench.validation import ValidationError


def test_paraphrase_corpus_is_an_embedded_text_dataset() -> None:
    ds = load_dataset("paraphrases")
    assert ds.texts is not None and ds.texts.shape == (48,) and ds.X.shape == (48, 2)
    assert np.unique(ds.y).size == 12
    assert ds.X[0, 1] == len(str(ds.texts[0]).split())


def test_prepare_keeps_texts_aligned_with_labels() -> None:
    ds = load_dataset("paraphrases")
    prep = prepare_dataset(ds, test_size=0.25, seed=3)
    text_to_label = dict(zip(ds.texts.tolist(), ds.y.tolist(), strict=True))
    for texts, labels in ((prep.T_train, prep.y_train), (prep.T_test, prep.y_test)):
        assert [text_to_label[t] for t in texts.tolist()] == labels.tolist()
    assert set(prep.arrays()) >= {"T_train", "T_test"} and prep.T_train.dtype.kind == "U"


def test_user_text_file(tmp_path: Path) -> None:
    pd.DataFrame({"sentence": ["a cat sleeps", "dogs bark loudly", "the cat naps", "a dog barks"],
                  "topic": ["cat", "dog", "cat", "dog"]}).to_csv(tmp_path / "t.csv", index=False)
    ds = load_dataset("text_file", path=str(tmp_path / "t.csv"), text_column="sentence", label_column="topic")
    assert ds.texts.tolist()[1] == "dogs bark loudly" and ds.y.tolist() == [0, 1, 0, 1]
    with pytest.raises(ValidationError, match="text_column: 'text' is not a column"):
        load_dataset("text_file", path=str(tmp_path / "t.csv"), label_column="topic")
    pd.DataFrame({"text": ["ok", ""], "label": [0, 1]}).to_csv(tmp_path / "empty_text.csv", index=False)
    with pytest.raises(ValidationError, match="non-empty text"):
        load_dataset("text_file", path=str(tmp_path / "empty_text.csv"))


def test_sentence_encoder_needs_a_text_dataset(workdir: Path, mlflow_store: Path) -> None:
    from tasks.embed import embed
    from tasks.prepare import prepare

    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["embeddings"]["digits-text"] = {"dataset": "digits", "encoder": "sentence"}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    prepare("digits", root=workdir)
    with pytest.raises(ValidationError, match="embeddings.digits-text.encoder: 'sentence' needs a text dataset"):
        embed("digits-text", root=workdir)


@pytest.mark.slow
def test_sentence_embeddings_of_paraphrases_group_by_meaning(workdir: Path, mlflow_store: Path) -> None:
    """End to end through prepare and embed: paraphrases are closer to each other than to others."""
    from tasks.embed import embed
    from tasks.prepare import prepare
    from veilbench.io import read_bundle

    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["datasets"]["para"] = {"source": "paraphrases", "test_size": 0.25}
    params["embeddings"]["para-minilm"] = {"dataset": "para", "encoder": "sentence"}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    prepare("para", root=workdir)
    z, _ = read_bundle(embed("para-minilm", root=workdir))
    prep, _ = read_bundle(workdir / "data/prepare/para")
    Z, y = z["Z_train"], prep["y_train"]
    assert Z.shape == (36, 384) and np.allclose(np.linalg.norm(Z, axis=1), 1.0)
    sims = Z @ Z.T
    same = (y[:, None] == y[None, :]) & ~np.eye(len(y), dtype=bool)
    assert sims[same].mean() > sims[~same & ~np.eye(len(y), dtype=bool)].mean() + 0.2
