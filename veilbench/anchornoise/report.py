"""What anchor noise supplies to the report (the interface: :mod:`tasks.report.families`)."""

from __future__ import annotations

#: the question anchor noise answers, in a reader's words
QUESTION = ("Parties share geometrically perturbed data plus noisy anchors, aligned by a generalized power method: "
            "how much classification utility survives, and how often can colluders link a record back to its "
            "source?")

#: its name in figure titles
TITLE = "Anchor noise"
