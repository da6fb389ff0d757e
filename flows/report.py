"""Flow for the ``report`` stage: ``python -m flows.report [--params params.yaml]``."""

import argparse

from prefect import flow

from tasks.report import report_task


@flow(name="report", log_prints=True)
def report_flow(params_path: str | None = None) -> str:
    return str(report_task(params_path))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m flows.report", description="Build reports/index.md")
    parser.add_argument("--params", default=None)
    print(report_flow(params_path=parser.parse_args().params))
