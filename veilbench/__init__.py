"""veilbench: privacy-preserving representation sharing, measured.

The library package holds the algorithms only (mechanisms, projections, alignment,
integration, attacks, metrics, data loaders). It imports neither Prefect, DVC nor MLflow,
so everything here can be unit-tested and reused on its own; the pipeline lives in
``tasks/`` and ``flows/``.
"""

__version__ = "0.1.0"
