"""Run one family stage for every cell of a sweep, once per seed, from files to files.

A sweep is one DVC stage instance per stage (``release@<sweep>``, …); inside it each cell is
computed only when its *input key* changed: the SHA-256 of the cell's family options, seeds and
the digests of every input file. A cell whose key matches its existing output is reused, so
editing one ε in ``params.yaml`` recomputes only that cell (DVC reruns the sweep's stage, the
stage recomputes one cell). Cells no longer in the sweep are removed.

Files: ``data/<stage>/<sweep>/<cell>/{arrays.npz, manifest.json}`` (arrays of seed s under keys
``s<seed>__<name>``); ``evaluate`` writes ``reports/sweeps/<sweep>/cells/<cell>.json`` (per-seed
metrics, mean, 95% CI), ``reports/sweeps/<sweep>/metrics.json`` (cell → mean of each metric, ``null``
when not finite) and ``reports/sweeps/<sweep>/summary.json`` (a few columns shared by all families,
for ``dvc metrics``: :mod:`tasks.metrics_summary`). These outputs are functions of the inputs only,
so a rerun on equal inputs writes the same bytes and DVC the same hashes.

What a run measured about itself is kept beside them, in files ``.dvcignore`` hides from DVC:
``data/<stage>/<sweep>/<cell>/timings.json`` (per seed: ``seconds``, wall-clock ``started``, the
stage's own :attr:`StageOutput.timings`; for ``evaluate`` too, in ``data/evaluate/``) and
``data/<stage>/<sweep>/sweep.json`` (which cells this run computed and which it reused).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.codedeps import code_digest
from tasks.common import load_params
from tasks.paths import CELL_STAGES, checkpoint_dir, embed_dir, prepare_dir, repo_root, sweep_dir, sweep_report_dir
from tasks.progress import progress
from tasks.stage_reads import StageReads, key_options, stage_reads, stage_view
from tasks.store import key_lock, lookup, materialize, put, store_dir
from tasks.tracking import (close_parent_run, computed_run_id, fail_interrupted_runs, fail_parent_run, log_cell_metrics,
                            open_parent_run, params_file_tags, parent_run_id, per_seed_csv, stage_run)
from veilbench.config import Config, SweepConfig
from veilbench.checkpoints import RoundCheckpoints
from veilbench.crossfamily import CrossFamilyArrays, crossfamily_metrics
from veilbench.families import get_family
from veilbench.families.base import method_of
from veilbench.io import (ARRAYS, MANIFEST, TIMINGS, bundle_intact, read_bundle, read_json, read_manifest,
                          read_sealed_json, read_verified_json, write_bundle, write_json, write_sealed_json)
from veilbench.validation import UsageError


#: The release's privacy ledger beside its cells: ``{"entries": [...], "sha256": seal}`` (sealed, as every record).
LEDGER = "ledger.json"


def _split_seed(arrays: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    prefix = f"s{seed}__"
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of named arrays (names, dtypes, shapes, bytes): unlike the bytes of an ``.npz``, it
    does not change when identical arrays are written again (zip entries carry timestamps)."""
    h = hashlib.sha256()
    for name, arr in sorted(arrays.items()):
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}".encode())
        h.update(np.ascontiguousarray(arr).data)
    return h.hexdigest()


#: :func:`arrays_digest` of bundles already read or written by this process, keyed by the
#: (inode, size, mtime) of their two files: a sweep's outputs are inputs of three later stages.
_DIGESTS: dict[tuple[tuple[int, int, int], ...], str] = {}


def _stat_key(directory: Path) -> tuple[tuple[int, int, int], ...]:
    stats = [(directory / name).stat() for name in (ARRAYS, MANIFEST)]
    return tuple((st.st_ino, st.st_size, st.st_mtime_ns) for st in stats)


def _digest(directory: Path) -> str:
    """:func:`arrays_digest` of the bundle in ``directory`` (stage inputs; aliases resolved)."""
    try:
        key = _stat_key(directory)
    except FileNotFoundError:
        return arrays_digest(read_bundle(directory)[0])  # raises the bundle's own clear error
    if key not in _DIGESTS:
        _DIGESTS[key] = arrays_digest(read_bundle(directory)[0])
    return _DIGESTS[key]




def summarise(per_seed: dict[int, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Mean and 95% t-interval half-width of each metric over seeds (half-width 0 for one seed)."""
    from scipy.stats import t

    names = sorted({k for m in per_seed.values() for k in m})
    out: dict[str, dict[str, float]] = {}
    for name in names:
        vals = np.array([m[name] for m in per_seed.values() if name in m], dtype=float)
        mean = float(np.mean(vals))
        half = float(t.ppf(0.975, vals.size - 1) * np.std(vals, ddof=1) / math.sqrt(vals.size)) if vals.size > 1 else 0.0
        out[name] = {"mean": mean, "ci95": half if math.isfinite(half) else 0.0, "n": int(vals.size)}
    return out


@dataclass
class _StageContext:
    """Everything a stage needs for one sweep, resolved from params.yaml and the input files."""

    stage: str
    sweep: str
    root: Path
    cfg: Config
    family: Any
    cells: dict[str, dict[str, Any]]
    out_root: Path

    @property
    def scfg(self) -> SweepConfig:
        return self.cfg.sweeps[self.sweep]

    @property
    def dataset(self) -> str:
        return self.cfg.embeddings[self.scfg.embedding].dataset


def _context(stage: str, sweep: str, params_path: str | Path | None, root: Path | None) -> _StageContext:
    if stage not in CELL_STAGES:
        raise UsageError(f"stage: must be one of {CELL_STAGES}, got {stage!r}")
    root = root or repo_root()
    cfg = load_params(params_path, root)
    if sweep not in cfg.sweeps:
        raise UsageError(f"sweep: {sweep!r} is not in params sweeps ({sorted(cfg.sweeps)})")
    out_root = sweep_report_dir(root, sweep) / "cells" if stage == "evaluate" else sweep_dir(root, stage, sweep)
    scfg = cfg.sweeps[sweep]
    return _StageContext(stage, sweep, root, cfg, get_family(scfg.family), scfg.expand(), out_root)


def sweep_cells(sweep: str, params_path: str | Path | None = None, root: Path | None = None) -> list[str]:
    """The cell names of ``sweep`` in order."""
    return list(_context("release", sweep, params_path, root).cells)


def begin_stage(stage: str, sweep: str, params_path: str | Path | None = None, root: Path | None = None) -> list[str]:
    """Prepare a sweep stage: remove half-written leftovers of a killed run; return the cell names.
    The stage's code digest is computed here, in the calling thread, before any of its cells starts
    (:mod:`tasks.codedeps` reads syntax trees, which must not happen in two threads at once)."""
    ctx = _context(stage, sweep, params_path, root)
    code_digest(ctx.scfg.family, stage)
    _remove_temporaries(ctx.out_root)
    fail_interrupted_runs(ctx.cfg.tracking.experiment, stage, sweep, ctx.root)
    open_parent_run(ctx.cfg.tracking.experiment, stage, sweep, {
        "family": ctx.scfg.family, "dataset": ctx.dataset, "embedding": ctx.scfg.embedding,
        **params_file_tags(params_path, ctx.root)}, ctx.root)
    return list(ctx.cells)


def run_cell(stage: str, sweep: str, cell: str, params_path: str | Path | None = None, root: Path | None = None) -> str:
    """Run ``stage`` for one cell of ``sweep`` (all its seeds) unless its input key is unchanged.

    The key covers what the stage reads (:mod:`tasks.stage_reads`); a key computed before, by any
    cell of any sweep or params file sharing the store, is reused from it (:mod:`tasks.store`).
    Returns ``"computed"`` or ``"reused"``. Cells are independent, so a flow may run them in parallel.
    """
    ctx = _context(stage, sweep, params_path, root)
    if cell not in ctx.cells:
        raise UsageError(f"cell: {cell!r} is not a cell of sweep {sweep!r} ({list(ctx.cells)})")
    scfg, root = ctx.scfg, ctx.root
    ecfg = ctx.cfg.embeddings[scfg.embedding]
    options = ctx.cells[cell]
    fparams = ctx.family.Params(**options)
    reads, read_dirs, input_key, existing = _cell_key(ctx, cell, fparams)
    params = {"sweep": sweep, "cell": cell, "family": scfg.family, "embedding": scfg.embedding,
              "seeds": scfg.seeds, "family_params": fparams.model_dump(), "embedding_config": ecfg.model_dump()}
    tags = {"sweep": sweep, "cell": cell, "family": scfg.family, "dataset": ecfg.dataset,
            "embedding": scfg.embedding, "method": method_of(ctx.family, scfg.family, options),
            "seeds": ",".join(map(str, scfg.seeds)),
            "run_kind": "cell", "input_key": input_key, "reused": "false", **params_file_tags(params_path, root)}
    experiment = ctx.cfg.tracking.experiment
    parent = parent_run_id(experiment, stage, sweep, root)
    stored = _reusable_record(stage, existing, input_key)
    if stored is None:  # computed here, or by another cell with this key (kept in the store)
        store = store_dir(root)
        output = existing if stage == "evaluate" else existing.parent
        side = timings_path(root, stage, sweep, cell) if stage == "evaluate" else None
        with key_lock(store, stage, input_key):
            entry = lookup(store, stage, input_key)
            if entry is None:
                _compute_cell(ctx, cell, fparams, reads, read_dirs, existing, params, tags, parent)
                put(store, stage, input_key, output, side)
                return "computed"
            identity = {"sweep": sweep, "cell": cell, "params": params}
            if stage == "evaluate":
                identity.update(dataset=ecfg.dataset, method=tags["method"])
            stored = materialize(entry, stage, output, identity, side)
    # reused: the record gets a run re-logged from the stored metrics
    source = computed_run_id(experiment, stage, sweep, cell, input_key, root)
    with stage_run(experiment, stage, params, {**tags, "reused": "true", **({"reused_from": source} if source else {})},
                   root, fail_stale=False, parent_run_id=parent) as run:
        per_seed = {int(s): m for s, m in stored.get("per_seed", {}).items()}
        log_cell_metrics(run, stored.get("summary") or summarise(per_seed), per_seed)
        run.log_artifact(str(existing))
        if stage == "evaluate":
            run.log_text(per_seed_csv(per_seed), "tables/per_seed.csv")
    return "reused"


def _compute_cell(ctx: _StageContext, cell: str, fparams: Any, reads: StageReads, read_dirs: dict[str, Path],
                  existing: Path, params: dict[str, Any], tags: dict[str, str], parent: str | None) -> None:
    """Compute one cell's stage for every seed and write its output (:func:`run_cell`): the stage
    sees only the inputs and options its family declares for it (:func:`tasks.stage_reads.stage_view`)."""
    stage, sweep, root, scfg = ctx.stage, ctx.sweep, ctx.root, ctx.scfg
    ecfg = ctx.cfg.embeddings[scfg.embedding]
    experiment, input_key = ctx.cfg.tracking.experiment, tags["input_key"]
    base = {k: read_bundle(d)[0] for k, d in read_dirs.items() if k not in CELL_STAGES}
    earlier = {s: read_bundle(d)[0] for s, d in read_dirs.items() if s in CELL_STAGES}
    stage_fn = getattr(ctx.family, stage)
    where = f"{scfg.family}.{stage}"
    with stage_run(experiment, stage, params, tags, root, fail_stale=False, parent_run_id=parent) as run:  # begin_stage did
        arrays: dict[str, np.ndarray] = {}
        per_seed: dict[int, dict[str, float]] = {}
        info: dict[str, Any] = {}
        timings: dict[str, dict[str, float]] = {}
        measured: dict[int, dict[str, float]] = {}  # the stage function's own timings (e.g. a fit's seconds)
        ledger: list[dict[str, Any]] = []  # the DP releases of every seed (release: the sweep's privacy ledger)
        resumable = stage in getattr(ctx.family, "RESUMABLE_STAGES", ())
        for seed in scfg.seeds:
            inputs = dict(base)
            inputs.update({s: _split_seed(a, seed) for s, a in earlier.items()})
            started, t0 = time.time(), time.perf_counter()  # wall-clock start: cells may overlap
            # a long stage saves its state after every round under this input key: a killed run resumes
            extra = {"checkpoints": RoundCheckpoints(checkpoint_dir(root, stage, sweep, cell) / input_key[:16]
                                                     / f"seed{seed}")} if resumable else {}
            result = stage_fn(*stage_view(inputs, fparams, reads, where), seed, **extra)
            per_seed[seed] = result.saved_metrics()
            if stage == "evaluate":  # the cross-family view: one attack and one utility for every family
                view = CrossFamilyArrays.from_stages(inputs[s] for s in CELL_STAGES[:-1] if s in inputs)
                per_seed[seed].update(crossfamily_metrics(view, seed))
            arrays.update({f"s{seed}__{k}": v for k, v in result.saved_arrays().items()})
            ledger += [r.entry(ecfg.dataset, sweep, cell, seed, tags["method"]).as_dict() for r in result.ledger]
            info[str(seed)] = result.info
            timings[str(seed)] = {**result.timings, "seconds": time.perf_counter() - t0, "started": round(started, 3)}
            measured[seed] = {k: float(v) for k, v in result.timings.items()}
        summary = summarise(per_seed)
        record = {"stage": stage, "sweep": sweep, "cell": cell, "input_key": input_key, "seeds": scfg.seeds,
                  "params": params, "info": info, "per_seed": {str(s): m for s, m in per_seed.items()},
                  **({"ledger": ledger} if ledger else {})}
        if stage == "evaluate":
            write_sealed_json(existing, {**record, "dataset": ecfg.dataset, "method": tags["method"], "summary": summary})
            write_json(timings_path(root, stage, sweep, cell), {"per_seed": timings})
            run.log_artifact(str(existing))
            run.log_artifact(str(timings_path(root, stage, sweep, cell)))
            run.log_text(per_seed_csv(per_seed), "tables/per_seed.csv")
        else:
            out = write_bundle(ctx.out_root / cell, arrays, record, timings={"per_seed": timings})
            _DIGESTS[_stat_key(out)] = arrays_digest({k: np.asarray(v) for k, v in arrays.items()})
            run.log_artifact(str(out / "manifest.json"))
            run.log_artifact(str(out / TIMINGS))
        if resumable:  # the outputs are written: the round checkpoints of every input key go
            shutil.rmtree(checkpoint_dir(root, stage, sweep, cell), ignore_errors=True)
        log_cell_metrics(run, summary, per_seed)
        if any(measured.values()):  # as metrics too (the cell's total seconds stay in the artifact only,
            log_cell_metrics(run, summarise(measured), measured)  # out of `veilbench compare`'s columns)


def _cell_key(ctx: _StageContext, cell: str, fparams: Any) -> tuple[StageReads, dict[str, Path], str, Path]:
    """(what the stage reads, the input folders it reads, the cell's input key, where its record is)
    of ``cell``: the key is the SHA-256 of the options and inputs the stage reads
    (:mod:`tasks.stage_reads`), its seeds and its code."""
    scfg, root, stage = ctx.scfg, ctx.root, ctx.stage
    base_dirs = {"prepare": prepare_dir(root, ctx.dataset), "embed": embed_dir(root, scfg.embedding)}
    in_dirs = {s: sweep_dir(root, s, ctx.sweep) / cell for s in CELL_STAGES[: CELL_STAGES.index(stage)]}
    reads = stage_reads(ctx.family, stage)
    read_dirs = {s: d for s, d in {**base_dirs, **in_dirs}.items() if reads.inputs is None or s in reads.inputs}
    key_material = {"code": code_digest(scfg.family, stage), "family": scfg.family, "options": key_options(fparams, reads),
                    "seeds": scfg.seeds, "stage": stage, "inputs": {s: _digest(d) for s, d in read_dirs.items()}}
    input_key = hashlib.sha256(json.dumps(key_material, sort_keys=True, default=str).encode()).hexdigest()
    existing = ctx.out_root / (f"{cell}.json" if stage == "evaluate" else f"{cell}/manifest.json")
    return reads, read_dirs, input_key, existing


def cells_to_compute(stage: str, sweep: str, params_path: str | Path | None = None, root: Path | None = None) -> list[str]:
    """The cells of ``stage`` on ``sweep`` that a run would compute now (the others it would reuse),
    with the inputs as they are on disk: those without an intact record of their current input key
    (all of them when an input is missing) and not in the shared store. Reads inputs, writes nothing."""
    ctx = _context(stage, sweep, params_path, root)
    todo = []
    for cell, options in ctx.cells.items():
        try:
            *_, input_key, existing = _cell_key(ctx, cell, ctx.family.Params(**options))
        except (OSError, ValueError):  # an input not made yet (or unreadable): the cell will run
            todo.append(cell)
            continue
        if _reusable_record(stage, existing, input_key) is None and lookup(store_dir(ctx.root), stage, input_key) is None:
            todo.append(cell)
    return todo


def timings_path(root: Path, stage: str, sweep: str, cell: str) -> Path:
    """The timings sidecar of a cell of a sweep stage: ``data/<stage>/<sweep>/<cell>/timings.json``
    (beside the bundle; for ``evaluate``, whose record lives in ``reports/``, in ``data/evaluate/``)."""
    return sweep_dir(root, stage, sweep) / cell / TIMINGS


def _reusable_record(stage: str, existing: Path, input_key: str) -> dict[str, Any] | None:
    """The stored record of a cell when it was made from ``input_key`` and is intact (an evaluate
    record whose seal matches, or a bundle whose ``arrays.npz`` matches its recorded SHA-256), else
    None: a truncated, unreadable or hand-edited output is recomputed, never reused."""
    if stage == "evaluate":
        record = read_sealed_json(existing)
    else:
        record = _read_mapping(existing) if bundle_intact(existing.parent) else None
    return record if record is not None and record.get("input_key") == input_key else None


def _read_mapping(path: Path) -> dict[str, Any] | None:
    """The JSON mapping at ``path``, or ``None`` when it cannot be read."""
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def finish_stage(stage: str, sweep: str, outcomes: dict[str, str], params_path: str | Path | None = None,
                 root: Path | None = None) -> Path:
    """Close a sweep stage: drop cells no longer configured, write ``sweep.json`` (which cells this
    run computed or reused: a run record, hidden from DVC), the release's privacy ledger, or the
    evaluate tables ``metrics.json`` (cell → mean of each metric) and ``summary.json`` (what
    ``dvc metrics show`` prints)."""
    ctx = _context(stage, sweep, params_path, root)
    _remove_stale(ctx.out_root, set(ctx.cells), by_stem=stage == "evaluate")
    if stage == "evaluate":  # the timings of dropped cells
        _remove_stale(sweep_dir(ctx.root, stage, sweep), set(ctx.cells))
        from tasks.metrics_summary import cell_means_table, sweep_summary

        means = {c: {m: s["mean"] for m, s in read_verified_json(ctx.out_root / f"{c}.json")["summary"].items()}
                 for c in ctx.cells}
        write_json(sweep_report_dir(ctx.root, sweep) / "metrics.json", cell_means_table(means))
        write_json(sweep_report_dir(ctx.root, sweep) / "summary.json", sweep_summary(means, len(ctx.scfg.seeds),
                                                                                   ctx.scfg.family, ctx.cells))
        out = sweep_report_dir(ctx.root, sweep)
    else:
        write_json(ctx.out_root / "sweep.json", {
            "stage": stage, "sweep": sweep, "cells": list(ctx.cells),
            "computed": [c for c in ctx.cells if outcomes.get(c) == "computed"],
            "reused": [c for c in ctx.cells if outcomes.get(c) == "reused"]})
        if stage == "release":
            write_sealed_json(ctx.out_root / LEDGER, {"entries": ledger_entries(ctx.out_root, ctx.cells)})
        out = ctx.out_root
    # the sweep's own files (summary metrics, sweep.json, ledger, figures) go on the parent run
    close_parent_run(ctx.cfg.tracking.experiment, stage, sweep, {c: outcomes.get(c, "") for c in ctx.cells},
                     sorted(p for p in out.iterdir() if p.is_file() and not p.name.startswith(".")), ctx.root)
    return out


def abort_stage(stage: str, sweep: str, params_path: str | Path | None = None, root: Path | None = None) -> None:
    """A sweep stage that will not finish (one of its cells failed, or the run stops): its parent
    MLflow run ends FAILED instead of staying RUNNING. Its outputs are left as they are: finished
    cells are reused by the next run."""
    ctx = _context(stage, sweep, params_path, root)
    fail_parent_run(ctx.cfg.tracking.experiment, stage, sweep, ctx.root)


def run_sweep_stage(stage: str, sweep: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Run ``stage`` (release/integrate/attack/evaluate) for every cell of ``sweep``, one after another."""
    cells = begin_stage(stage, sweep, params_path, root)
    try:
        outcomes = {c: run_cell(stage, sweep, c, params_path, root)
                    for c in progress(cells, f"{stage} {sweep}", total=len(cells))}
    except BaseException:
        abort_stage(stage, sweep, params_path, root)
        raise
    return finish_stage(stage, sweep, outcomes, params_path, root)


def ledger_entries(out_root: Path, cells: Iterable[str]) -> list[dict[str, Any]]:
    """The privacy-ledger entries (:meth:`veilbench.privacy.ledger.LedgerEntry.as_dict`) the release
    cells ``cells`` under ``out_root`` recorded, in cell order, each cell's in seed order: one per
    release a seed's stage function stated (:attr:`veilbench.families.base.StageOutput.ledger`),
    with the cell's dataset, sweep, name, seed and method (:func:`run_cell`)."""
    return [entry for cell in cells for entry in read_manifest(out_root / cell).get("ledger", [])]


def _remove_temporaries(out_root: Path) -> None:
    """Delete half-written leftovers (dot-prefixed temporaries) of a killed earlier run."""
    if out_root.is_dir():
        for child in out_root.glob(".*"):
            shutil.rmtree(child) if child.is_dir() else child.unlink()


def _remove_stale(out_root: Path, keep: set[str], by_stem: bool = False) -> None:
    """Delete the children of ``out_root`` that belong to no cell of ``keep`` (by file stem when
    ``by_stem``: evaluate's ``<cell>.json``), except the sweep's own files and temporaries."""
    if not out_root.is_dir():
        return
    for child in out_root.iterdir():
        name = child.stem if by_stem else child.name
        if child.name in ("sweep.json", LEDGER) or name in keep or child.name.startswith("."):
            continue
        shutil.rmtree(child) if child.is_dir() else child.unlink()


def _run_cell_in_task(stage: str, sweep: str, cell: str, params_path: str | Path | None = None,
                      root: Path | None = None) -> Any:
    """:func:`run_cell` for Prefect: a reused cell ends in a Completed state named ``Reused``
    (its result is still ``"reused"``), so the UI tells reused cells from computed ones."""
    outcome = run_cell(stage, sweep, cell, params_path, root)
    if outcome == "reused":
        from prefect.states import Completed

        return Completed(name="Reused", message="input key unchanged: outputs reused", data=outcome)
    return outcome


def _tasks() -> tuple[Any, Any, Any]:
    from tasks.common import as_task

    return (as_task(begin_stage, "begin-stage"), as_task(_run_cell_in_task, "cell"),
            as_task(finish_stage, "finish-stage"))


begin_stage_task, run_cell_task, finish_stage_task = _tasks()
