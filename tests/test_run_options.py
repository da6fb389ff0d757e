"""`veilbench run` options a researcher reaches for: --stage <stage>@<key>, --dry-run, another
params file with --no-dvc (its folder named at the end, cells in VEILBENCH_CELL_THREADS threads),
reuse of a Prefect server already there, and `veilbench dag`."""

from __future__ import annotations

import http.server
import shutil
import threading
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.conftest import REPO, tiny_params


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DVC-looking project folder (dvc.yaml, .dvc/) with the tiny params as the root; Prefect's
    API set to a dead address (nothing here may reach a server)."""
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / ".dvc").mkdir()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    monkeypatch.setenv("VEILBENCH_ROOT", str(tmp_path))
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    return tmp_path


def _run(*args: str):
    from flows.cli import app

    return CliRunner().invoke(app, ["run", *args])


def test_stage_takes_one_instance_and_hands_it_to_dvc(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.pipeline

    seen = []
    monkeypatch.setattr(flows.pipeline, "reproduce_in_process", lambda root, targets, *a, **k: seen.append(targets) or [])
    result = _run("--stage", "release@ss")
    assert result.exit_code == 0, result.output
    assert seen == [["release@ss"]]
    result = _run("--stage", "release@sss")
    assert result.exit_code == 2 and "'sss' is not in sweeps" in result.output and "did you mean 'ss'?" in result.output
    assert _run("--stage", "embed@nope").exit_code == 2
    assert _run("--stage", "report@x").exit_code == 2
    result = _run("--stage", "release@ss", "--no-dvc")
    assert result.exit_code == 2 and "only with DVC" in result.output, "not silently ignored"
    assert seen == [["release@ss"]], "no run for a refused option"


def test_dry_run_needs_dvc_in_process(project: Path) -> None:
    for extra in ("--no-dvc", "--per-stage-processes"):
        result = _run("--dry-run", extra)
        assert result.exit_code == 2 and "--dry-run" in result.output


def test_another_params_file_ends_naming_its_own_folder(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.benchmark

    class Done:
        def summary(self) -> str:
            return "1 stage(s), 0 cells"

    calls = []

    def fake(params_path, sweeps, workers, dask_address, root, warnings_count=None):
        calls.append((params_path, Path(root)))
        return str(Path(root) / "reports" / "index.md"), Done()

    monkeypatch.setattr(flows.benchmark, "run_with_progress", fake)
    other = project / "other.yaml"
    other.write_text((project / "params.yaml").read_text())
    result = _run("--no-dvc", "--params", str(other))
    assert result.exit_code == 0, result.output
    assert calls == [(str(other), project / "runs" / "other")]
    assert f"done: see {project / 'runs' / 'other' / 'reports' / 'index.md'}" in result.output
    calls.clear()
    result = _run("--no-dvc")
    assert calls == [(None, project)] and f"done: see {project / 'reports' / 'index.md'}" in result.output


def test_no_dvc_runs_cells_in_veilbench_cell_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.benchmark as bench

    seen = {}

    class Flow:
        def __call__(self, **kwargs):
            seen.update(kwargs)
            return "report"

    def with_options(task_runner):
        seen["runner"] = task_runner
        return Flow()

    monkeypatch.setattr(bench.benchmark, "with_options", with_options)
    monkeypatch.setenv("VEILBENCH_CELL_THREADS", "3")
    bench.run_benchmark(None, None, workers=1)
    assert seen["runner"]._max_workers == 3 and seen["thread_workers"] == 3
    monkeypatch.setenv("VEILBENCH_CELL_THREADS", "1")
    bench.run_benchmark(None, None, workers=1)
    assert seen["runner"]._max_workers == 1 and seen["thread_workers"] == 1


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200 if self.path.endswith("/health") else 404)
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api"
    server.shutdown()


def test_a_server_configured_in_the_prefect_profile_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             answering_server: str) -> None:
    import flows.server as server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILES_PATH", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(server, "DEFAULT_API_URL", "http://127.0.0.1:9/api")  # nothing answers there
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "profiles.toml").write_text(
        f'active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "{answering_server}"\n')
    with server.booting_prefect_server(tmp_path) as booted:
        assert booted.url == answering_server and booted._proc is None, "no server of its own"
        assert server.os.environ["PREFECT_API_URL"] == answering_server, "exported for the stages"
    assert "PREFECT_API_URL" not in server.os.environ


def test_a_server_at_prefects_default_address_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       answering_server: str) -> None:
    import flows.server as server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "empty-home"))
    monkeypatch.setattr(server, "DEFAULT_API_URL", answering_server)
    assert server.configured_server() == answering_server
    monkeypatch.setattr(server, "DEFAULT_API_URL", "http://127.0.0.1:9/api")
    assert server.configured_server() is None, "nothing configured or answering: start one"


def test_dag_is_one_short_line_per_sweep_and_names_every_stage(project: Path) -> None:
    from flows.cli import app

    params = tiny_params()
    result = CliRunner().invoke(app, ["dag"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= 100
    text = result.output
    for sweep in params["sweeps"]:
        assert f"release → integrate → attack → evaluate @{sweep}" in text
    assert all(f"prepare@{d}" in text for d in params["datasets"])
    assert all(f"embed@{e}" in text for e in params["embeddings"])
    assert lines[-1].startswith("report (after 2 evaluate")


def test_stage_lines_reach_the_stream_where_print_is_captured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a flow with log_prints (flows.benchmark), Prefect turns print() into log records that
    its WARNING level drops: the progress lines must not go through print()."""
    import builtins
    import io

    from tasks.progress import RunProgress

    monkeypatch.setattr(builtins, "print", lambda *a, **k: None)
    out = io.StringIO()
    with RunProgress(["prepare@d"], tmp_path, stream=out) as p:
        p.stage_started("prepare@d")
        p.stage_done("prepare@d")
    assert out.getvalue().startswith("[1/1] prepare@d in ")


def _module_level_calls(path: Path) -> list[str]:
    """Names called where a module's import runs them: at the top level, in decorators and default
    values, never inside a function body."""
    import ast

    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            parts = [*getattr(node, "decorator_list", []), *node.args.defaults, *node.args.kw_defaults]
            for part in parts:
                if part is not None:
                    visit(part)
            return
        if isinstance(node, ast.Call):
            func = node.func
            names.append(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return names


def test_no_task_runner_is_made_at_import() -> None:
    """A flow's runner is made when it runs (sized by VEILBENCH_CELL_THREADS then), never when a
    module is imported."""
    made = {p.name: [n for n in _module_level_calls(p) if n.endswith("TaskRunner")]
            for p in sorted((REPO / "flows").glob("*.py"))}
    assert {name: calls for name, calls in made.items() if calls} == {}
    assert "ThreadPoolTaskRunner" in _module_level_calls_of("@flow(task_runner=ThreadPoolTaskRunner(max_workers=1))\n"
                                                            "def f():\n    pass\n")
    assert _module_level_calls_of("def f():\n    return ThreadPoolTaskRunner(max_workers=2)\n") == []


def _module_level_calls_of(source: str) -> list[str]:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    try:
        return _module_level_calls(Path(handle.name))
    finally:
        Path(handle.name).unlink()


def test_a_stage_flow_runs_on_veilbench_cell_threads_read_when_it_runs(project: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from flows._stage import main
    from flows.release import release_flow

    seen = {}

    class Flow:
        def __call__(self, **kwargs):
            seen.update(kwargs)
            return []

    def with_options(task_runner):
        seen["runner"] = task_runner
        return Flow()

    monkeypatch.setattr(release_flow, "with_options", with_options)
    for threads in (3, 1):  # set after the flow's module was imported
        monkeypatch.setenv("VEILBENCH_CELL_THREADS", str(threads))
        assert main("release", release_flow, ["--sweep", "ss", "--params", str(project / "params.yaml")]) == 0
        assert seen["runner"]._max_workers == threads and seen["keys"] == ["ss"]
