"""Flow for the ``release`` stage: ``python -m flows.release [--sweep NAME] [--params params.yaml]``."""

import sys

from flows._stage import main, make_stage_flow
from tasks.release import release_task

release_flow = make_stage_flow("release", release_task)

if __name__ == "__main__":
    sys.exit(main("release", release_flow))
