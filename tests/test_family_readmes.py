"""Each family's ``veilbench/<family>/README.md`` stays true of the code and of ``params.yaml``.

A README names its spec file, every sweep of ``params.yaml`` run by the family and the text of
every ``report.claims`` entry of the family; every option it writes as ``name: …`` or
``name=…`` in inline code is a field of the family's ``Params``; the project README links all
four; DVC ignores the READMEs, which sit in the code folders the stages depend on.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from veilbench.families import FAMILY_MODULES, get_family

ROOT = Path(__file__).resolve().parents[1]

#: Family → its spec file in ``shared/specs/``.
SPECS = {
    "scoreshield": "scoreshield.md",
    "gca": "gca.md",
    "dc": "data-collaboration.md",
    "anchornoise": "anchor-noise.md",
}

_FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_OPTION = re.compile(r"^\s*([a-z][a-z0-9_]*)\s*(?::(?!//)|=)")  # `name: …` or `name=…`, not `https://…`


def option_mentions(markdown: str) -> set[str]:
    """Names written as ``name: value`` or ``name=value`` at the start of an inline code span of
    ``markdown`` (fenced code blocks are commands, not options, and are skipped)."""
    prose = _FENCED.sub("", markdown)
    return {m.group(1) for span in _INLINE_CODE.findall(prose) if (m := _OPTION.match(span))}


def _readme(family: str) -> str:
    path = ROOT / "veilbench" / family / "README.md"
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing"
    return path.read_text(encoding="utf-8")


def _params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def test_every_registered_family_has_a_spec_entry() -> None:
    assert set(SPECS) == set(FAMILY_MODULES)


@pytest.mark.parametrize("family", sorted(SPECS))
def test_readme_names_its_spec_and_every_sweep_of_the_family(family: str) -> None:
    text = _readme(family)
    assert f"shared/specs/{SPECS[family]}" in text
    sweeps = [name for name, sweep in _params()["sweeps"].items() if sweep["family"] == family]
    assert sweeps, f"params.yaml has no {family} sweep"
    missing = [name for name in sweeps if f"`{name}`" not in text]
    assert not missing, f"veilbench/{family}/README.md does not name the params.yaml sweep(s) {missing}"


@pytest.mark.parametrize("family", sorted(SPECS))
def test_readme_lists_the_familys_claims(family: str) -> None:
    text = _readme(family)
    claims = [c["claim"] for c in _params()["report"]["claims"] if c["family"] == family]
    missing = [claim for claim in claims if claim not in text]
    assert not missing, f"veilbench/{family}/README.md lacks the report.claims text(s) {missing}"


@pytest.mark.parametrize("family", sorted(SPECS))
def test_readme_options_are_params_fields(family: str) -> None:
    mentioned = option_mentions(_readme(family))
    fields = set(get_family(family).Params.model_fields)
    assert len(mentioned) >= 5, f"veilbench/{family}/README.md names almost no options: {sorted(mentioned)}"
    unknown = sorted(mentioned - fields)
    assert not unknown, f"veilbench/{family}/README.md names option(s) {unknown} that {family}'s Params lacks"


def test_option_mentions_finds_options_and_skips_commands_and_urls() -> None:
    text = (
        "Set `selection_protocol: paper` or `rounds=5`; `method` alone is a value, "
        "`https://example.org` a link.\n```bash\nVEILBENCH_ROOT=x veilbench run\nlr: 1\n```\n"
    )
    assert option_mentions(text) == {"selection_protocol", "rounds"}


def test_project_readme_links_the_family_readmes() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [f for f in SPECS if f"(veilbench/{f}/README.md)" not in text]
    assert not missing, f"README.md does not link veilbench/<family>/README.md for {missing}"


@pytest.mark.slow  # a `dvc check-ignore` subprocess
def test_dvc_ignores_the_family_readmes_but_not_the_code() -> None:
    readmes = [f"veilbench/{f}/README.md" for f in sorted(SPECS)]
    code = "veilbench/gca/family.py"
    out = subprocess.run([sys.executable, "-m", "dvc", "check-ignore", *readmes, code], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert out.stdout.split() == readmes, out.stdout + out.stderr
