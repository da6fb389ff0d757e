"""The glossary of ``reports/index.md`` and the family pages: one line per metric shown, its
definition and its unit or range (the range from the metric's kind, :func:`tasks.report.numbers.metric_kind`)."""

from __future__ import annotations

from tasks.report.numbers import metric_kind

#: one-line definitions of the metrics a reader meets most (others are described from their name)
DEFINITIONS: dict[str, str] = {
    "utility_balanced_accuracy": "balanced accuracy of the downstream classifier on held-out records (mean recall over classes)",
    "utility_balanced_accuracy_clean_test": "balanced accuracy when the test records are not perturbed",
    "utility_accuracy": "accuracy of the downstream model on the shared test set",
    "utility_roc_auc": "ROC AUC of the downstream scores (0.5 = chance, 1 = perfect)",
    "utility_verification_accuracy": "accuracy of same-identity verification on released scores",
    "utility_recall_at_k": "fraction of true neighbours found among the top k released scores",
    "utility_map": "mean average precision of retrieval on the released scores",
    "utility_clustering_nmi": "normalised mutual information of spectral clusters with the labels",
    "utility_similarity_spearman": "Spearman rank correlation of released vs clean similarities",
    "utility_cf_rmse": "rating prediction RMSE (lower is better)",
    "privacy_linkage_max": "fraction of records an attacker links exactly to their source, best attack",
    "privacy_linkage_rate": "fraction of records linked to their source by the reconstruction attack",
    "privacy_reconstruction_accuracy_best": "accuracy of a classifier on the attacker's reconstructions, best attack",
    "privacy_epsilon_claimed": "ε the mechanism is calibrated for (DP guarantee)",
    "privacy_epsilon_lower_bound": "empirical ε lower bound from the audit (attacker evidence)",
    "privacy_delta_cos": "extraction attack: cosine gain of extracted over random records (higher = more leakage)",
    "privacy_ntmse": "extraction attack: normalised mean squared error of extracted records (lower = more leakage)",
    "linkage_chance": "linkage rate of a random guess (1 / candidate records)",
    "xfam_linkage_rate": "cross-family attacker: fraction of attacked records linked to their source",
    "xfam_utility_balanced_accuracy": "cross-family utility: balanced accuracy on held-out records",
    "gpm_converged": "the alignment stopped by its tolerance before the iteration cap (per seed)",
    "gpm_certified": "the alignment's global-optimality certificate held (per seed)",
    "gpm_iterations": "iterations of the generalized power method (cap in the cell's options)",
    "comm_mib_per_round": "MiB sent per federated round",
}


def describe(name: str) -> str:
    """A one-line definition of metric ``name`` with its unit or range."""
    kind = metric_kind(name)
    if name in DEFINITIONS:
        text = DEFINITIONS[name]
    elif name.endswith("_advantage"):
        text = ("attacker advantage over the data-free control attacker, (main − control) / (1 − control); "
                "0 = no better than without the release")
    elif "_trivial_" in name:
        text = f"the same attack metric for a data-free attacker ({name.rsplit('_trivial_', 1)[1]} guess)"
    elif name.startswith("utility_"):
        text = f"utility: {name.removeprefix('utility_').replace('_', ' ')}"
    elif name.startswith("privacy_"):
        text = f"attack outcome: {name.removeprefix('privacy_').replace('_', ' ')}"
    else:
        text = name.replace("_", " ")
    unit = {"flag": "shown as seeds where it held, 'k of n'", "unit": "in [0, 1]", "signed": "in [−1, 1]",
            "advantage": "at most 1", "real": "mean ± 95% t half-width"}[kind]
    return f"{text} ({unit})"


def glossary(names: list[str]) -> list[str]:
    """Markdown lines of a glossary of ``names`` (sorted, one definition each)."""
    lines = ["## Glossary", "",
             "Cells show the mean over seeds. Bounded metrics: `mean [lower, upper]`, the 95% t interval clipped to "
             "the metric's range; unbounded: `mean ± half-width` of the 95% t interval; yes/no outcomes: `k of n` "
             "seeds. Digits follow the interval (half-width to one significant digit).", ""]
    lines += [f"* `{n}`: {describe(n)}" for n in sorted(set(names))]
    return [*lines, ""]
