"""The DVC internals ``flows/pipeline.py`` relies on, checked by name and signature.

``veilbench run`` plans with DVC's own planner through the ``repro_fn`` hook of
``Repo.reproduce`` and then saves, commits and locks each stage as ``Stage.run`` would. None of
that is documented public API, so dvc is pinned exactly in ``pyproject.toml``; when a DVC upgrade
changes one of these, the test names the function that changed instead of ``veilbench run``
failing half-way through a pipeline.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import pytest

PINNED = "3.67.1"


def _params(func) -> list[str]:
    return list(inspect.signature(func).parameters)


def test_dvc_is_the_pinned_version():
    assert version("dvc") == PINNED, (f"dvc {version('dvc')} installed, flows/pipeline.py was checked against "
                                      f"{PINNED}: re-check the internals below, then update the pin")


def test_repro_fn_hook():
    from dvc.repo import reproduce as module

    src = inspect.getsource(module._reproduce)
    assert "repro_fn" in _params(module._reproduce), "dvc.repo.reproduce._reproduce lost its repro_fn argument"
    assert "repro_fn(stage, upstream=upstream, force=force_stage" in src, (
        "dvc.repo.reproduce._reproduce no longer calls repro_fn(stage, upstream=..., force=...)")
    assert "kwargs" in str(inspect.signature(module.reproduce)), "Repo.reproduce no longer passes **kwargs on"


@pytest.mark.parametrize("name, params", [
    ("changed", ["self", "allow_missing", "upstream"]),
    ("save", ["self", "allow_missing", "run_cache"]),
    ("commit", ["self", "allow_missing", "filter_info", "kwargs"]),
])
def test_stage_methods(name, params):
    from dvc.stage import Stage

    assert _params(getattr(Stage, name)) == params, f"dvc.stage.Stage.{name} changed its signature"
    assert hasattr(Stage, "addressing"), "dvc.stage.Stage.addressing is gone"


def test_lock_writing_and_repo_lock():
    from dvc.dvcfile import ProjectFile
    from dvc.repo import Repo, lock_repo

    assert _params(ProjectFile.dump_stages)[:3] == ["self", "stages", "update_pipeline"], (
        "dvc.dvcfile.ProjectFile.dump_stages changed its signature")
    assert callable(lock_repo), "dvc.repo.lock_repo is gone"
    assert hasattr(Repo, "scm_context"), "dvc.repo.Repo.scm_context is gone"
