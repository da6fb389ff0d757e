"""What ScoreShield supplies to the report (the interface: :mod:`tasks.report.families`)."""

from __future__ import annotations

#: the question ScoreShield answers, in a reader's words
QUESTION = ("A partner receives cosine scores or a Gram matrix with Gaussian noise calibrated to (ε, δ)-DP and "
            "projected back to a valid object: how much utility is kept at each ε, and how much does an attacker "
            "recover?")

#: its name in figure titles
TITLE = "ScoreShield"

#: the privacy budget ε spans decades: a frontier against it has a log x axis unless it sets ``log_x``
LOG_SCALE_OPTIONS = frozenset({"epsilon"})
