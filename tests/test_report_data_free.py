"""The report's data-free cells are those the families declare (``DATA_FREE``), not those whose
name sounds data-free."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.common import load_params
from tasks.report.headline import is_data_free

#: the data-free references of each family, as its module docstring describes them
DESCRIBED = {
    "scoreshield": lambda p: p.get("mechanism") in ("identity", "identity_noise"),
    "anchornoise": lambda p: p.get("mechanism") == "random",
    "dc": lambda p: p.get("obfuscation") == "random",
    "gca": lambda p: False,  # metric-level references only (DATA_FREE_METRICS)
}


def _rows() -> list[dict]:
    cfg = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    rows = []
    for sweep, scfg in cfg.sweeps.items():
        for cell, options in scfg.expand().items():
            params = options.model_dump() if hasattr(options, "model_dump") else dict(options)
            method = next((str(params[k]) for k in ("mechanism", "method", "protocol", "integration") if k in params),
                          scfg.family)
            rows.append({"sweep": sweep, "cell": cell, "family": scfg.family, "method": method, "params": params})
    return rows


def test_every_data_free_cell_of_params_yaml_is_recognised_and_no_other() -> None:
    rows = _rows()
    expected = [(r["sweep"], r["cell"]) for r in rows if DESCRIBED[r["family"]](r["params"])]
    assert {r["family"] for r in rows if (r["sweep"], r["cell"]) in expected} == {"scoreshield", "anchornoise", "dc"}
    assert [(r["sweep"], r["cell"]) for r in rows if is_data_free(r)] == expected


@pytest.mark.parametrize(("family", "method", "params"), [
    ("scoreshield", "identity_clip", {"mechanism": "newton", "epsilon": 1.0}),
    ("anchornoise", "random_rotation", {"mechanism": "aa_anchor_noise"}),
    ("dc", "zero_shot", {"obfuscation": "random_orthogonal", "integration": "nki"}),
    ("gca", "gca", {"data_free": True}),
])
def test_a_cell_whose_name_merely_sounds_data_free_is_not(family: str, method: str, params: dict) -> None:
    row = {"family": family, "cell": f"method={method}", "method": method, "params": params}
    assert not is_data_free(row)
