"""Flow for the ``evaluate`` stage: ``python -m flows.evaluate [--sweep NAME] [--params params.yaml]``."""

import sys

from flows._stage import main, make_stage_flow

evaluate_flow = make_stage_flow("evaluate")

if __name__ == "__main__":
    sys.exit(main("evaluate", evaluate_flow))
