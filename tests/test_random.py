"""Named seed streams (veilbench.random): reproducible, independent by name and seed, no global state."""

import numpy as np
import pytest

from veilbench.random import int_seed, name_key, stream
from veilbench.validation import ValidationError


def test_same_seed_and_name_give_the_same_stream():
    assert np.array_equal(stream(5, "a").random(8), stream(5, "a").random(8))
    assert np.array_equal(stream((5, 2), "a").random(8), stream([5, 2], "a").random(8))


@pytest.mark.parametrize("other", [(6, "a"), (5, "b"), ((5, 0), "a"), ((5, 1), "a")])
def test_another_seed_or_name_gives_another_stream(other):
    assert not np.array_equal(stream(5, "a").random(8), stream(*other).random(8))


def test_streams_are_not_a_shift_of_the_unnamed_generator():
    # the plain default_rng(seed) stream is what an unnamed draw would give: a named one differs
    assert not np.array_equal(stream(5, "a").random(8), np.random.default_rng(5).random(8))


def test_no_global_generator_is_touched():
    np.random.seed(0)
    before = np.random.get_state()[1].copy()
    stream(1, "x").random(100)
    int_seed(1, "x")
    assert np.array_equal(np.random.get_state()[1], before)


def test_name_key_is_four_32_bit_words_and_int_seed_is_31_bit():
    key = name_key("gca.init")
    assert len(key) == 4 and all(0 <= k < 2**32 for k in key)
    assert 0 <= int_seed(3, "gca.init") < 2**31


@pytest.mark.parametrize("seed,name,field", [(-1, "a", "seed"), ([], "a", "seed"), (1.5, "a", "seed"),
                                             (True, "a", "seed"), (1, "", "name"), (1, 3, "name")])
def test_bad_input_names_the_field(seed, name, field):
    with pytest.raises(ValidationError, match=field):
        stream(seed, name)


def _random_calls_outside_streams(source: str) -> list[str]:
    """Every ``np.random.<f>(…)`` / ``numpy.random.<f>(…)`` call in ``source`` other than the
    constructors :mod:`veilbench.random` is built from (Generator, PCG64, SeedSequence)."""
    import ast

    allowed = {"Generator", "PCG64", "SeedSequence"}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "random" and isinstance(owner.value, ast.Name)
                    and owner.value.id in ("np", "numpy") and node.func.attr not in allowed):
                found.append(f"line {node.lineno}: np.random.{node.func.attr}(…)")
    return found


def test_one_rng_convention_in_the_library():
    # every random draw of the library comes from veilbench.random.stream (or a generator a caller derived
    # from it): no default_rng, legacy global functions or RandomState anywhere else, docstrings included
    from pathlib import Path

    import veilbench

    root = Path(veilbench.__file__).parent
    offenders = {}
    for path in sorted(root.rglob("*.py")):
        if path.name == "random.py" and path.parent == root:
            continue
        text = path.read_text(encoding="utf-8")
        hits = _random_calls_outside_streams(text) + [f"text: {w}" for w in ("default_rng(", "RandomState(")
                                                        if w in text]
        if hits:
            offenders[str(path.relative_to(root))] = hits
    assert not offenders, offenders


def test_the_convention_check_catches_each_pattern():
    assert _random_calls_outside_streams("import numpy as np\nrng = np.random.default_rng(0)\n")
    assert _random_calls_outside_streams("import numpy as np\nx = np.random.normal(size=3)\n")
    assert _random_calls_outside_streams("import numpy\nnumpy.random.seed(1)\n")
    assert not _random_calls_outside_streams("import numpy as np\ng = np.random.Generator(np.random.PCG64(1))\n")
