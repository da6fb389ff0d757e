"""Bad inputs give a ValidationError naming the argument (table-driven)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.dc.anchors import random_anchor, select_sources, smote_anchor
from veilbench.dc.attacks import LRAttack, make_attack
from veilbench.dc.kernel import NKI
from veilbench.dc.linear import GEP, LKI, MPP, ODC
from veilbench.dc.nystrom import NystromNKI
from veilbench.dc.obfuscation import make_obfuscator
from veilbench.validation import ValidationError

RNG = np.random.default_rng(0)
A = RNG.normal(size=(30, 4))
B = RNG.normal(size=(30, 4))
NAN = A.copy()
NAN[0, 0] = np.nan

CASES = [
    ("mismatched anchor rows", lambda: LKI().fit([A, B[:20]]), "anchor_reps[1]"),
    ("too few anchors", lambda: MPP().fit([A[:1], B[:1]]), "anchor_reps[0]"),
    ("d̃ > na", lambda: NKI().fit([A[:3], B[:3]]), "n_components"),
    ("d̂ = na with centering", lambda: NKI(center=True).fit([A[:4], B[:4]]), "n_components"),
    ("empty party list", lambda: GEP().fit([]), "anchor_reps"),
    ("NaN in anchor IR", lambda: LKI().fit([NAN, B]), "anchor_reps[0]"),
    ("ODC with d̃(k) ≠ d̂", lambda: ODC().fit([A, B[:, :3]]), "anchor_reps[1]"),
    ("transform wrong width", lambda: LKI().fit([A, B]).transform(A[:, :3], 0), "x"),
    ("transform unknown party", lambda: LKI().fit([A, B]).transform(A, 2), "party"),
    ("transform before fit", lambda: NKI().transform(A, 0), "fit"),
    ("λ ≤ 0", lambda: NKI(lam=0.0).fit([A, B]), "lam"),
    ("γ ≤ 0", lambda: NKI(gamma=-1.0).fit([A, B]), "gamma"),
    ("TSL without labels", lambda: NKI(graph="tsl").fit([A, B]), "anchor_labels"),
    ("TSL with unlabelled anchors", lambda: NKI(graph="tsl").fit([A, B], np.full(30, -1)), "anchor_labels"),
    ("Nyström rank > na", lambda: NystromNKI(rank=31).fit([A, B]), "rank"),
    ("attack pair count mismatch", lambda: LRAttack().fit(A, B[:20]), "ir_leaked"),
    ("reconstruct wrong width", lambda: LRAttack().fit(A, B).reconstruct(A[:, :2]), "ir"),
    ("unknown attack", lambda: make_attack("svm"), "attack"),
    ("too few SMOTE sources", lambda: select_sources(np.arange(10) % 5, 3, 0), "n_smote_source"),
    ("anchor smaller than sources", lambda: smote_anchor(A, np.arange(30) % 3, 10), "n_anchor"),
    ("unknown random anchor", lambda: random_anchor("sobol", A, 10), "anchor"),
    ("d̃ above PCA limit", lambda: make_obfuscator("pca", 9, 30, 8, 0), "d_tilde"),
    ("unknown obfuscation", lambda: make_obfuscator("tsne", 2, 30, 8, 0), "obfuscation"),
]


@pytest.mark.parametrize(("label", "call", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_validation_error_naming_the_field(label, call, field):
    with pytest.raises(ValidationError, match=field.replace("[", r"\[").replace("]", r"\]")):
        call()
