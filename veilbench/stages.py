"""The pipeline's stages, in order: the one list every module, flow and test imports.

``prepare`` (load, split, partition a data set) and ``embed`` (encode it) are generic; each method
family implements the four cell stages :data:`STAGES` (:mod:`veilbench.families.base`); ``report``
reads every sweep's results. ``dvc.yaml`` cannot import it: a test checks that its stages are
these, in this order.
"""

#: The stages a family implements, in pipeline order (one function each).
STAGES: tuple[str, ...] = ("release", "integrate", "attack", "evaluate")

#: Every stage of the pipeline, in order.
PIPELINE_STAGES: tuple[str, ...] = ("prepare", "embed", *STAGES, "report")
