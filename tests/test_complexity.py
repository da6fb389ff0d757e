"""The pipeline layers stay readable: no function in ``tasks/`` or ``flows/`` above radon's grade C
(cyclomatic complexity ≤ 20; McCabe, *IEEE TSE* 2 (1976)). A function that grows past it is split
into named steps, as ``tasks/report/`` is."""

from __future__ import annotations

from pathlib import Path

from radon import complexity as cc

ROOT = Path(__file__).resolve().parents[1]
#: radon's grade C ends at 20 (A ≤ 5, B ≤ 10, C ≤ 20, D ≤ 30, …)
MAX_COMPLEXITY = 20


def test_no_function_in_the_pipeline_layers_is_above_grade_c() -> None:
    too_complex = []
    for folder in ("tasks", "flows"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for block in cc.cc_visit(path.read_text(encoding="utf-8")):
                if block.complexity > MAX_COMPLEXITY:
                    too_complex.append(f"{path.relative_to(ROOT)}:{block.lineno} {block.fullname} "
                                       f"({cc.cc_rank(block.complexity)} {block.complexity})")
    assert not too_complex, "split these into named steps: " + "; ".join(too_complex)
