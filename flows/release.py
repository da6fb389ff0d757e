"""Flow for the ``release`` stage: ``python -m flows.release [--sweep NAME] [--params params.yaml]``."""

import sys

from flows._stage import main, make_stage_flow

release_flow = make_stage_flow("release")

if __name__ == "__main__":
    sys.exit(main("release", release_flow))
