"""Flow for the ``report`` stage: ``python -m flows.report [--params params.yaml]``."""

import argparse
import sys

from prefect import flow

from tasks.common import pinned_params, verify_snapshot
from tasks.report import report_task


@flow(name="report", log_prints=True)
def report_flow(params_path: str | None = None) -> str:
    return str(report_task(params_path))


def _body(params: str | None) -> None:
    from flows.server import use_shared_server

    with pinned_params(params):
        use_shared_server("flows.report", sys.argv[1:])  # the project's shared server unless one is set
        print(report_flow(params_path=params))
        verify_snapshot()  # DVC records the params file as it is after this process: the one it read


if __name__ == "__main__":
    from flows.errors import run_entry

    parser = argparse.ArgumentParser(prog="python -m flows.report", description="Build reports/index.md")
    parser.add_argument("--params", default=None)
    args = parser.parse_args()
    sys.exit(run_entry(lambda: _body(args.params)))  # one error: line, 2 for a user error
