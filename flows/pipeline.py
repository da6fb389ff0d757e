"""The default run: DVC plans, this one process executes, DVC records.

``veilbench run`` calls :func:`reproduce_in_process`. DVC's own planner walks ``dvc.yaml`` in
dependency order and asks each stage whether it changed (deps, params, outs against ``dvc.lock``),
exactly as ``dvc repro`` does; but instead of spawning ``python -m flows.<stage>`` (about 10–16 s
of imports, Prefect client and MLflow start-up per stage), a stale stage runs here as a Prefect
subflow of one ``pipeline`` flow, and DVC then saves and commits its outputs; the ``dvc.lock``
entries of all stages that ran are written when the reproduce ends (:class:`InProcessReproducer`).
The lock is therefore the same as after ``dvc repro``: a later ``dvc repro`` or
``dvc status`` sees nothing to do, and ``dvc repro`` remains available (``veilbench run
--per-stage-processes``) with identical results.

The hook is DVC's ``repro_fn`` argument of ``Repo.reproduce`` (used by DVC's experiments for the
same purpose); dvc is pinned in ``pyproject.toml`` because this is not a documented public API.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect import flow

log = logging.getLogger("veilbench.pipeline")


def _stage_flows() -> dict[str, Callable[..., Any]]:
    """DVC stage name (before ``@``) → the flow that runs it for given keys."""
    from flows.attack import attack_flow
    from flows.embed import embed_flow
    from flows.evaluate import evaluate_flow
    from flows.integrate import integrate_flow
    from flows.prepare import prepare_flow
    from flows.release import release_flow
    from flows.report import report_flow

    keyed = {"prepare": prepare_flow, "embed": embed_flow, "release": release_flow, "integrate": integrate_flow,
             "attack": attack_flow, "evaluate": evaluate_flow}
    flows: dict[str, Callable[..., Any]] = {name: (lambda key, f=f: f(keys=[key])) for name, f in keyed.items()}
    flows["report"] = lambda key: report_flow()
    return flows


@contextmanager
def _dvc_stage_env(root: Path, addressing: str) -> Iterator[None]:
    """The environment ``dvc repro`` gives a stage command: ``DVC_ROOT`` and ``DVC_STAGE``."""
    saved = {k: os.environ.get(k) for k in ("DVC_ROOT", "DVC_STAGE")}
    os.environ.update({"DVC_ROOT": str(root), "DVC_STAGE": addressing})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class InProcessReproducer:
    """A ``repro_fn`` for ``Repo.reproduce``: run a changed stage in this process, then save its
    outputs and commit them to the DVC cache (what ``Stage.run`` does after its command).
    Unchanged stages are skipped exactly as in ``Stage.reproduce``.

    The ``dvc.lock`` entries of the stages that ran are written together by :meth:`flush` (the
    flow calls it when the reproduce ends, also on an error), not one by one: DVC re-parses and
    rewrites the whole lock file per entry, ~2.5 s for the default 74-stage pipeline, which made
    lock writing a fifth of the run. A run killed outright loses only lock entries; the next run
    sees those stages as changed and reuses their cells (input keys unchanged).
    """

    def __init__(self, root: Path):
        self.root = root
        self.flows = _stage_flows()
        self.executed: list[str] = []
        self._unlocked: list[Any] = []

    def __call__(self, stage: Any, upstream: list[Any] | None = None, force: bool = False, **_: Any) -> Any:
        if not force and not stage.changed(False, upstream):
            log.info("Stage '%s' didn't change, skipping", stage.addressing)
            return None
        name, _, key = stage.addressing.partition("@")
        if name not in self.flows:
            raise KeyError(f"stage: {stage.addressing!r} has no in-process flow (known: {sorted(self.flows)})")
        print(f"Running stage '{stage.addressing}' (in process)", flush=True)
        with _dvc_stage_env(self.root, stage.addressing):
            self.flows[name](key)
        stage.save(run_cache=False)
        stage.commit()
        self._unlocked.append(stage)
        self.executed.append(stage.addressing)
        return stage

    def flush(self) -> None:
        """Write the ``dvc.lock`` entries of the stages run since the last flush, one write per file."""
        by_file: dict[str, list[Any]] = {}
        for stage in self._unlocked:
            by_file.setdefault(stage.dvcfile.path, []).append(stage)
        for stages in by_file.values():
            stages[0].dvcfile.dump_stages(stages, update_pipeline=False)
        self._unlocked.clear()


@flow(name="pipeline")
def pipeline_flow(root: str, targets: list[str] | None = None, force: bool = False) -> list[str]:
    """Reproduce ``targets`` (default: the whole ``dvc.yaml``) in this process; returns the DVC
    addresses of the stages that ran (``[]`` when everything was up to date)."""
    from dvc.repo import Repo, lock_repo
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    logging.getLogger("dvc").propagate = False  # DVC prints its own messages; Prefect's root handler would repeat them
    # The stage subflows send no heartbeats: this flow's own heartbeat already marks the run alive,
    # and ending a flow waits up to 1 s for its heartbeat thread (1.3 s → 0.3 s per stage, measured).
    with (temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}), Repo(root) as repo,
          lock_repo(repo)):  # the lock entries are written under the repo lock too
        reproducer = InProcessReproducer(Path(root))
        try:
            repo.reproduce(targets or None, force=force, repro_fn=reproducer)
        finally:
            reproducer.flush()
    return reproducer.executed


def reproduce_in_process(root: Path, targets: list[str] | None = None, force: bool = False) -> list[str]:
    """Run :func:`pipeline_flow` with ``VEILBENCH_ROOT`` set to ``root`` (stage code reads it)."""
    saved = os.environ.get("VEILBENCH_ROOT")
    os.environ["VEILBENCH_ROOT"] = str(root)
    try:
        return pipeline_flow(str(root), targets, force)
    finally:
        if saved is None:
            os.environ.pop("VEILBENCH_ROOT", None)
        else:
            os.environ["VEILBENCH_ROOT"] = saved
