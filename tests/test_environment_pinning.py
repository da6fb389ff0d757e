"""One save/restore of environment variables (:func:`tasks.environment.pinned_environment`), used by
the params pin of a stage, the in-process pipeline's stage roots and the command line's boundary."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tasks.environment import pinned_environment

A, B, C = "VEILBENCH_TEST_PIN_A", "VEILBENCH_TEST_PIN_B", "VEILBENCH_TEST_PIN_C"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A set to "old", B and C unset."""
    monkeypatch.setenv(A, "old")
    monkeypatch.delenv(B, raising=False)
    monkeypatch.delenv(C, raising=False)


def _state() -> tuple[str | None, ...]:
    return tuple(os.environ.get(k) for k in (A, B, C))


def test_values_hold_inside_and_set_and_unset_variables_come_back(env) -> None:
    with pinned_environment(**{A: "new", B: "set", C: None}):
        assert _state() == ("new", "set", None)
        os.environ[C] = "written inside"
    assert _state() == ("old", None, None)
    assert B not in os.environ and C not in os.environ, "an unset variable is unset again, not empty"


def test_restored_after_an_exception(env) -> None:
    with pytest.raises(KeyError), pinned_environment(**{A: "new", B: "set"}):
        raise KeyError("inside")
    assert _state() == ("old", None, None)


def test_named_variables_are_restored_without_being_set(env) -> None:
    """A command sets its own variables inside the block; the names given first come back anyway."""
    with pinned_environment((B, C)):
        assert _state() == ("old", None, None)
        os.environ.update({B: "by the command", C: "too"})
        os.environ.pop(A)  # not named: left as the block leaves it
    assert _state() == (None, None, None)


def test_the_three_users_restore_their_variables(env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import click
    from click.testing import CliRunner

    from flows.errors import _COMMAND_ENV, ErrorBoundary
    from flows.pipeline import _stage_environment
    from tasks.common import SNAPSHOT_FILE, SNAPSHOT_SHA256, pinned_params

    for k in (*_COMMAND_ENV, SNAPSHOT_FILE, SNAPSHOT_SHA256):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("DVC_ROOT", "before")
    monkeypatch.delenv("VEILBENCH_ROOT", raising=False)
    with pytest.raises(RuntimeError), _stage_environment(tmp_path):
        assert os.environ["DVC_ROOT"] == os.environ["VEILBENCH_ROOT"] == str(tmp_path)
        raise RuntimeError
    assert os.environ["DVC_ROOT"] == "before" and "VEILBENCH_ROOT" not in os.environ

    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\n")
    with pytest.raises(RuntimeError), pinned_params(params):
        assert os.environ[SNAPSHOT_FILE] == str(params.resolve())
        raise RuntimeError
    assert SNAPSHOT_FILE not in os.environ and SNAPSHOT_SHA256 not in os.environ

    @click.group(cls=ErrorBoundary)
    def cli() -> None:
        pass

    @cli.command()
    def pin() -> None:
        os.environ.update({k: "set by the command" for k in _COMMAND_ENV})
        raise RuntimeError("fails after pinning")

    result = CliRunner().invoke(cli, ["pin"])
    assert result.exit_code == 1
    assert not any(k in os.environ for k in _COMMAND_ENV)
