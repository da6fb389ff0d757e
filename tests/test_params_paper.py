"""params.paper.yaml: the papers' settings validate, stay apart from the default run's sweeps, and
hold the settings the families' specs name (a typo in a paper value fails here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from veilbench.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def test_paper_params_validate_and_do_not_collide_with_the_default_run() -> None:
    paper = load_config(ROOT / "params.paper.yaml")
    default = load_config(ROOT / "params.yaml")
    assert all(name.startswith("paper-") for name in paper.sweeps)
    assert not set(paper.sweeps) & set(default.sweeps)
    # Fashion-MNIST for every paper setting; GCA's tabular stand-ins ship with scikit-learn
    assert {ds.source for ds in paper.datasets.values()} == {"fashion_mnist", "breast_cancer", "wine"}
    tabular = {n for n, s in paper.sweeps.items() if paper.embeddings[s.embedding].dataset in ("breast-cancer", "wine")}
    assert tabular == {"paper-gca-breast-cancer", "paper-gca-wine"}


def test_paper_params_hold_each_familys_paper_setting() -> None:
    cfg = load_config(ROOT / "params.paper.yaml")
    gca = [s for n, s in cfg.sweeps.items() if s.family == "gca" and n.startswith("paper-gca-fmnist")]
    pairs = {(s.seeds[0], s.params["normal_classes"][0], s.params["anomaly_classes"][0]) for s in gca}
    assert pairs == {(100, 2, 8), (200, 0, 4), (300, 9, 5)}
    for s in gca:
        cells = s.expand().values()
        assert {c["method"] for c in cells} == {"gca", "single", "centralized", "fedavg", "fedprox", "fednova", "dpfedavg"}
        assert all("selection" not in c for c in cells)  # every protocol is a metric of one cell; validation decides
        assert all(c["rounds"] == 100 and c["n_clients"] == 20 and c["upload_fraction"] == 0.1
                   and c["n_clusters"] == 10 and c["recon_epochs"] == c["align_epochs"] == 5 and c["local_epochs"] == 10
                   for c in cells)
        # spec gca.md §4.2 (vision GMM), §6 (the attack's budget), §2.2 (balanced test pool)
        assert all((c["covariance_type"], c["reg_covar"], c["gmm_n_init"]) == ("diag", 0.1, 100) for c in cells)
        assert all((c["attack_starts"], c["attack_max_steps"], c["attack_extra_epochs"], c["surrogate_max_epochs"])
                   == (100, 1000, 5, 1000) and c["test_balance"] == "balanced" for c in cells)
    anchors = [c["n_anchor"] for c in cfg.sweeps["paper-dc-fmnist-anchors"].expand().values()]
    assert min(anchors) == 1000 and max(anchors) == 20000
    rq4 = cfg.sweeps["paper-dc-fmnist-rq4"]
    assert len(rq4.seeds) == 30 and {c["d_tilde"] for c in rq4.expand().values()} == {4, 16, 64}
    assert cfg.embeddings[cfg.sweeps["paper-anchornoise-fmnist-v"].embedding].dim == 50
    assert cfg.datasets[cfg.embeddings["fmnist-pca50"].dataset].options == {"features": "unit"}
    risk = cfg.sweeps["paper-scoreshield-fmnist-risk"].expand().values()
    assert max(c["n_records"] for c in risk) == 2000


def test_reduced_params_keep_one_cell_and_one_seed_per_family_with_the_stated_reductions(tmp_path) -> None:
    import yaml

    from flows.paper_reduced import REDUCED, reduced_params

    paper = yaml.safe_load((ROOT / "params.paper.yaml").read_text())
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(reduced_params(paper), sort_keys=False, allow_unicode=True))
    cfg = load_config(path)
    assert sorted(s.family for s in cfg.sweeps.values()) == sorted(REDUCED)
    for family, (sweep, cell, reductions) in REDUCED.items():
        reduced = cfg.sweeps[f"{sweep}-reduced"]
        (only,) = reduced.expand().values()
        assert len(reduced.seeds) == 1 and reduced.seeds[0] == paper["sweeps"][sweep]["seeds"][0]
        assert {**cell, **reductions}.items() <= only.items()
        untouched = {k: v for k, v in paper["sweeps"][sweep].get("params", {}).items() if k not in reductions}
        assert untouched.items() <= only.items(), family


def test_paper_gca_params_keep_one_sweep_and_the_chosen_methods_with_the_paper_setting() -> None:
    import yaml

    from tasks.paper_gca import gca_params

    paper = yaml.safe_load((ROOT / "params.paper.yaml").read_text())
    out = gca_params(paper, "paper-gca-fmnist-2v8", ["fedavg", "gca"])
    (spec,) = out["sweeps"].values()
    assert list(out["sweeps"]) == ["paper-gca-fmnist-2v8"] and spec["grid"]["method"] == ["gca", "fedavg"]
    assert spec["params"] == paper["sweeps"]["paper-gca-fmnist-2v8"]["params"]  # nothing else reduced
    for sweep, methods, field in (("paper-dc-fmnist-rq4", ["gca"], "--sweep"), ("paper-gca-fmnist-2v8", ["fedsgd"], "--method")):
        with pytest.raises(SystemExit, match=f"^error: {field}: "):
            gca_params(paper, sweep, methods)
