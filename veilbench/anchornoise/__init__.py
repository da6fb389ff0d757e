"""Anchor-noise geometric data perturbation (AA-I-GDP) and its baselines.

Spec: ``shared/specs/anchor-noise.md``. Modules, one job each:

* :mod:`.anchor`: the centered orthonormal anchor A (r × d, scale s_A) (§2);
* :mod:`.mechanisms`: C-GDP, I-GDP, DC / AA-I-GDP releases with data or anchor noise (§3);
* :mod:`.gpm`: the generalized power method for generalized orthogonal Procrustes (§4);
* :mod:`.alternating`: the plain alternating generalized Procrustes baseline (§4);
* :mod:`.attacks`: Moore–Penrose, orthogonal Procrustes and alignment-map calibration (§5);
* :mod:`.linkage`: exact source linkage on a deduplicated pool (§6.1);
* :mod:`.equivalence`: claim 2 (§7), data noise after AA-I-GDP has C-GDP's law, checked on data;
* :mod:`.family`: the pipeline stages.
"""
