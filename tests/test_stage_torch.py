"""A stage process loads torch only for cells that use it, and a cell that loads it unannounced fails
the stage (:func:`flows._stage.cells_use_torch`, :func:`flows._stage.single_threaded_blas`).

The thread limit is what keeps a GCA cell's bits independent of how many cells run beside it, so
the saving (one torch import per torch-free stage process) must never cost that limit: the checks
that need an interpreter without torch run in a fresh one.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap

import pytest
import yaml

from tests.conftest import REPO, tiny_params


@pytest.mark.parametrize(("family", "cells", "expected"), [
    ("gca", [{}], True),
    ("dc", [{"integration": "nki"}], False),
    ("anchornoise", [{}], False),
    ("scoreshield", [{"regime": "gram"}, {"mechanism": "clean"}], False),
    ("scoreshield", [{"regime": "gram"}, {"regime": "gram", "gram_source": "text"}], True),
    ("scoreshield", [{"regime": "gram", "gram_source": "movielens"}], False),
])
def test_which_cells_use_torch(family: str, cells: list[dict], expected: bool) -> None:
    from flows._stage import cells_use_torch

    assert cells_use_torch(family, cells) is expected


def test_torch_use_is_what_the_family_module_declares() -> None:
    """The rule reads the family's ``USES_TORCH`` and ``TORCH_OPTIONS``; a family that declares
    nothing is limited as if it used torch."""
    from types import SimpleNamespace

    from veilbench.families.base import cells_use_torch

    assert cells_use_torch(SimpleNamespace(), [{}])  # undeclared
    assert cells_use_torch(SimpleNamespace(USES_TORCH=True), [{}])
    free = SimpleNamespace(USES_TORCH=False, TORCH_OPTIONS={"encoder": "bert"})
    assert not cells_use_torch(free, [{}, {"encoder": "pca"}])
    assert cells_use_torch(free, [{}, {"encoder": "bert"}])
    assert not cells_use_torch(SimpleNamespace(USES_TORCH=False), [{"encoder": "bert"}])


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_a_torch_free_block_leaves_torch_unloaded_and_a_torch_block_limits_it() -> None:
    proc = _fresh("""
        import sys
        from flows._stage import single_threaded_blas
        with single_threaded_blas(2, torch_cells=False):
            assert "torch" not in sys.modules, "torch-free cells: torch not imported"
        with single_threaded_blas(2, torch_cells=True):
            import torch
            assert torch.get_num_threads() == 1
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_a_cell_that_loads_torch_unannounced_fails_the_block() -> None:
    proc = _fresh("""
        from flows._stage import single_threaded_blas
        with single_threaded_blas(2, torch_cells=False):
            import torch
    """)
    assert proc.returncode != 0
    assert "RuntimeError" in proc.stderr and "stages_use_torch" in proc.stderr, proc.stderr[-3000:]


def test_torch_already_loaded_is_limited_even_for_torch_free_cells() -> None:
    import torch

    from flows._stage import single_threaded_blas

    before = torch.get_num_threads()
    with single_threaded_blas(2, torch_cells=False):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(("sweeps", "expected"), [(["ss"], False), (["fl"], True), (["ss", "fl"], True)])
def test_the_stage_flow_asks_about_its_own_sweeps(tmp_path, monkeypatch, sweeps: list[str], expected: bool) -> None:
    """The cell-stage flow passes ``cells_use_torch`` of the sweeps it runs, and only of those."""
    import flows._stage as stage

    params = tiny_params()
    params["sweeps"]["fl"] = {"family": "gca", "embedding": "digits-pca", "seeds": [0], "params": {}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    seen: list[bool] = []

    def record(threads: int, torch_cells: bool = True):
        seen.append(torch_cells)
        return contextlib.nullcontext()

    monkeypatch.setattr(stage, "single_threaded_blas", record)
    monkeypatch.setattr(stage, "run_cell_stage", lambda s, names, p: list(names))
    flow = stage.make_stage_flow("release")
    assert flow.fn(keys=sweeps, params_path=str(path)) == sweeps
    assert seen == [expected]


def test_which_stage_instances_use_torch() -> None:
    """The in-process pipeline's rule over its planned stage instances (DVC addresses)."""
    from flows._stage import stages_use_torch
    from veilbench.config import Config

    params = tiny_params()
    params["embeddings"]["digits-text"] = {"dataset": "digits", "encoder": "sentence", "dim": 8}
    params["sweeps"]["fl"] = {"family": "gca", "embedding": "digits-pca", "seeds": [0], "params": {}}
    cfg = Config.model_validate(params)
    assert not stages_use_torch(cfg, ["prepare@digits", "embed@digits-pca", "release@ss", "evaluate@ss-identity",
                                      "report"])
    assert stages_use_torch(cfg, ["prepare@digits", "embed@digits-text"])
    assert stages_use_torch(cfg, ["release@ss", "attack@fl"])
    assert stages_use_torch(cfg, ["release@not-a-sweep"]) and stages_use_torch(cfg, ["embed@not-an-embedding"])
