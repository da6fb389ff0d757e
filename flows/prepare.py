"""Flow for the ``prepare`` stage: ``python -m flows.prepare [--dataset NAME] [--params params.yaml]``."""

import sys

from flows._stage import main, make_stage_flow
from tasks.prepare import prepare_task

prepare_flow = make_stage_flow("prepare", prepare_task)

if __name__ == "__main__":
    sys.exit(main("prepare", prepare_flow))
