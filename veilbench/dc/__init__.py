"""Data Collaboration analysis (spec ``data-collaboration.md``): anchors, per-party obfuscation,
integration (MPP, GEP, ODC, LKI, NKI[+GL/TSL][+Center], Nyström NKI), reconstruction attacks and
downstream utility. The pipeline contract is in :mod:`veilbench.dc.family`.
"""

from veilbench.dc.kernel import NKI
from veilbench.dc.linear import GEP, LKI, MPP, ODC
from veilbench.dc.nystrom import NystromNKI

__all__ = ["GEP", "LKI", "MPP", "NKI", "ODC", "NystromNKI"]
