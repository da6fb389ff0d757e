r"""Per-round checkpoints of a long stage, so a killed run resumes where it stopped.

A run of R rounds calls :meth:`RoundCheckpoints.save` with its whole state after each round r
(everything the next round reads: parameters, optimiser moments and step counts, the random
generators' states, the curves so far); a run that finds a checkpoint of round r starts at
round r + 1 from that state. Given the same state, a round computes the same bits, so a run
killed and resumed any number of times ends with the results of an uninterrupted one.

The state is a nested dict of tensors, numpy arrays, numbers, strings, lists and dicts. It is
written with ``torch.save`` and read with ``torch.load(weights_only=True)`` (no code runs on
load); numpy arrays are stored as tensors and come back as numpy arrays. Each save replaces
``state.pt`` atomically (a temporary in the same folder, then ``os.replace``), then its
manifest ``state.json`` (the round and the SHA-256 of ``state.pt``). A checkpoint whose bytes do
not match its manifest — torn, edited or from another writer — is not used: :meth:`load` returns
None and the run starts from round 1.

The folder is the caller's: one per cell, stage input key and seed (``tasks.sweep``), so a
changed cell never resumes another cell's state.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from veilbench.validation import ValidationError

STATE, MANIFEST = "state.pt", "state.json"
_NUMPY = "__numpy__"


def _pack(obj: Any) -> Any:
    """``obj`` with every numpy array (and numpy scalar) replaced by a loadable equivalent."""
    import torch

    if isinstance(obj, np.ndarray):
        return {_NUMPY: torch.from_numpy(np.ascontiguousarray(obj))}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_pack(v) for v in obj]
    return obj


def _unpack(obj: Any) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {_NUMPY}:
            return obj[_NUMPY].numpy()
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack(v) for v in obj]
    return obj


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _replace_atomically(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class RoundCheckpoints:
    """The latest round's state of one run in ``directory`` (module doc)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def save(self, round_: int, state: dict[str, Any]) -> None:
        """Replace the checkpoint by ``state`` after round ``round_`` (≥ 1)."""
        import torch

        if int(round_) < 1:
            raise ValidationError(f"round_: must be ≥ 1, got {round_}")
        self.directory.mkdir(parents=True, exist_ok=True)
        payload = {"round": int(round_), "state": _pack(state)}
        _replace_atomically(self.directory / STATE, lambda f: torch.save(payload, f))
        manifest = json.dumps({"round": int(round_), "sha256": _sha256(self.directory / STATE)}).encode()
        _replace_atomically(self.directory / MANIFEST, lambda f: f.write(manifest))

    def load(self) -> tuple[int, dict[str, Any]] | None:
        """``(round, state)`` of the latest checkpoint, or None when there is none or it does not match
        its manifest."""
        import torch

        state_path, manifest_path = self.directory / STATE, self.directory / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text())
            if _sha256(state_path) != manifest["sha256"]:
                return None
            payload = torch.load(state_path, weights_only=True)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return None
        if payload.get("round") != manifest.get("round"):
            return None
        return int(payload["round"]), _unpack(payload["state"])

    def clear(self) -> None:
        """Remove the checkpoint (the run finished and its outputs are written)."""
        for name in (STATE, MANIFEST):
            (self.directory / name).unlink(missing_ok=True)
        try:
            self.directory.rmdir()
        except OSError:
            pass
