"""Flow for the ``report`` stage: ``python -m flows.report [--params params.yaml]``."""

import argparse
import sys

from prefect import flow

from tasks.common import pinned_params, verify_snapshot
from tasks.report import report_task
from veilbench.validation import UsageError


@flow(name="report", log_prints=True)
def report_flow(params_path: str | None = None) -> str:
    return str(report_task(params_path))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m flows.report", description="Build reports/index.md")
    parser.add_argument("--params", default=None)
    params = parser.parse_args().params
    try:
        with pinned_params(params):
            print(report_flow(params_path=params))
            verify_snapshot()  # DVC records the params file as it is after this process: the one it read
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
