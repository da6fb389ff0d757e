"""What data collaboration supplies to the report (the interface: :mod:`tasks.report.families`)."""

from __future__ import annotations

#: the question data collaboration answers, in a reader's words
QUESTION = ("Parties share obfuscated intermediate representations and a shared anchor (data collaboration): how "
            "much accuracy does the collaboration keep, and how well can an attacker with leaked anchor pairs "
            "reconstruct the records?")

#: its name in figure titles
TITLE = "Data collaboration"
