"""Every example in a docstring of the library and the pipeline runs and shows what it says."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def modules_with_examples() -> list[str]:
    """Dotted names of the modules under ``veilbench/`` and ``tasks/`` whose source holds a ``>>>``."""
    return sorted(".".join(p.relative_to(ROOT).with_suffix("").parts)
                  for package in ("veilbench", "tasks") for p in (ROOT / package).rglob("*.py")
                  if ">>> " in p.read_text(encoding="utf-8"))


def test_the_examples_are_found() -> None:
    assert {"veilbench.privacy.calibration", "veilbench.random", "veilbench.linalg.procrustes"} <= set(
        modules_with_examples())


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_pass(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name}: no example found by doctest"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (output above)"
