"""ScoreShield: differentially private release of cosine score vectors and Gram matrices.

Spec: ``shared/specs/scoreshield.md``. Modules, one job each:

* :mod:`sensitivity`: Δ of the score vector (2, 1 + m, 2√q) and of the Gram (2√(2(n − 1)));
* :mod:`vector`: regime (i) Gaussian score release, clipping, and its privacy audit;
* :mod:`gram`: regime (ii) noisy Gram release (record / output adjacency), audit, projector table,
  the analyst's spectral embedding of a released Gram;
* :mod:`projectors`: P_PSD, P_box, AAP, Dykstra, clip-only, eigen-clip + rescale, residuals;
* :mod:`newton`: exact nearest-correlation projection (Qi–Sun semismooth Newton);
* :mod:`baselines`: embedding-noise and identity Gram releases;
* :mod:`risk`: Frobenius risk vs n, log–log slopes and the spec's per-cell risk predictions;
* :mod:`cf`, :mod:`text`: MovieLens collaborative filtering and the paraphrase-text corpus;
* :mod:`tasks`: downstream metrics shared by both regimes;
* :mod:`params`, :mod:`vector_stages`, :mod:`gram_stages`, :mod:`family`: the pipeline cell.
"""
