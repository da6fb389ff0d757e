"""Encoders for the ``embed`` stage: features → representations (fit on train, apply to test)."""

from veilbench.embed.encoders import ENCODERS, make_encoder
from veilbench.embed.text import encode_texts

__all__ = ["ENCODERS", "encode_texts", "make_encoder"]
