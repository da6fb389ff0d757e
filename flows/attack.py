"""Flow for the ``attack`` stage: ``python -m flows.attack [--sweep NAME] [--params params.yaml]``."""

import sys

from flows._stage import main, make_stage_flow
from tasks.attack import attack_task

attack_flow = make_stage_flow("attack", attack_task)

if __name__ == "__main__":
    sys.exit(main("attack", attack_flow))
