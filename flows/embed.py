"""Flow for the ``embed`` stage: ``python -m flows.embed [--embedding NAME] [--params params.yaml]``."""

import sys

from flows._stage import main, make_stage_flow
from tasks.embed import embed_task

embed_flow = make_stage_flow("embed", embed_task)

if __name__ == "__main__":
    sys.exit(main("embed", embed_flow))
