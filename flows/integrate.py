"""Flow for the ``integrate`` stage: ``python -m flows.integrate [--sweep NAME] [--params params.yaml]``."""

import sys

from flows._stage import main, make_stage_flow

integrate_flow = make_stage_flow("integrate")

if __name__ == "__main__":
    sys.exit(main("integrate", integrate_flow))
