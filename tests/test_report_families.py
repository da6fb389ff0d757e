"""What the families supply to the report (:mod:`tasks.report.families`): their question, title,
log-scale options and own sections come from ``veilbench/<family>/report.py``, and the report
itself names no family."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

from tasks.report import families
from tests.conftest import tiny_params
from veilbench.config import FrontierConfig, validate_config
from veilbench.families import FAMILY_MODULES

REPO = Path(__file__).resolve().parents[1]


def test_the_summary_opens_with_the_family_question(monkeypatch: pytest.MonkeyPatch) -> None:
    import veilbench.scoreshield.report as ss_report
    from tasks.report.summary import summary_section

    cfg = validate_config(tiny_params())
    assert summary_section(cfg, "scoreshield", [], [])[2].startswith(ss_report.QUESTION)
    monkeypatch.setattr(ss_report, "QUESTION", "Does the probe question reach the page?")
    assert summary_section(cfg, "scoreshield", [], [])[2].startswith("Does the probe question reach the page?")
    monkeypatch.delattr(ss_report, "QUESTION")
    assert summary_section(cfg, "scoreshield", [], [])[2].startswith(
        "How much utility does scoreshield keep, and how much does an attacker get back?")


def test_figure_titles_use_the_family_title(monkeypatch: pytest.MonkeyPatch) -> None:
    import veilbench.dc.report as dc_report
    from tasks.report.style import readable_title

    assert readable_title("dc", "accuracy (0-1)", "linkage") == "Data collaboration: accuracy vs linkage"
    monkeypatch.setattr(dc_report, "TITLE", "DC probe")
    assert readable_title("dc", "accuracy", "linkage") == "DC probe: accuracy vs linkage"
    assert readable_title("not-a-family", "a", "b") == "not-a-family: a vs b"


def _points(xs: list[float]) -> list[dict]:
    return [{"sweep": "s", "cell": f"epsilon={x}", "dataset": "d", "group": "g", "x": x, "x_ci95": 0.0, "y": 0.5,
             "y_ci95": 0.01, "reference": False, "data_free": False} for x in xs]


def test_a_frontier_is_on_a_log_x_axis_when_its_option_is_one_of_the_family_log_scale_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import veilbench.dc.report as dc_report
    from tasks.report.frontier import frontier_figure

    def log_x(family: str, x: str, **kw: object) -> bool:
        return frontier_figure(_points([1.0, 10.0]), FrontierConfig(name="f", family=family, x=x, y="u", **kw)).axes.log_x

    assert log_x("scoreshield", "param:epsilon"), "ScoreShield declares epsilon"
    assert not log_x("scoreshield", "param:n_records")
    assert not log_x("scoreshield", "param:epsilon", log_x=False), "the frontier's own log_x wins"
    assert not log_x("dc", "param:epsilon")
    monkeypatch.setattr(dc_report, "LOG_SCALE_OPTIONS", frozenset({"n_parties"}), raising=False)
    assert log_x("dc", "param:n_parties") and not log_x("dc", "n_parties"), "only a cell option, not a metric"


def test_gca_writes_its_communication_table_on_every_build_and_describes_it_when_it_runs(tmp_path: Path) -> None:
    assert families.sections(tmp_path / "a", {"gca": []}) == []
    assert (tmp_path / "a" / "gca" / "communication.csv").read_text().startswith("dataset,method,K,mib_per_round")
    lines = families.sections(tmp_path / "b", {"gca": ["gca-digits"]})
    assert lines[0] == "## GCA communication" and "`gca/communication.csv`" in " ".join(lines)
    assert (tmp_path / "b" / "gca" / "communication.csv").is_file()


def _fake_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, report_source: str | None) -> Path:
    """A registered family ``fake`` whose package ``name`` lives in ``tmp_path`` (a name of its own
    per test: Python keeps imported modules)."""
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "family.py").write_text("DATA_FREE = ({'mechanism': 'nothing'},)\n")
    if report_source is not None:
        (package / "report.py").write_text(report_source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(FAMILY_MODULES, "fake", f"{name}.family")
    for module in (name, f"{name}.family", f"{name}.report"):
        monkeypatch.setitem(sys.modules, module, None)  # restored (removed) after the test
        del sys.modules[module]
    return package


def test_a_new_family_supplies_its_sections_through_its_report_module(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_family(tmp_path, monkeypatch, "fakefam_sections", "QUESTION = 'What does fake show?'\n"
                           "def report_section(reports, sweeps):\n"
                           "    (reports / 'fake').mkdir(parents=True, exist_ok=True)\n"
                           "    (reports / 'fake' / 'note.txt').write_text(','.join(sweeps))\n"
                           "    return ['## Fake', '', f'{len(sweeps)} sweep(s)', '']\n")
    lines = families.sections(tmp_path / "reports", {"fake": ["f1", "f2"]})
    assert lines[-4:] == ["## Fake", "", "2 sweep(s)", ""]
    assert (tmp_path / "reports" / "fake" / "note.txt").read_text() == "f1,f2"
    assert families.question("fake") == "What does fake show?"
    assert families.title("fake") == "fake"
    assert families.declarations("fake") == (({"mechanism": "nothing"},), {})


def test_a_family_without_a_report_module_has_defaults_and_a_broken_one_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _fake_family(tmp_path, monkeypatch, "fakefam_defaults", None)
    assert families.report_module("fake") is None and families.title("fake") == "fake"
    (package / "report.py").write_text("import a_module_that_does_not_exist_anywhere\n")
    importlib.invalidate_caches()
    with pytest.raises(ModuleNotFoundError, match="a_module_that_does_not_exist_anywhere"):
        families.report_module("fake")


def _string_constants(path: Path) -> set[str]:
    """The string literals of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_the_report_names_no_family() -> None:
    named = {path.name: _string_constants(path) & set(FAMILY_MODULES) for path in (REPO / "tasks" / "report").glob("*.py")}
    assert len(named) > 10 and not any(named.values()), {k: v for k, v in named.items() if v}
