"""Usage telemetry off in every process that imports :mod:`tasks` (the ``veilbench`` command, the
``python -m flows.*`` stage processes DVC starts, the benchmarks), not only under ``make``.

Each library reads its own switch, at import or when its server starts, so the switches are set
before either is imported (importing :mod:`tasks` does it, as for :mod:`tasks.numerics`); a value
the user set is kept:

* MLflow sends usage events unless ``MLFLOW_DISABLE_TELEMETRY`` is true (it reads
  ``DO_NOT_TRACK`` only when it is the string ``true``);
* a Prefect server (``veilbench run``'s, or the temporary one a stage process without
  ``PREFECT_API_URL`` starts) reports to Prefect unless ``PREFECT_SERVER_ANALYTICS_ENABLED`` is false;
* DVC's analytics: ``DVC_NO_ANALYTICS`` (the project's ``.dvc/config`` also sets
  ``core.analytics = false``, for DVC commands run without this package).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: variable → value that turns a library's usage reporting off.
TELEMETRY_OFF = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DVC_NO_ANALYTICS": "1",
    "DO_NOT_TRACK": "1",  # the general opt-out other tools read
}


def telemetry_off(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set :data:`TELEMETRY_OFF` in ``environ`` (default ``os.environ``) where unset; returns what was set now."""
    environ = os.environ if environ is None else environ
    added = {k: v for k, v in TELEMETRY_OFF.items() if k not in environ}
    environ.update(added)
    return added
