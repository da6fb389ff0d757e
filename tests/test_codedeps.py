"""The code each stage runs is derived from imports, and dvc.yaml's deps agree with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks import codedeps
from tasks.codedeps import check_dvc_yaml, closure, collapse, stage_closure

ROOT = Path(__file__).resolve().parents[1]


def test_dvc_yaml_code_deps_equal_the_derived_closure():
    problems = check_dvc_yaml(ROOT / "dvc.yaml")
    assert problems == {}, f"dvc.yaml deps disagree with the import closure (python -m tasks.codedeps --write): {problems}"


def test_known_gaps_are_in_the_closure():
    # ScoreShield's text task reads the paraphrase corpus; the report reads the GCA communication
    # accounting and the privacy ledger: all three were missing from hand-kept lists.
    assert "veilbench/datasets/paraphrases.py" in stage_closure("release", "scoreshield")
    report = stage_closure("report")
    assert "veilbench/gca/communication.py" in report
    assert "veilbench/privacy/ledger.py" in report


def test_bookkeeping_is_not_result_code():
    for stage in ("release", "evaluate"):
        files = stage_closure(stage, "dc")
        assert "tasks/sweep.py" in files
        assert not files & codedeps.NOT_RESULT_CODE


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_closure_follows_lazy_relative_and_submodule_imports(tmp_path):
    root = _package(tmp_path, {
        "veilbench/__init__.py": "",
        "veilbench/fam/__init__.py": "",
        "veilbench/fam/family.py": "from . import helper\n\ndef run():\n    from veilbench.lazy import thing\n",
        "veilbench/fam/helper.py": "from ..shared import util\n",
        "veilbench/shared/__init__.py": "",
        "veilbench/shared/util.py": "import numpy\n",
        "veilbench/lazy.py": "",
        "veilbench/unused.py": "",
    })
    files = closure(("veilbench.fam.family",), root)
    assert files == {"veilbench/__init__.py", "veilbench/fam/__init__.py", "veilbench/fam/family.py",
                     "veilbench/fam/helper.py", "veilbench/shared/__init__.py", "veilbench/shared/util.py",
                     "veilbench/lazy.py"}
    assert collapse(files, root) == ["veilbench/__init__.py", "veilbench/fam", "veilbench/lazy.py",
                                     "veilbench/shared"]


def test_code_digest_changes_with_closure_code_only(tmp_path, monkeypatch):
    root = _package(tmp_path, {
        "veilbench/__init__.py": "",
        "veilbench/families/__init__.py": "FAMILY_MODULES = {'fam': 'veilbench.fam'}\n",
        "veilbench/fam.py": "from veilbench import core\n",
        "veilbench/core.py": "X = 1\n",
        "veilbench/config.py": "",
        "tasks/__init__.py": "",
        "tasks/sweep.py": "from tasks import tracking\nfrom veilbench import config\n",
        "tasks/tracking.py": "",
    })
    monkeypatch.setattr(codedeps, "project_root", lambda: root)
    monkeypatch.setattr(codedeps, "cell_entries", lambda family, stage: ("veilbench.fam", "tasks.sweep"))
    codedeps.closure.cache_clear()
    before = codedeps.code_digest("fam")
    (root / "tasks/tracking.py").write_text("# logging only\n")
    (root / "veilbench/config.py").write_text("# schema only\n")
    codedeps.closure.cache_clear()
    assert codedeps.code_digest("fam") == before
    (root / "veilbench/core.py").write_text("X = 2\n")
    codedeps.closure.cache_clear()
    assert codedeps.code_digest("fam") != before
    codedeps.closure.cache_clear()


def _documented(source: str) -> str:
    """``source`` with one line added to every docstring and bare string statement written with
    triple quotes, a comment line after every line that ends a statement, and a trailing comment."""
    import ast

    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
               and isinstance(n.value.value, str)]
    # from the end backwards, so that earlier positions stay valid
    for node in sorted(strings, key=lambda n: (n.end_lineno, n.end_col_offset), reverse=True):
        line = lines[node.end_lineno - 1]
        # end_col_offset counts UTF-8 bytes
        raw = line.encode()
        head, tail = raw[: node.end_col_offset].decode(), raw[node.end_col_offset:].decode()
        if head.endswith(('"""', "'''")):
            lines[node.end_lineno - 1] = head[:-3] + "\nAn added line of documentation.\n" + head[-3:] + tail
    statement_ends = {n.end_lineno for n in ast.walk(tree) if isinstance(n, ast.stmt)}
    out = []
    for number, line in enumerate("".join(lines).splitlines(keepends=True), start=1):
        out.append(line)
        if number in statement_ends and not line.rstrip().endswith("\\"):
            out.append("# an added comment\n")
    return "".join(out) + "\n# a trailing comment\n"


def _result_code_copy(tmp_path: Path, monkeypatch) -> tuple[Path, dict[tuple[str, str], str], set[str]]:
    """A copy of the project's Python files under ``tmp_path`` that :mod:`tasks.codedeps` reads
    instead of the checkout; every cell stage's code digest of every family there; the files of
    their closures."""
    import shutil

    from veilbench.families import FAMILY_MODULES
    from veilbench.stages import STAGES

    for package in ("veilbench", "tasks"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    monkeypatch.setattr(codedeps, "project_root", lambda: tmp_path)
    codedeps.closure.cache_clear()
    keys = {(f, s): codedeps.code_digest(f, s) for f in FAMILY_MODULES for s in STAGES}
    files = set().union(*(stage_closure(s, f) for f in FAMILY_MODULES for s in STAGES))
    return tmp_path, keys, files


def test_documentation_edits_leave_every_cell_key_unchanged(tmp_path, monkeypatch):
    """A line added to every docstring (and attribute docstring) and comments after every statement
    of every result-code module: no family's code digest of any cell stage changes."""
    import ast

    from veilbench.families import FAMILY_MODULES
    from veilbench.stages import STAGES

    root, before, files = _result_code_copy(tmp_path, monkeypatch)
    try:
        edited = 0
        for rel in sorted(files):
            path = root / rel
            text = path.read_text(encoding="utf-8")
            new = _documented(text)
            ast.parse(new)  # still Python
            if '"""' in text or "'''" in text:
                assert "An added line of documentation." in new, rel
            path.write_text(new, encoding="utf-8")
            edited += 1
        assert edited == len(files) > 50
        codedeps.closure.cache_clear()
        after = {(f, s): codedeps.code_digest(f, s) for f in FAMILY_MODULES for s in STAGES}
        assert after == before
    finally:
        codedeps.closure.cache_clear()


@pytest.mark.parametrize(("rel", "old", "new", "families"), [
    # a constant of the privacy calibration every DP family runs
    ("veilbench/privacy/calibration.py", "from __future__ import annotations\n",
     "from __future__ import annotations\n\n_UNUSED = 1\n", ("scoreshield", "gca")),
    # a string literal that is not a docstring (a stream name)
    ("veilbench/scoreshield/vector_stages.py", 'stream(seed, "scoreshield.release")',
     'stream(seed, "scoreshield.release2")', ("scoreshield",)),
    # a changed operator in the shared stage runner
    ("tasks/sweep.py", "vals.size > 1", "vals.size >= 1", ("scoreshield", "gca", "dc", "anchornoise")),
])
def test_a_code_change_changes_the_keys_of_the_cells_that_run_it(tmp_path, monkeypatch, rel, old, new, families):
    from veilbench.families import FAMILY_MODULES
    from veilbench.stages import STAGES

    root, before, files = _result_code_copy(tmp_path, monkeypatch)
    try:
        path = root / rel
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{rel}: the mutation's anchor {old!r} moved"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        codedeps.closure.cache_clear()
        after = {(f, s): codedeps.code_digest(f, s) for f in FAMILY_MODULES for s in STAGES}
        changed = {f for (f, s), digest in after.items() if digest != before[(f, s)]}
        expected = {f for f in FAMILY_MODULES for s in STAGES if rel in stage_closure(s, f)}
        assert set(families) <= expected
        assert changed == expected
        assert all(after[(f, s)] != before[(f, s)] for f in expected for s in STAGES if rel in stage_closure(s, f))
    finally:
        codedeps.closure.cache_clear()


def test_the_key_tooling_is_not_what_it_hashes():
    for family in ("scoreshield", "dc"):
        assert "tasks/codedeps.py" not in stage_closure("release", family)
        assert "tasks/sweep.py" in stage_closure("release", family)


def test_canonical_source_drops_docstrings_and_positions_only():
    import ast

    canonical = codedeps.canonical_source
    a = canonical(ast.parse('def f(x):\n    """Doc."""\n    return x + 1\n'))
    assert a == canonical(ast.parse("def f(x):\n\n    # note\n    return (x +\n            1)\n"))
    assert a != canonical(ast.parse("def f(x):\n    return x + 2\n"))
    assert a != canonical(ast.parse('def f(x):\n    y = "Doc."\n    return x + 1\n'))  # an assigned string is code
    assert "lineno" not in a and "Doc." not in a


def test_dvc_yaml_stages_are_the_pipeline_stages_in_order():
    import yaml

    from veilbench.stages import PIPELINE_STAGES

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert tuple(stages) == PIPELINE_STAGES
