r"""Named, independent random streams derived from a run seed.

A stage receives one integer ``seed``; every random choice it makes (initial weights, mini-batch
order, upload samples, noise, attack starts) draws from its own *named* sub-stream

.. math:: \text{stream}(s, \text{name}) = \text{PCG64}\big(\text{SeedSequence}(s_0,\ \text{spawn\_key} = (h(\text{name}), s_1, \dots))\big),

where :math:`h` is the first four 32-bit words of SHA-256 of the UTF-8 name. Streams with different
names (or different seeds) are statistically independent (NumPy's ``SeedSequence`` hashing,
O'Neill 2015 / NumPy NEP 19), adding a new named stream never shifts an existing one, and no
process-global generator is read or written, so concurrent stages in one process stay
reproducible.

``seed`` may be a non-negative integer or a sequence of them (e.g. ``(seed, client)`` for
per-client streams).

>>> a, b = stream(7, "init"), stream(7, "init")
>>> bool(a.integers(1 << 30) == b.integers(1 << 30))
True
>>> bool(stream(7, "init").integers(1 << 30) == stream(7, "batches").integers(1 << 30))
False
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from veilbench.validation import ValidationError

SeedLike = int | np.integer | Sequence[int]


def _words(seed: SeedLike) -> list[int]:
    words = [seed] if isinstance(seed, (int, np.integer)) else list(seed) if isinstance(seed, (list, tuple)) else []
    if not words or any(not isinstance(w, (int, np.integer)) or isinstance(w, bool) or w < 0 for w in words):
        raise ValidationError(f"seed: must be a non-negative integer or a non-empty sequence of them, got {seed!r}")
    return [int(w) for w in words]


def name_key(name: str) -> tuple[int, ...]:
    """:math:`h(\\text{name})`: the first four little-endian 32-bit words of SHA-256(name)."""
    if not isinstance(name, str) or not name:
        raise ValidationError(f"name: must be a non-empty string, got {name!r}")
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return tuple(int.from_bytes(digest[4 * i : 4 * i + 4], "little") for i in range(4))


def seed_sequence(seed: SeedLike, name: str) -> np.random.SeedSequence:
    """The ``SeedSequence`` of stream ``name`` under ``seed``: entropy ``seed[0]``, spawn key
    :func:`name_key` followed by ``seed[1:]`` (so ``(s, 0)`` and ``s`` are different streams)."""
    words = _words(seed)
    return np.random.SeedSequence(words[0], spawn_key=(*name_key(name), *words[1:]))


def stream(seed: SeedLike, name: str) -> np.random.Generator:
    """A fresh ``numpy.random.Generator`` (PCG64) for stream ``name`` of ``seed`` (module doc)."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, name)))


def as_rng(seed: SeedLike | np.random.Generator | None, name: str) -> np.random.Generator:
    """``seed`` itself when it is a ``Generator``, else :func:`stream` ``(seed, name)``: library
    functions take either a generator their caller derived or an integer seed, which names a stream.
    ``None`` (a library function called without a seed) gives a generator on fresh OS entropy, not
    reproducible; the pipeline's stages always pass a seed or a stream."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.Generator(np.random.PCG64())
    return stream(seed, name)


def int_seed(seed: SeedLike, name: str) -> int:
    """A 31-bit integer drawn from stream ``name``, for APIs that take an integer ``random_state``."""
    return int(seed_sequence(seed, name).generate_state(1)[0] >> 1)
