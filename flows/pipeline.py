"""The default run: DVC plans, one task graph in this process executes, DVC records.

``veilbench run`` calls :func:`reproduce_in_process`, in three steps.

1. *Plan.* DVC's own planner walks ``dvc.yaml`` in dependency order, as ``dvc repro`` does, with
   a ``repro_fn`` (:class:`StalePlanner`) that runs nothing: a stage is stale when ``force`` is
   given, when DVC finds it changed (deps, params, outs against ``dvc.lock``), or when a stage it
   depends on is stale. (``dvc repro`` decides the last case after running the upstream stage and
   skips the downstream one if the upstream outputs came out identical; here it runs, and its
   cells, whose input keys did not change, are reused, so the results and the lock are the same.)
2. *Execute.* The stale stages run as one graph of Prefect tasks (:func:`flows.dag.run_stage_dag`)
   inside one ``pipeline`` flow (:meth:`PlannedRun.execute`): each starts once the stages it needs
   have finished, and the workers take the next ready cell of any stage, with no Python start-up
   per stage (as ``dvc repro`` pays) and no idle workers at stage boundaries.
3. *Record.* As each stage finishes, DVC saves and commits its outputs (what ``Stage.run`` does
   after its command) in this thread while the workers go on; the ``dvc.lock`` entries of all
   stages that ran are written together when the run ends, also on an error (DVC re-parses and
   rewrites the whole lock per entry). DVC reads ``params.yaml`` when it saves a stage; if the
   file no longer has the bytes the run was pinned to (:func:`tasks.common.snapshot_params`), the
   stage is not saved (it stays stale) and the run ends with a :class:`UsageError`.

The lock is therefore the same as after ``dvc repro``: a later ``dvc repro`` or ``dvc status``
sees nothing to do, and ``dvc repro`` remains available (``veilbench run
--per-stage-processes``) with identical results. A run killed outright loses only lock entries;
the next run sees those stages as changed and reuses their cells (input keys unchanged).

Progress and Ctrl-C. ``progress`` (a :class:`tasks.progress.RunProgress` factory) is told of every
stage and cell as it starts and ends. ``interrupt`` (:class:`flows.interrupt.Interrupt`) makes
Ctrl-C stop within seconds: DVC files are written only under its lock, so a stop never cuts one
short.

The hook is DVC's ``repro_fn`` argument of ``Repo.reproduce`` (used by DVC's experiments for the
same purpose); dvc is pinned in ``pyproject.toml`` because this is not a documented public API.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import chdir, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows._stage import cell_threads, single_threaded_blas, stages_use_torch
from flows.dag import run_stage_dag
from flows.interrupt import Interrupt
from tasks.common import load_params, verify_snapshot
from tasks.environment import pinned_environment

log = logging.getLogger("veilbench.pipeline")


class StalePlanner:
    """A ``repro_fn`` for ``Repo.reproduce`` that runs nothing: it records the stale stages, in
    DVC's order, and for each the stale stages it depends on (``needs``)."""

    def __init__(self) -> None:
        self.stages: dict[str, Any] = {}
        self.needs: dict[str, list[str]] = {}

    def __call__(self, stage: Any, upstream: list[Any] | None = None, force: bool = False, **_: Any) -> Any:
        stale_upstream = [u.addressing for u in upstream or [] if u.addressing in self.stages]
        if not (force or stale_upstream or stage.changed(False, upstream)):
            log.info("Stage '%s' didn't change, skipping", stage.addressing)
            return None
        self.stages[stage.addressing] = stage
        self.needs[stage.addressing] = stale_upstream
        return stage


class PlannedRun:
    """The stale stages of one plan: run them as the ``pipeline`` flow, saving and committing each
    stage's outputs to DVC as it finishes; :meth:`flush` writes their lock entries in one go.
    ``progress`` (a :class:`tasks.progress.RunProgress`) is told of stages and cells as they go."""

    def __init__(self, stages: dict[str, Any], needs: dict[str, list[str]], progress: Any = None,
                 interrupt: Interrupt | None = None):
        self.stages, self.needs = stages, needs
        self.progress = progress
        self.interrupt = interrupt or Interrupt()
        self.executed: list[str] = []
        self._unlocked: list[Any] = []

    def start(self, address: str) -> None:
        if self.progress is None:
            print(f"Running stage '{address}' (in process)", flush=True)
        else:
            self.progress.stage_started(address)

    def record(self, address: str) -> None:
        """Save and commit the finished stage ``address`` to DVC, unless the params file the run
        pinned has changed: DVC reads the params file when it saves a stage, so its lock entry
        would name params other than those its outputs were made from. That stage stays
        unrecorded (stale) and the run ends with the :class:`UsageError`; the stages recorded
        before keep their entries (:meth:`flush`)."""
        stage = self.stages[address]
        with self.interrupt.writing():
            verify_snapshot()
            stage.save(run_cache=False)
            verify_snapshot()  # still the run's version after DVC read it
            stage.commit()
            self._unlocked.append(stage)
        self.executed.append(address)
        if self.progress is not None:
            self.progress.stage_done(address)

    def execute(self) -> list[str]:
        """Run the planned stages as one ``pipeline`` flow on a pool of :func:`cell_threads` threads
        (made for this run); returns their DVC addresses in the order they finished."""
        threads = cell_threads()

        def pipeline() -> list[str]:
            p = self.progress
            with single_threaded_blas(threads, stages_use_torch(load_params(), self.needs)):
                run_stage_dag(self.needs, on_start=self.start, on_done=self.record,
                              on_cells=None if p is None else p.stage_cells, on_cell=None if p is None else p.cell_done,
                              workers=threads)
            return self.executed

        return flow(name="pipeline", task_runner=ThreadPoolTaskRunner(max_workers=threads))(pipeline)()

    def flush(self) -> None:
        """Write the ``dvc.lock`` entries of the stages recorded since the last flush, one write per
        file (under :attr:`Interrupt.dvc_writes`: an interrupted run never cuts it short), and keep
        their outputs' ``.gitignore`` entries with them (:func:`_keep_ignored`)."""
        with self.interrupt.dvc_writes:
            by_file: dict[str, list[Any]] = {}
            for stage in self._unlocked:
                by_file.setdefault(stage.dvcfile.path, []).append(stage)
            for stages in by_file.values():
                stages[0].dvcfile.dump_stages(stages, update_pipeline=False)
                _keep_ignored(stages)
            self._unlocked.clear()


def _keep_ignored(stages: list[Any]) -> None:
    """Make the ``.gitignore`` entries DVC wrote for ``stages``' outputs (when it committed them)
    permanent, as their lock entries now are: DVC's ``scm_context`` removes every entry it added
    when the block it guards ends by an exception, which a run that failed after these stages
    finished does, so a locked output would otherwise be left out of git's ignores (and ``git
    status`` lists it) while DVC, finding the stage up to date, never writes the entry again."""
    context = stages[0].repo.scm_context
    locked = {out.fs_path for stage in stages for out in stage.outs}
    context.ignored_paths[:] = [p for p in context.ignored_paths if p not in locked]


@contextmanager
def _stage_environment(root: Path) -> Iterator[None]:
    """``VEILBENCH_ROOT`` and ``DVC_ROOT`` set to ``root`` (stage code reads them, as under ``dvc repro``)."""
    with pinned_environment(VEILBENCH_ROOT=str(root), DVC_ROOT=str(root)):
        yield


def plan(root: Path, targets: list[str] | None = None, force: bool = False) -> dict[str, list[str]]:
    """The stale stages of ``targets`` (default: the whole ``dvc.yaml``) as DVC's planner finds them
    (step 1 of the module docstring), each with the stale stages it needs, in DVC's order; runs
    nothing and writes nothing (``veilbench run --dry-run``)."""
    from dvc.repo import Repo, lock_repo

    logging.getLogger("dvc").propagate = False
    with chdir(root), _stage_environment(root), Repo(str(root)) as repo, lock_repo(repo):
        return _plan(repo, targets, force).needs


def _plan(repo: Any, targets: list[str] | None, force: bool) -> StalePlanner:
    planner = StalePlanner()
    planning_log = logging.getLogger("dvc.repo.reproduce")
    level = planning_log.level
    planning_log.setLevel(logging.WARNING)  # DVC logs an empty line per stale stage while it plans
    try:
        repo.reproduce(targets or None, force=force, repro_fn=planner)
    finally:
        planning_log.setLevel(level)
    return planner


def reproduce_in_process(root: Path, targets: list[str] | None = None, force: bool = False,
                         before_execute: Callable[[], object] | None = None,
                         progress: Callable[[list[str]], Any] | None = None,
                         interrupt: Interrupt | None = None) -> list[str]:
    """Plan ``targets`` (default: the whole ``dvc.yaml``) under the DVC repo lock, then, if any
    stage is stale, call ``before_execute`` (``veilbench run`` waits there for the Prefect server
    that boots while DVC plans) and run them in this process. Returns the DVC addresses of the
    stages that ran, in the order they finished (``[]``, and no flow at all, when all was up to date).

    ``progress(stages)`` makes the progress display (a context manager) for the planned stages;
    ``interrupt`` guards the DVC writes and gets the lock flush as a clean-up (module docstring)."""
    from dvc.repo import Repo, lock_repo

    logging.getLogger("dvc").propagate = False  # DVC prints its own messages; Prefect's root handler would repeat them
    # DVC resolves targets (and the default dvc.yaml) against the working directory, as `dvc repro` run there
    with chdir(root), _stage_environment(root), Repo(str(root)) as repo, lock_repo(repo):  # lock entries written under it too
        planner = _plan(repo, targets, force)
        if not planner.stages:
            return []
        if before_execute is not None:
            before_execute()
        interrupt = interrupt or Interrupt()
        display = progress(list(planner.stages)) if progress is not None else None
        run = PlannedRun(planner.stages, planner.needs, display, interrupt)
        with repo.scm_context(), (display if display is not None else nullcontext()):
            if display is not None:
                interrupt.cleanups.append(lambda: display.__exit__(None, None, None))
            try:
                return run.execute()
            finally:
                run.flush()
