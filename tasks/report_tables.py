"""Markdown tables of the report: GitHub pipe tables written by :mod:`tabulate`."""

from __future__ import annotations

from tabulate import tabulate


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured pipe table of ``rows`` (cells already formatted as strings, kept as they
    are: tabulate's number parsing is off), ending with a newline.

    >>> print(markdown_table(["a", "b"], [["1.50", "x"]]), end="")
    | a    | b   |
    |------|-----|
    | 1.50 | x   |
    """
    return tabulate(rows, headers=header, tablefmt="github", disable_numparse=True) + "\n"
