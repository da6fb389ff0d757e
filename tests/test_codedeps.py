"""The code each stage runs is derived from imports, and dvc.yaml's deps agree with it."""

from __future__ import annotations

from pathlib import Path

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
