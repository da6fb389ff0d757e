"""The whole pipeline as one Prefect flow: ``python -m flows.benchmark [--params params.yaml]``.

Runs prepare → embed → release → integrate → attack → evaluate → report for every dataset,
embedding and sweep of ``params.yaml`` in one process (one Prefect server start, imports paid
once). Within a stage, independent items are submitted concurrently to the flow's task runner.
``veilbench run`` uses DVC instead, which reruns only what changed; this flow always recomputes.
"""

from __future__ import annotations

import argparse
import sys

from prefect import flow

from tasks.attack import attack_task
from tasks.common import load_params
from tasks.embed import embed_task
from tasks.evaluate import evaluate_task
from tasks.integrate import integrate_task
from tasks.prepare import prepare_task
from tasks.release import release_task
from tasks.report import report_task

CELL_TASKS = (release_task, integrate_task, attack_task, evaluate_task)


@flow(name="benchmark", log_prints=True)
def benchmark(params_path: str | None = None, sweeps: list[str] | None = None) -> str:
    """Run every stage for the configured (or the named) sweeps and rebuild the report."""
    cfg = load_params(params_path)
    names = sweeps or list(cfg.sweeps)
    embeddings = sorted({cfg.sweeps[c].embedding for c in names})
    datasets = sorted({cfg.embeddings[e].dataset for e in embeddings})
    for f in [prepare_task.submit(d, params_path) for d in datasets]:
        f.result()
    for f in [embed_task.submit(e, params_path) for e in embeddings]:
        f.result()
    for stage_task in CELL_TASKS:
        for f in [stage_task.submit(c, params_path) for c in names]:
            f.result()
    return str(report_task(params_path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=None, help="path to params.yaml (default: at the repo root)")
    parser.add_argument("--sweep", action="append", dest="sweeps", metavar="NAME", help="run only these sweeps")
    args = parser.parse_args(argv)
    from veilbench.validation import ValidationError

    try:
        load_params(args.params)
        print(benchmark(params_path=args.params, sweeps=args.sweeps))
    except (ValidationError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
