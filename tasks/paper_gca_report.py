"""The GCA section of the paper report: our FMNIST cells at the paper's setting beside the paper's tables.

``python -m tasks.paper_gca_report [--root runs/paper-gca] [--out reports/paper/gca.md]`` reads one
root of :mod:`tasks.paper_gca` (or of ``make reproduce``) and writes, for every GCA sweep it holds:

* per method and seed, the rounds run, the test ROC AUC and accuracy at the checkpoint selected on
  the validation pool (the verdicts' numbers), the paper's protocol (the best test accuracy over the
  checkpoints: GCA's 5 per round, the baselines' 1), the final round's ROC AUC, the extraction
  attack's NTMSE and Δcos beside the best data-free control and the attacker's advantage over it,
  and the CPU hours of the training and evaluation (the release stage's measured CPU time, over every
  session of a resumed run);
* the rounds trend: what a run stopped after R' rounds selects (a run of R' rounds is the prefix of a
  longer one), for GCA and FedAvg and their difference;
* the paper's numbers (spec gca.md §8, Tables 6 and 10: means over the three class pairs) and a
  plain statement of what our cells say about the paper's claim.

``--tabular ROOT`` adds the tabular stand-ins (``paper-gca-breast-cancer``, ``paper-gca-wine``, 10 seeds,
every method): mean [95 % t interval] per method, and the paper's claims judged as ``claims.csv``
judges them (paired per-seed tests, the flag-all detector as the data-free reference of the utility
claims, the FedAvg attack's advantage as the premise of the attack comparisons, Holm across the
sweep's claims; :func:`tasks.report.verdicts.judge_claim`).

A cell still running (or killed) is read from its per-round checkpoint: its curves so far give the
trend and its checkpoint's CPU time, and it is labelled "running, round r of R" (no attack yet).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

#: spec gca.md §8 Table 6, FMNIST, IID: accuracy % (mean ± std over the three class pairs)
PAPER_ACCURACY = {"gca": (78.61, 5.06), "single": (75.02, 5.42), "fedavg": (74.33, 6.54), "fedprox": (74.51, 6.99),
                  "fednova": (74.32, 6.53), "dpfedavg": (77.40, 2.60), "centralized": (75.03, 4.50)}
#: spec gca.md §8 Table 10, FMNIST: NTMSE and Δcos (mean ± std over the three seeds)
PAPER_ATTACK = {"gca": ((13.940, 1.236), (-1.003, 0.101)), "fedavg": ((5.007, 0.404), (-0.674, 0.019)),
                "fedprox": ((5.570, 0.562), (-0.733, 0.054)), "fednova": ((4.987, 0.402), (-0.663, 0.011)),
                "dpfedavg": ((9.573, 1.488), (-0.647, 0.106))}
#: the paper's relative change of GCA vs FedAvg on FMNIST, and the smallest over its data sets (the claim's bound)
PAPER_GAIN, CLAIM_BOUND = 0.0576, -0.0092
TREND = (1, 2, 5, 10, 25, 50, 100)
ORDER = ("gca", "fedavg", "fedprox", "fednova", "dpfedavg", "single", "centralized")
#: how each per-pair verdict block of ``gca.md`` begins (:func:`claim_blocks` reads them back)
CLAIM_HEADING = "**The paper's claim"


def claim_blocks(text: str) -> list[str]:
    """The per-pair verdict blocks of a ``gca.md`` this module wrote: each line beginning with
    :data:`CLAIM_HEADING` and the ``- `` bullets that follow it (blank lines between them kept)."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith(CLAIM_HEADING):
            inside = True
        elif inside and line and not line.startswith("- "):
            inside = False
        if inside:
            out.append(line)
    return out


def _curve_trend(curve: np.ndarray, rounds: tuple[int, ...] = TREND) -> tuple[int, list[dict[str, float]]]:
    """(rounds done, trend rows) of a curve ``(T, 6)`` [round, epoch, test acc, test AUC, val acc, val AUC]."""
    from veilbench.gca.selection import selected_index

    ppr = int((curve[:, 0] == curve[0, 0]).sum())
    done = curve.shape[0] // ppr
    rows = []
    for r in (*(t for t in rounds if t < done), done):
        t = selected_index(curve[:, 2], curve[:, 5], ppr, "validation", max_round=r)
        rows.append({"rounds": r, "roc_auc": float(curve[t, 3]), "accuracy": float(curve[t, 2]),
                     "accuracy_paper": float(curve[: r * ppr, 2].max())})
    return done, rows


def _checkpoint(root: Path, sweep: str, cell: str) -> dict[str, Any] | None:
    from veilbench.checkpoints import RoundCheckpoints

    for folder in sorted((root / "data" / "checkpoints" / "release" / sweep / cell).glob("*/seed*")):
        saved = RoundCheckpoints(folder).load()
        if saved is not None:
            return {"seed": int(folder.name[4:]), "round": saved[0], "curve": np.asarray(saved[1]["curve"]),
                    "cpu_seconds": float(saved[1].get("_cpu_seconds", math.nan)),
                    # saved before the clock was named (one thread's CPU time), or resumed from such a save
                    "cpu_partial": "_cpu_clock" not in saved[1] or bool(saved[1].get("_cpu_partial"))}
    return None


def cells(root: Path, sweep: str, planned_rounds: int) -> dict[str, list[dict[str, Any]]]:
    """method → one dict per seed: status, rounds, metrics, trend and CPU seconds (module doc)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for method in ORDER:
        cell = f"method={method}"
        record = root / "reports" / "sweeps" / sweep / "cells" / f"{cell}.json"
        if record.is_file():
            rec = json.loads(record.read_text())
            integ = np.load(root / "data" / "integrate" / sweep / cell / "arrays.npz")
            timings = json.loads((root / "data" / "release" / sweep / cell / "timings.json").read_text())["per_seed"]
            rows = []
            for seed, metrics in rec["per_seed"].items():
                trend = integ[f"s{seed}__rounds_trend"]
                curve_rows = [{"rounds": int(r), "roc_auc": float(a), "accuracy": float(c)} for r, a, c in trend]
                rel = np.load(root / "data" / "release" / sweep / cell / "arrays.npz")
                acc, ppr = rel[f"s{seed}__curve_accuracy"], int(rel[f"s{seed}__points_per_round"][0])
                for row in curve_rows:
                    row["accuracy_paper"] = float(acc[: row["rounds"] * ppr].max())
                rows.append({"seed": int(seed), "status": "done", "rounds": int(metrics["utility_rounds"]),
                             "metrics": metrics, "trend": curve_rows,
                             "cpu_seconds": float(timings.get(seed, {}).get("cpu_seconds", math.nan)),
                             "cpu_partial": bool(timings.get(seed, {}).get("cpu_partial", 0.0))})
            out[method] = rows
            continue
        ckpt = _checkpoint(root, sweep, cell)
        if ckpt is not None:
            done, trend = _curve_trend(ckpt["curve"])
            out[method] = [{"seed": ckpt["seed"], "status": f"running, round {done} of {planned_rounds}",
                            "rounds": done, "metrics": {}, "trend": trend, "cpu_seconds": ckpt["cpu_seconds"],
                            "cpu_partial": ckpt["cpu_partial"]}]
    return out


def _cpu_h(row: dict[str, Any]) -> str:
    """A cell's CPU hours; a lower bound, so marked, when its count left some threads out."""
    hours = _f(row["cpu_seconds"] / 3600, 2)
    return f"≥ {hours} (one thread's)" if row.get("cpu_partial") and hours != "—" else hours


def _f(x: float | None, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def _pm(pair: tuple[float, float] | None, digits: int = 2) -> str:
    return "—" if pair is None else f"{pair[0]:.{digits}f} ± {pair[1]:.{digits}f}"


def section(root: Path, sweep: str, params: dict[str, Any]) -> list[str]:
    """Markdown lines of one GCA sweep of ``root`` (module doc)."""
    opts = params["sweeps"][sweep]["params"]
    planned = int(opts["rounds"])
    found = cells(root, sweep, planned)
    pair = f"{opts['normal_classes'][0]}/{opts['anomaly_classes'][0]}"
    lines = [f"### `{sweep}`: class pair {pair} (normal/anomaly), the paper's setting", "",
             f"Setting (params.paper.yaml): conv AE 128/128/{opts['latent_channels']}, {opts['n_clients']} clients, "
             f"R = {planned} rounds of {opts['recon_epochs']} + {opts['align_epochs']} epochs (baselines "
             f"{opts['local_epochs']} local epochs), batch 50, ρ = {opts['upload_fraction']}, K = {opts['n_clusters']} "
             f"(GMM {opts['covariance_type']}, {opts['gmm_n_init']} inits), the attack's {opts['attack_starts']} "
             f"starts × {opts['attack_max_steps']} steps; evaluation pool split per seed into validation and test "
             "halves. Seeds and rounds are those run; CPU h is the release stage's measured CPU time (training and "
             "every evaluation), the attack's not included; *≥ … (one thread's)* marks a count of the run's main "
             "thread only, its client threads' training left out (rounds saved before the clock counted them): a "
             "lower bound.", ""]
    if not found:
        return lines + ["_Nothing run yet for this sweep._", ""]
    head = ("| method | seed | status | rounds | test ROC AUC (val-selected) | test accuracy % (val-selected) | "
            "accuracy %, paper's protocol | ROC AUC, final round | NTMSE (best control; advantage) | "
            "Δcos (best control; advantage) | CPU h | paper: accuracy % | paper: NTMSE / Δcos |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for method, rows in found.items():
        for row in rows:
            m = row["metrics"]
            last = row["trend"][-1] if row["trend"] else {}
            auc = m.get("utility_roc_auc", last.get("roc_auc"))
            acc = m.get("utility_accuracy", last.get("accuracy"))
            paper_acc = m.get("utility_accuracy_paper", last.get("accuracy_paper"))
            ntmse = (f"{_f(m['privacy_ntmse'], 2)} ({_f(m['privacy_ntmse_control_best'], 2)}; "
                     f"{_f(m['privacy_ntmse_advantage'], 2)})") if "privacy_ntmse" in m else "—"
            dcos = (f"{_f(m['privacy_delta_cos'], 3)} ({_f(m['privacy_delta_cos_control_best'], 3)}; "
                    f"{_f(m['privacy_delta_cos_advantage'], 2)})") if "privacy_delta_cos" in m else "—"
            attack = PAPER_ATTACK.get(method)
            lines.append(
                f"| {method} | {row['seed']} | {row['status']} | {row['rounds']} | {_f(auc)} | {_pct(acc)} | "
                f"{_pct(paper_acc)} | {_f(m.get('utility_roc_auc_final'))} | {ntmse} | {dcos} | "
                f"{_cpu_h(row)} | {_pm(PAPER_ACCURACY.get(method))} | "
                f"{'—' if attack is None else _pm(attack[0], 3) + ' / ' + _pm(attack[1], 3)} |")
    lines += [""]
    lines += trend_table(found)
    lines += verdict(found, int(opts["recon_epochs"]))
    return lines


def trend_table(found: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The rounds trend of GCA and FedAvg (first seed of each) and their difference."""
    if "gca" not in found or "fedavg" not in found:
        return []
    g, f = found["gca"][0]["trend"], found["fedavg"][0]["trend"]
    by_round = {r["rounds"]: r for r in f}
    lines = ["Rounds trend (what a run stopped after R' rounds selects on validation; the paper's protocol is the "
             "best test accuracy within those rounds):", "",
             "| R' | GCA ROC AUC | FedAvg ROC AUC | Δ ROC AUC | GCA accuracy | FedAvg accuracy | Δ accuracy | "
             "GCA acc., paper's protocol | FedAvg acc., paper's protocol | Δ, paper's protocol |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in g:
        other = by_round.get(row["rounds"])
        if other is None:
            continue
        lines.append(
            f"| {row['rounds']} | {_f(row['roc_auc'])} | {_f(other['roc_auc'])} | {row['roc_auc'] - other['roc_auc']:+.3f} | "
            f"{_f(row['accuracy'])} | {_f(other['accuracy'])} | {row['accuracy'] - other['accuracy']:+.3f} | "
            f"{_f(row['accuracy_paper'])} | {_f(other['accuracy_paper'])} | "
            f"{row['accuracy_paper'] - other['accuracy_paper']:+.3f} |")
    return lines + [""]


def verdict(found: dict[str, list[dict[str, Any]]], points_per_round: int) -> list[str]:
    """What the cells say about "GCA's accuracy is comparable to FedAvg (≥ −0.92 %; +5.76 % on FMNIST)"."""
    if "gca" not in found or "fedavg" not in found:
        return []
    g, f = found["gca"][0], found["fedavg"][0]
    common = min(g["rounds"], f["rounds"])
    gt = {r["rounds"]: r for r in g["trend"]}
    ft = {r["rounds"]: r for r in f["trend"]}
    at = max(r for r in gt if r in ft and r <= common)
    a, b = gt[at], ft[at]
    rel = {k: a[k] / b[k] - 1 for k in ("roc_auc", "accuracy", "accuracy_paper")}
    finished = g["status"] == f["status"] == "done"
    held = {k: v >= CLAIM_BOUND for k, v in rel.items()}
    scope = (f"at R = {at}" + ("" if finished else " (both cells still running: the paper's R = 100 is not reached)"))
    lines = [f"{CLAIM_HEADING} on this pair, {scope}, one seed** (no seed-level interval: a verdict needs the "
             "three pairs' seeds; these are the measured differences):", ""]
    for key, label in (("roc_auc", "test ROC AUC at the validation-selected checkpoint"),
                       ("accuracy", "test accuracy at the validation-selected checkpoint"),
                       ("accuracy_paper", "the paper's protocol (best test accuracy over checkpoints)")):
        lines.append(f"- {label}: GCA {a[key]:.3f} vs FedAvg {b[key]:.3f}, relative change {rel[key]:+.2%} "
                     f"({'meets' if held[key] else 'fails'} the claim's bound −0.92 %; the paper reports "
                     f"{PAPER_GAIN:+.2%} on FMNIST).")
    lines.append(f"- data-free reference (the flag-all detector: ROC AUC 0.5, accuracy 50 % on the balanced pool): "
                 f"GCA {'beats' if a['roc_auc'] > 0.5 else 'does not beat'} it, FedAvg "
                 f"{'beats' if b['roc_auc'] > 0.5 else 'does not beat'} it on ROC AUC.")
    gap = (rel["accuracy_paper"] - rel["accuracy"])
    lines += ["", f"Selecting on the test set (the paper's protocol) moves GCA's relative change by {gap:+.2%} against "
              f"the validation-selected one: GCA picks its best of {points_per_round} evaluations per round, FedAvg of 1, so the "
              "protocol alone favours GCA (spec gca.md §11.1).", ""]
    return lines


#: (claim, ours metric, op, than method, factor, premise metric or None, data-free constant or None)
TABULAR_CLAIMS = (
    ("GCA detects anomalies as well as FedAvg (test ROC AUC, validation-selected, ≥ −0.92 %)",
     "utility_roc_auc", ">=", "fedavg", 0.9908, None, 0.5),
    ("GCA's accuracy is comparable to FedAvg (test accuracy, validation-selected, ≥ −0.92 %)",
     "utility_accuracy", ">=", "fedavg", 0.9908, None, 0.5),
    ("GCA is better than Single-Client (test ROC AUC, validation-selected)", "utility_roc_auc", ">", "single", 1.0,
     None, 0.5),
    ("Against GCA the attack gains less over its best data-free control than against FedAvg (NTMSE advantage)",
     "privacy_ntmse_advantage", "<", "fedavg", 1.0, "privacy_ntmse_advantage", None),
    ("Against GCA the attack gains less over its best data-free control than against FedAvg (Δcos advantage)",
     "privacy_delta_cos_advantage", "<", "fedavg", 1.0, "privacy_delta_cos_advantage", None),
)
TABULAR_METRICS = ("utility_roc_auc", "utility_accuracy", "utility_accuracy_paper", "utility_roc_auc_final",
                   "privacy_ntmse_advantage", "privacy_delta_cos_advantage")


def _per_seed(root: Path, sweep: str, method: str) -> dict[str, dict[str, float]] | None:
    record = root / "reports" / "sweeps" / sweep / "cells" / f"method={method}.json"
    return json.loads(record.read_text())["per_seed"] if record.is_file() else None


def _ci(values: list[float]) -> str:
    from scipy import stats

    v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
    if v.size == 0:
        return "—"
    if v.size < 2:
        return f"{v.mean():.3f}"
    half = float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return f"{v.mean():.3f} [{v.mean() - half:.3f}, {v.mean() + half:.3f}]"


def _tabular_verdict(per: dict[str, dict[str, dict[str, float]]], claim: tuple[Any, ...],
                     p_adjusted: float | None = None) -> Any:
    """One row of :data:`TABULAR_CLAIMS` judged on the seeds of GCA and the other method
    (:func:`tasks.report.verdicts.judge_claim`; ``p_adjusted``: its Holm-adjusted p-value)."""
    from tasks.report.verdicts import Estimate, judge_claim

    _, metric, op, than, factor, premise, data_free = claim

    def seeds(method: str, name: str) -> Any:
        return Estimate.of_seeds({s: v[name] for s, v in per[method].items() if name in v})

    ours, other = seeds("gca", metric), seeds(than, metric)
    prem = None if premise is None else (f"{than} {premise}", seeds(than, premise))
    return judge_claim(ours, other, op, factor=factor, premise=prem, p_adjusted=p_adjusted,
                       data_free=() if data_free is None else (Estimate.of_constant(data_free),))


def tabular_section(root: Path, sweep: str) -> list[str]:
    """Markdown of one tabular stand-in sweep (module doc)."""
    from tasks.report.verdicts import holm

    per = {m: _per_seed(root, sweep, m) for m in ORDER}
    per = {m: v for m, v in per.items() if v}
    if "gca" not in per:
        return [f"### `{sweep}`", "", "_Not run yet._", ""]
    from tasks.paper_report import cpu_hours

    n = len(per["gca"])
    cpu = cpu_hours(root).get(sweep)
    cpu_txt = f"; {cpu['cpu_h']:.2f} CPU h for the sweep (`cpu.json`)" if cpu else ""
    lines = [f"### `{sweep}`: {n} seeds, every method{cpu_txt}", "",
             "| method | " + " | ".join(TABULAR_METRICS) + " |", "|---|" + "---|" * len(TABULAR_METRICS)]
    for m, seeds in per.items():
        lines.append(f"| {m} | " + " | ".join(_ci([s.get(k, math.nan) for s in seeds.values()])
                                            for k in TABULAR_METRICS) + " |")
    claims = [c for c in TABULAR_CLAIMS if c[3] in per]
    first = [_tabular_verdict(per, c) for c in claims]
    adjusted = holm([v.p_value if v.is_finding else math.nan for v in first])
    lines += ["", "| claim | verdict | GCA − f·other, mean [95 % bounds] | p | p (Holm) | why |", "|---|---|---|---|---|---|"]
    for claim, p_holm in zip(claims, adjusted, strict=True):
        v = _tabular_verdict(per, claim, p_holm)
        d = v.diff
        lines.append(f"| {claim[0]} | **{v.verdict}** | "
                     + ("—" if d is None else f"{d.mean:+.4f} [{d.lower:+.4f}, {d.upper:+.4f}]")
                     + f" | {_f(v.p_value, 4)} | {_f(p_holm, 4)} | {v.reason} |")
    return lines + [""]


def build(root: Path, paper_params: Path) -> str:
    import yaml

    params = yaml.safe_load((root / "params.yaml").read_text()) if (root / "params.yaml").is_file() else \
        yaml.safe_load(paper_params.read_text())
    sweeps = [s for s, v in params["sweeps"].items() if v["family"] == "gca"]
    out = ["## GCA on Fashion-MNIST at the paper's setting", "",
           f"Generated by `python -m tasks.paper_gca_report --root {root}` from the cells `python -m tasks.paper_gca` "
           "ran (resumable; a GPU box runs every method and pair with `make reproduce`).", ""]
    for sweep in sweeps:
        out += section(root, sweep, params)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.paper_gca_report", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="runs/paper-gca")
    parser.add_argument("--params", default="params.paper.yaml")
    parser.add_argument("--out", default="reports/paper/gca.md")
    parser.add_argument("--tabular", default=None, help="root of the tabular stand-in sweeps (e.g. runs/paper-gca-tabular)")
    args = parser.parse_args(argv)
    text = build(Path(args.root).resolve(), Path(args.params))
    if args.tabular:
        troot = Path(args.tabular).resolve()
        text += ("\n## GCA on tabular stand-ins (scikit-learn breast cancer and wine), 10 seeds\n\n"
                 f"Generated by `python -m tasks.paper_gca_report --tabular {args.tabular}` from `veilbench run --no-dvc "
                 "--params params.paper.yaml` restricted to the two sweeps. The default run's GCA protocol; verdicts "
                 "as in `claims.csv` (one family: Holm across the claims of each sweep).\n\n")
        for sweep in ("paper-gca-breast-cancer", "paper-gca-wine"):
            text += "\n".join(tabular_section(troot, sweep)) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
