"""The ``veilbench`` command line.

    veilbench run                 # validate params.yaml, one local Prefect server, reproduce stale
                                  # DVC stages in this process (dvc.lock as after `dvc repro`)
    veilbench run --stage release # only one stage (and what it needs); release@<sweep>: one instance
    veilbench run --dry-run       # list the stale stages and the cells each would compute; run nothing
    veilbench dag                 # the stage graph, one short line per sweep
    veilbench run --sweep NAME    # only one sweep's stages (and what they need); repeat for more
    veilbench run --per-stage-processes  # plain `dvc repro` (one process per stage)
    veilbench run --no-dvc        # the whole pipeline as one Prefect flow, no DVC bookkeeping
    veilbench validate            # check params.yaml and exit
    veilbench datasets            # list the registered datasets
    veilbench report              # rebuild reports/index.md from evaluated cells
    veilbench compare -e A -e B   # evaluate metrics per (sweep, cell) of experiments A and B from MLflow
    veilbench compare --rev HEAD~1 --rev HEAD          # ... of two git revisions
    veilbench compare --params-file a.yaml --params-file b.yaml   # ... of two params files
    veilbench flower-export --dataset digits --nodes 2 --out DIR  # per-node files for flower/ (flwr run)
    veilbench flower-run flower local-simulation -c DIR/run-config.toml  # flwr run + wait; non-zero if it failed
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flows.errors import ErrorBoundary
from veilbench.stages import PIPELINE_STAGES

app = typer.Typer(help="veilbench: privacy-preserving representation sharing, measured.", no_args_is_help=True,
                  add_completion=False, cls=ErrorBoundary, pretty_exceptions_show_locals=False)
console = Console(stderr=True, soft_wrap=True)  # no wrapping: messages hold paths and keys

STAGES = list(PIPELINE_STAGES)


@app.callback()
def _options(debug: bool = typer.Option(False, "--debug", help="print the full traceback of an error")) -> None:
    """veilbench: privacy-preserving representation sharing, measured. User errors exit with
    status 2, environment errors with 1, each as one message (the traceback with --debug)."""


def _root() -> Path:
    from tasks.paths import repo_root

    return repo_root()


def _validate(params: Path | None, dvc: bool = True) -> None:
    """Every check ``run`` makes of the params file before a stage runs: the schema (keys, types,
    ranges, cross-references, every cell's options) and, for a run through DVC (``dvc``), the
    params keys dvc.yaml's stages read (:mod:`flows.preflight`). Exit 2 with the problems."""
    from veilbench.validation import ValidationError

    from flows.preflight import missing_dvc_params
    from tasks.common import load_params

    try:
        cfg = load_params(params)
    except ValidationError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    dvc_yaml = _root() / "dvc.yaml"
    missing = missing_dvc_params(Path(params or _root() / "params.yaml"), dvc_yaml) if dvc and dvc_yaml.is_file() else []
    if missing:
        console.print("[red]error:[/red] " + escape("invalid params for a DVC run:\n  " + "\n  ".join(missing)))
        raise typer.Exit(2)
    console.print(f"params OK: {len(cfg.datasets)} dataset(s), {len(cfg.embeddings)} embedding(s), "
                  f"{sum(len(s.expand()) for s in cfg.sweeps.values())} cell(s)")
    for problems in cfg.missing_claim_cells().values():
        for p in problems:
            console.print(f"warning: {escape(p)}: the claim is reported as not evaluated")


@app.command()
def validate(params: Path = typer.Option(None, help="path to params.yaml (default: repo root)"),
             no_dvc: bool = typer.Option(False, "--no-dvc", help="skip the checks only a DVC run needs (the params "
                                                                  "keys dvc.yaml's stages read), as `run --no-dvc` does")
             ) -> None:
    """Validate params.yaml as `run` will before any stage starts (unknown keys, types, ranges,
    cross-references, every cell's options, the keys DVC's stages read) and exit."""
    _validate(params, dvc=not no_dvc)


@app.command()
def run(
    stage: str = typer.Option(None, help=f"run only this stage (one of {', '.join(STAGES)}, or one instance such as "
                                         f"release@<sweep>, embed@<embedding>) and what it depends on"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list the stale stages and the cells each would compute; "
                                                          "run and write nothing"),
    sweep: list[str] = typer.Option(None, "--sweep", help="run only this sweep's stages and what they need; repeat "
                                    "for more (with DVC the report is not rebuilt: `veilbench report`)"),
    per_stage_processes: bool = typer.Option(
        False, "--per-stage-processes", help="plain `dvc repro`: one process per stage (slower, same results)"),
    no_dvc: bool = typer.Option(False, "--no-dvc", help="run all stages as one Prefect flow without DVC bookkeeping"),
    force: bool = typer.Option(False, help="with DVC: rerun stages even when nothing changed"),
    params: Path = typer.Option(None, help="path to params.yaml (with --no-dvc only; DVC reads params.yaml)"),
    workers: int = typer.Option(1, min=1, help="with --no-dvc: cells on a local Dask cluster of N processes"),
    dask_address: str = typer.Option(None, help="with --no-dvc: cells on the existing Dask scheduler at tcp://host:port"),
) -> None:
    """Run the pipeline: validate params, start one local Prefect server (127.0.0.1), reproduce.

    By default DVC decides which stages are stale and records them in dvc.lock, and the stale
    stages run inside this one process (`flows.pipeline`): the same outputs and lock as
    `dvc repro`, without a Python start-up per stage. Progress: a live display on a terminal
    (stages, cells computed/reused, elapsed, ETA), one line per finished stage otherwise; library
    warnings go to reports/run.log (counted on screen); Ctrl-C stops within a few seconds."""
    _check_run_options(stage, params, no_dvc, workers, dask_address, dry_run, per_stage_processes)
    sweeps = list(sweep or [])
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")  # flow/task INFO lines would drown the progress
    os.environ.setdefault("TQDM_DISABLE", "1")  # libraries' own bars (model weights loading) likewise
    root = _root()
    _prepare_run(root, params, no_dvc, writes=not dry_run)
    _check_stage_key(stage)
    _check_sweeps(sweeps, params, stage)
    if dry_run:
        _dry_run(root, sweep_targets(sweeps, stage), force)
        return
    from flows.interrupt import Interrupt, end_run
    from flows.server import PrefectServerDied
    from tasks.progress import captured_warnings

    interrupt = Interrupt()
    log_path = root / "reports" / "run.log"
    shown: dict[str, object] = {}
    try:
        with interrupt.installed(), captured_warnings(log_path) as wlog:
            code = _run_pipeline(root, stage, per_stage_processes, no_dvc, force, params, interrupt, wlog, shown,
                                 workers, dask_address, sweeps)
    except (KeyboardInterrupt, PrefectServerDied) as exc:  # Ctrl-C, SIGTERM, or the server died
        end_run(interrupt, exc, "interrupted: finished cells are kept; the next `veilbench run` reuses them")
    if wlog.count:
        console.print(f"{wlog.count} library warning(s) written to {log_path}")
    if code != 0:
        raise typer.Exit(code)
    if "progress" in shown:
        console.print(shown["progress"].summary())
    console.print(f"done: see {_output_root(root, params, no_dvc) / 'reports' / 'index.md'} (or index.html)")


def _output_root(root: Path, params: Path | None, no_dvc: bool) -> Path:
    """Where the run writes: the workspace, or for another params file with ``--no-dvc`` its own
    folder (:func:`flows.benchmark.output_root`: ``runs/<params file stem>/``)."""
    if not no_dvc:
        return root
    from flows.benchmark import output_root

    return output_root(str(params) if params else None, root)


def _check_run_options(stage: str | None, params: Path | None, no_dvc: bool, workers: int,
                       dask_address: str | None, dry_run: bool = False, per_stage_processes: bool = False) -> None:
    """Exit 2 with one line for option combinations ``run`` does not accept."""
    problem = None
    name, at, key = (stage or "").partition("@")
    if stage is not None and (name not in STAGES or (at and (not key or name == "report"))):
        problem = (f"--stage must be one of {STAGES} or <stage>@<key> (e.g. release@<sweep>, embed@<embedding>, "
                   f"prepare@<dataset>), got {stage!r}")
    elif stage is not None and no_dvc:
        problem = "--stage: only with DVC (--no-dvc runs every stage of the params file)"
    elif dry_run and (no_dvc or per_stage_processes):
        problem = "--dry-run: only with DVC in this process (not with --no-dvc or --per-stage-processes)"
    elif params is not None and not no_dvc:
        problem = "--params: only with --no-dvc (DVC stages read params.yaml at the repo root)"
    elif (workers > 1 or dask_address) and not no_dvc:
        problem = "--workers/--dask-address: only with --no-dvc (cells fanned out by flows.benchmark)"
    if problem is not None:
        console.print(f"[red]error:[/red] {escape(problem)}")
        raise typer.Exit(2)


def _check_stage_key(stage: str | None) -> None:
    """Exit 2 when ``--stage <stage>@<key>`` names a key the params file does not have."""
    name, _, key = (stage or "").partition("@")
    if not key:
        return
    from flows._stage import STAGE_KEYS
    from tasks.common import load_params
    from veilbench.config import did_you_mean

    section = STAGE_KEYS[name][0]
    keys = list(getattr(load_params(None), section))
    if key not in keys:
        console.print(f"[red]error:[/red] {escape(f'--stage: {key!r} is not in {section} ({keys})')}"
                      f"{escape(did_you_mean(key, keys))}")
        raise typer.Exit(2)


def _dry_run(root: Path, targets: list[str] | None, force: bool) -> None:
    """Print what ``run`` would do now: the stale stages (DVC's plan) and, for each cell stage whose
    inputs are already up to date, the cells it would compute (the others it reuses)."""
    from flows.pipeline import plan
    from tasks.sweep import cells_to_compute, sweep_cells
    from veilbench.stages import STAGES as CELL_STAGES

    needs = plan(root, targets, force)
    if not needs:
        console.print("dry run: 0 stage(s) would run (all up to date)")
        return
    console.print(f"dry run: {len(needs)} stage(s) would run; nothing was run or written")
    for address, upstream in needs.items():
        name, _, sweep = address.partition("@")
        if name not in CELL_STAGES:
            console.print(f"  {address}", highlight=False, markup=False)
            continue
        cells = sweep_cells(sweep, root=root)
        if upstream:
            line = f"  {address}: {len(cells)} cell(s); which to compute is decided after {upstream[-1]}"
        else:
            todo = cells_to_compute(name, sweep, root=root)
            shown = ", ".join(todo[:6]) + (f", … {len(todo) - 6} more" if len(todo) > 6 else "")
            line = (f"  {address}: {len(todo)} of {len(cells)} cell(s) to compute"
                    + (f" ({shown})" if todo else "; the others are reused"))
        console.print(line, highlight=False, markup=False)


def _check_sweeps(sweeps: list[str], params: Path | None, stage: str | None) -> None:
    """Exit 2 with one line when a ``--sweep`` is not a sweep of the params file, or ``--stage``
    names a stage that belongs to no sweep (prepare, embed, report)."""
    if not sweeps:
        return
    from tasks.common import load_params
    from tasks.paths import CELL_STAGES

    known = load_params(params).sweeps
    unknown = [s for s in sweeps if s not in known]
    problem = None
    if unknown:
        problem = f"--sweep: {unknown} not in the params file's sweeps ({', '.join(sorted(known))})"
    elif stage is not None and stage not in CELL_STAGES:
        problem = f"--stage {stage} with --sweep: must be one of the sweep stages {list(CELL_STAGES)}"
    if problem is not None:
        console.print(f"[red]error:[/red] {escape(problem)}")
        raise typer.Exit(2)


def sweep_targets(sweeps: list[str], stage: str | None) -> list[str] | None:
    """DVC targets of ``veilbench run``: ``<stage>@<sweep>`` per sweep (``evaluate`` without
    ``--stage``; DVC adds what they need), else ``[stage]``, else None (the whole pipeline)."""
    if sweeps:
        return [f"{stage or 'evaluate'}@{s}" for s in sweeps]
    return [stage] if stage else None


def _prepare_run(root: Path, params: Path | None, no_dvc: bool, writes: bool = True) -> None:
    """Before anything starts: a DVC project (unless ``no_dvc``), valid params, the params snapshot
    every stage checks, and ``data/sources.yaml`` naming each data set's file for DVC (:mod:`tasks.sources`)."""
    if not no_dvc and not (root / ".dvc").is_dir():
        from veilbench.validation import UsageError

        raise UsageError(f"{root}: not a DVC repository (no .dvc folder); run veilbench in the project folder "
                         f"(or set VEILBENCH_ROOT to it), or use --no-dvc")
    _validate(params, dvc=not no_dvc)
    from tasks.common import cell_threads, check_writable, snapshot_params

    cell_threads()  # VEILBENCH_CELL_THREADS, named, before any work
    if writes:
        check_writable(root)  # data/, reports/: refused before any work, not midway

    os.environ.update(snapshot_params(params or root / "params.yaml"))  # stages refuse a file edited mid-run
    if not no_dvc and writes:
        from tasks.sources import write_sources

        write_sources(root)  # before DVC reads dvc.yaml: a replaced user file is a changed dependency


def _run_pipeline(root: Path, stage: str | None, per_stage_processes: bool, no_dvc: bool, force: bool,
                  params: Path | None, interrupt: object, wlog: object, shown: dict[str, object],
                  workers: int = 1, dask_address: str | None = None, sweeps: list[str] | None = None) -> int:
    """The body of ``run`` inside its Ctrl-C and warning handling; returns the exit status."""
    from flows.interrupt import run_child
    from flows.server import booting_prefect_server

    with booting_prefect_server(root) as server:
        proc = getattr(server, "_proc", None)
        if proc is not None:
            interrupt.cleanups.append(proc.terminate)  # an interrupted run leaves no server behind
            interrupt.causes.append(server.death)  # its monitor's SIGINT means "the server died", not Ctrl-C
        if not (no_dvc or per_stage_processes):
            # DVC plans while the server boots; it is waited for only when a stage has to run.
            from flows._stage import cell_threads
            from flows.pipeline import reproduce_in_process
            from tasks.progress import RunProgress
            from tasks.tracking import open_store

            def display(stages: list[str]) -> RunProgress:
                shown["progress"] = RunProgress(stages, root, cell_threads(), warnings_count=lambda: wlog.count)
                return shown["progress"]

            def before_execute() -> None:
                # a stage will run: a new MLflow store gets its tables while the server may still
                # boot (an up-to-date run loads neither MLflow nor waits for the server)
                open_store(root)
                server.wait_until_ready()

            executed = reproduce_in_process(root, sweep_targets(sweeps or [], stage), force, before_execute=before_execute,
                                            progress=display, interrupt=interrupt)
            if not executed:
                console.print("0 stage(s) ran (all up to date)")
            return 0
        url = server.wait_until_ready()
        console.print(f"Prefect API: {url}")
        if no_dvc:  # in this process, as one Prefect flow, with the same progress display
            from flows.benchmark import run_with_progress
            from tasks.tracking import open_store

            out = _output_root(root, params, no_dvc)
            if out != root:
                out.mkdir(parents=True, exist_ok=True)
                console.print(f"outputs in {out}")
            open_store(out)
            _, shown["progress"] = run_with_progress(str(params.resolve()) if params else None, sweeps or None, workers,
                                                     dask_address, out, warnings_count=lambda: wlog.count)
            return 0
        cmd = [sys.executable, "-m", "dvc", "repro"] + (["--force"] if force else []) + (sweep_targets(sweeps or [], stage) or [])
        # dvc.yaml commands call `python`: make it this interpreter (the project venv).
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**os.environ, "PREFECT_API_URL": url, "PATH": path}
        # in this process's error and Ctrl-C/SIGTERM handling: DVC stops in order on SIGINT; the Dask
        # path (flows.benchmark and its workers) is stopped at once
        return run_child(cmd, interrupt, signal.SIGTERM if no_dvc else signal.SIGINT, cwd=root, env=env)


@app.command()
def dag(params: Path = typer.Option(None, help="path to params.yaml (default: repo root)")) -> None:
    """Print the stage graph of the params file: each data set, its embeddings, the sweeps on each
    with their stages (one short line per sweep), then the report."""
    from flows.dag import dag_lines, stage_graph
    from tasks.common import load_params

    cfg = load_params(params)
    Console(soft_wrap=True).print("\n".join(dag_lines(stage_graph(cfg, list(cfg.sweeps)))), markup=False,
                                  highlight=False)


@app.command()
def datasets() -> None:
    """List the registered datasets (embedded, generated, user files, public loaders)."""
    from veilbench.datasets import describe_datasets

    table = Table("name", "kind", "description")
    for row in describe_datasets():
        table.add_row(row["name"], row["kind"], row["description"])
    Console().print(table)


@app.command()
def report(params: Path = typer.Option(None, help="path to params.yaml")) -> None:
    """Rebuild reports/index.md, tables and figures from the evaluated cells."""
    from veilbench.validation import ValidationError

    from tasks.report import report as build

    try:
        console.print(str(build(params)))
    except ValidationError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None


@app.command()
def compare(
    experiment: list[str] = typer.Option(None, "--experiment", "-e",
                                         help="MLflow experiment; repeat to compare experiments (with --rev/--params-file: "
                                              "search only these, default all)"),
    rev: list[str] = typer.Option(None, "--rev", help="git revision (runs tagged mlflow.source.git.commit); repeat"),
    params_file: list[str] = typer.Option(None, "--params-file",
                                          help="params file (runs tagged with its hash, or its name if absent); repeat"),
    metric: list[str] = typer.Option(None, "--metric", "-m",
                                     help="only these metrics (default: each family's headline utility and attacker)"),
    all_metrics: bool = typer.Option(False, "--all", help="every metric's mean (a very wide table)"),
    out: Path = typer.Option(None, help="output folder (default reports/compare)"),
) -> None:
    """Compare the evaluate metrics of each (sweep, cell) across experiments, git revisions or
    params files (markdown + CSV); warns about cells missing on any side. By default each row shows
    its family's headline metrics (primary utility, attacker metric), named in its own columns."""
    from tasks.compare import comparison, experiment_side, params_side, revision_side, write_comparison

    if rev and params_file:
        console.print("[red]error:[/red] --rev and --params-file: give one kind of side, not both")
        raise typer.Exit(2)
    if not (rev or params_file or experiment):
        console.print("[red]error:[/red] give sides to compare: -e EXPERIMENT, --rev REV or --params-file FILE (repeatable)")
        raise typer.Exit(2)
    scope = tuple(experiment) if experiment else None
    try:
        if rev:
            sides = [revision_side(r, scope, _root()) for r in rev]
        elif params_file:
            sides = [params_side(p, scope) for p in params_file]
        else:
            sides = [experiment_side(e) for e in experiment]
        if metric and all_metrics:
            raise ValueError("--metric and --all: give metrics, or --all for every one, not both")
        result = comparison(sides, list(metric) if metric else None, _root(), headline=not (metric or all_metrics))
    except ValueError as exc:  # a bad side or metric, an unknown experiment (ValidationError), an edited record
        console.print(f"[red]error:[/red] {escape(str(exc.args[0]))}")
        raise typer.Exit(2) from None
    for line in result.warnings():
        console.print(f"[yellow]{escape(line)}[/yellow]")
    md, csv = write_comparison(result, out, _root())
    Console(soft_wrap=True).print(md.read_text(), markup=False, highlight=False)
    console.print(f"written: {md}, {csv}")


@app.command("flower-export")
def flower_export(
    dataset: str = typer.Option(..., help="a data set of params.yaml (datasets.<name>)"),
    nodes: int = typer.Option(2, help="number of SuperNodes (IID shards of the normal training records)"),
    out: Path = typer.Option(..., help="output folder: node_<i>.npz and run-config.toml"),
    params: Path = typer.Option(None, help="path to params.yaml"),
    seed: int = typer.Option(0, help="seed of the split over nodes"),
) -> None:
    """Export a prepared data set as per-node .npz files for the Flower app project (flower/)."""
    from veilbench.validation import ValidationError

    from tasks.flower_export import export_nodes

    try:
        paths = export_nodes(dataset, nodes, out, params, seed=seed)
    except ValidationError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    console.print(f"written: {', '.join(str(p) for p in paths)}; run config: {out / 'run-config.toml'}")


@app.command("flower-run")
def flower_run(
    app_dir: Path = typer.Argument(Path("flower"), help="the Flower app project (default: flower/)"),
    connection: str = typer.Argument("local-simulation", help="SuperLink connection of the Flower config"),
    run_config: list[str] = typer.Option(None, "--run-config", "-c", help="as `flwr run --run-config`; repeat"),
    timeout: float = typer.Option(3600, help="seconds to wait for the run to finish"),
) -> None:
    """`flwr run APP CONNECTION`, then wait for the run: exit 0 only if it completed (`flwr run`
    itself exits 0 as soon as the run is submitted, even when it then fails)."""
    from tasks.flower_launch import run_app, run_log

    try:
        status = run_app(app_dir, connection, list(run_config) if run_config else None, timeout)
    except (RuntimeError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    if not status.ok:
        console.print(escape((status.log or run_log(status.run_id, connection))[-20000:]), highlight=False)
        console.print(f"[red]error:[/red] Flower run {status.run_id}: {escape(status.status)}: {escape(status.details)}")
        raise typer.Exit(1)
    console.print(f"Flower run {status.run_id}: {status.status}")


if __name__ == "__main__":
    app()
