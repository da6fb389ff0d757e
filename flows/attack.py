"""Flow for the ``attack`` stage: ``python -m flows.attack [--sweep NAME] [--params params.yaml]``."""

import sys

from flows._stage import main, make_stage_flow

attack_flow = make_stage_flow("attack")

if __name__ == "__main__":
    sys.exit(main("attack", attack_flow))
