"""A factory for the per-stage flows, so that each ``flows/<stage>.py`` is three lines."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.dag import run_stage_dag
from tasks.common import cell_threads, load_params, pinned_params, verify_snapshot  # noqa: F401 - cell_threads re-exported
from tasks.paths import CELL_STAGES

#: stage → (params section whose keys the stage iterates over, CLI option naming one key)
STAGE_KEYS: dict[str, tuple[str, str]] = {
    "prepare": ("datasets", "dataset"),
    "embed": ("embeddings", "embedding"),
    **{stage: ("sweeps", "sweep") for stage in CELL_STAGES},
}


def cells_use_torch(family: str, cells: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any of ``cells`` (a sweep's cell options, :meth:`veilbench.config.SweepConfig.expand`)
    of the registered ``family`` may load torch, as the family declares it
    (:func:`veilbench.families.base.cells_use_torch`)."""
    from veilbench.families import get_family
    from veilbench.families.base import cells_use_torch as declared

    return declared(get_family(family), cells)


#: Embedding encoders that load torch (the sentence encoder runs sentence-transformers).
TORCH_ENCODERS = {"sentence"}


def stages_use_torch(cfg: Any, addresses: Iterable[str]) -> bool:
    """Whether any of the stage instances ``addresses`` (DVC addresses, :mod:`flows.dag`) of the
    params ``cfg`` may load torch: an ``embed`` with a :data:`TORCH_ENCODERS` encoder, a cell stage of
    a sweep whose cells do (:func:`cells_use_torch`); ``prepare`` and ``report`` never do. An
    address these params do not name counts as loading torch. :func:`single_threaded_blas` raises
    if the rule ever says no for a cell that then loads torch."""
    for address in addresses:
        stage, _, key = address.partition("@")
        if stage in ("prepare", "report"):
            continue
        if stage == "embed":
            if key not in cfg.embeddings or cfg.embeddings[key].encoder in TORCH_ENCODERS:
                return True
        elif key not in cfg.sweeps or cells_use_torch(cfg.sweeps[key].family, cfg.sweeps[key].expand().values()):
            return True
    return False


@contextmanager
def single_threaded_blas(threads: int, torch_cells: bool = True) -> Iterator[None]:
    """Run cells with one BLAS/OpenMP thread and one torch intra-op thread each, however many cells
    (``threads``) run at once: two cells with two threads each would oversubscribe two cores, and
    torch's reductions sum in an order that depends on its thread count, so one thread per cell also
    makes a cell's bits independent of ``VEILBENCH_CELL_THREADS``. The library never sets thread
    counts; this is the pipeline's one place that does. Torch's count is process-wide and read by each
    worker thread on its first parallel operation, so it is set here, before any cell runs, and
    restored afterwards.

    ``torch_cells=False`` (no cell will load torch, :func:`stages_use_torch`) leaves torch unimported
    where nothing has imported it yet: a stage process of a torch-free sweep does not pay for it. If
    torch is loaded inside the block all the same, its cells ran with torch's default thread count:
    a :class:`RuntimeError` says so on leaving the block (the stage fails rather than record them)."""
    from threadpoolctl import threadpool_limits

    torch = None
    if torch_cells or "torch" in sys.modules:
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(previous)
    if torch is None and "torch" in sys.modules:
        raise RuntimeError("a cell loaded torch although flows._stage.stages_use_torch said none would, so it ran "
                           "with torch's default thread count; declare it in the family's USES_TORCH or TORCH_OPTIONS "
                           "(veilbench.families.base) or in TORCH_ENCODERS")


def run_cell_stage(stage: str, sweeps: list[str], params_path: str | None) -> list[str]:
    """Inside a flow: run ``stage`` for every cell of ``sweeps`` on the flow's task runner (the
    sweeps' cells side by side, see :func:`flows.dag.run_stage_dag`). Returns the output folders."""
    results = run_stage_dag({f"{stage}@{sw}": [] for sw in sweeps}, params_path, workers=cell_threads())
    return [str(results[f"{stage}@{sw}"]) for sw in sweeps]


def make_stage_flow(stage: str, stage_task: Any = None) -> Callable[..., list[str]]:
    """A flow running one stage for the given keys (default: every key of the stage's section):
    ``stage_task`` per dataset/embedding for prepare and embed, the sweep cell tasks otherwise.

    Cells run :func:`cell_threads` at a time in worker threads (MLflow keeps the active run per
    thread; cells of every family run concurrently, see :mod:`veilbench.families.base`),
    each with single-threaded BLAS; ``flows.benchmark --workers N`` runs them in Dask processes.
    The flow's pool of threads is made when it runs (:func:`main`: ``with_options``), sized by
    :func:`cell_threads` then."""
    section, _ = STAGE_KEYS[stage]

    def run_name() -> str:
        from prefect.runtime import flow_run

        keys = flow_run.parameters.get("keys")
        return f"{stage}@{','.join(keys)}" if keys else f"{stage} (all {section})"

    @flow(name=stage, flow_run_name=run_name, log_prints=True)
    def stage_flow(keys: list[str] | None = None, params_path: str | None = None) -> list[str]:
        cfg = load_params(params_path)
        names = keys or list(getattr(cfg, section))
        if section == "sweeps":
            with single_threaded_blas(cell_threads(), stages_use_torch(cfg, [f"{stage}@{n}" for n in names])):
                return run_cell_stage(stage, names, params_path)
        futures = [stage_task.submit(name, params_path) for name in names]
        return [str(f.result()) for f in futures]

    return stage_flow


def main(stage: str, stage_flow: Callable[..., list[str]], argv: list[str] | None = None) -> int:
    """Command line of ``python -m flows.<stage>``: ``--<key> NAME`` (repeatable) and ``--params``.
    Errors end as one line (:func:`flows.errors.run_entry`: 2 for a user error); run as a process
    without ``PREFECT_API_URL`` (``argv`` None), the stage uses the project's shared Prefect server
    (:func:`flows.server.use_shared_server`)."""
    section, option = STAGE_KEYS[stage]
    parser = argparse.ArgumentParser(
        prog=f"python -m flows.{stage}",
        description=f"Run the {stage!r} stage as a Prefect flow for the named {section} (default: all).",
    )
    parser.add_argument(f"--{option}", action="append", dest="keys", metavar="NAME", help=f"one of params.yaml {section}; repeatable")
    parser.add_argument("--params", default=None, help="path to params.yaml (default: at the repo root)")
    args = parser.parse_args(argv)
    from flows.errors import run_entry
    from flows.server import use_shared_server

    def body() -> None:
        with pinned_params(args.params):
            load_params(args.params)  # validate before any work starts
            cell_threads()
            if argv is None:  # a process of its own (dvc repro): the project's shared server unless one is set
                use_shared_server(f"flows.{stage}", sys.argv[1:])
            runner = ThreadPoolTaskRunner(max_workers=cell_threads())
            stage_flow.with_options(task_runner=runner)(keys=args.keys, params_path=args.params)
            verify_snapshot()  # DVC records the params file as it is after this process: the one it read

    return run_entry(body)
