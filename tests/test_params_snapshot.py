"""One digest check of the pinned params file: :func:`tasks.common.load_params` refuses the pinned
file exactly when :func:`tasks.common.verify_snapshot` does, with the same message."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.common import SNAPSHOT_FILE, SNAPSHOT_SHA256, load_params, snapshot_params, verify_snapshot
from tests.conftest import tiny_params
from veilbench.validation import UsageError


def _outcome(call) -> str:
    try:
        call()
    except UsageError as exc:
        return str(exc)
    return "ok"


@pytest.mark.parametrize("edit", ["unchanged", "edited", "deleted"])
def test_load_params_and_verify_snapshot_agree_on_the_pinned_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   edit: str) -> None:
    import yaml

    params = tmp_path / "params.yaml"
    text = yaml.safe_dump(tiny_params())
    params.write_text(text)
    for key, value in snapshot_params(params).items():
        monkeypatch.setenv(key, value)
    if edit == "edited":
        params.write_text(text + "\n# edited\n")
    elif edit == "deleted":
        params.unlink()
    verified, loaded = _outcome(verify_snapshot), _outcome(lambda: load_params(params))
    assert verified == loaded, (verified, loaded)
    assert (verified == "ok") == (edit == "unchanged")
    if edit != "unchanged":
        assert verified.startswith(f"{params.resolve()}: changed while the run was in progress")


def test_another_params_file_is_not_checked_against_the_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    pinned, other = tmp_path / "params.yaml", tmp_path / "other.yaml"
    pinned.write_text(yaml.safe_dump(tiny_params()))
    other.write_text(yaml.safe_dump(tiny_params()))
    for key, value in snapshot_params(pinned).items():
        monkeypatch.setenv(key, value)
    pinned.write_text(yaml.safe_dump(tiny_params(seed=5)))
    assert load_params(other).seed == tiny_params()["seed"]
    with pytest.raises(UsageError, match="changed while the run"):
        load_params(pinned)
    monkeypatch.delenv(SNAPSHOT_FILE)
    monkeypatch.delenv(SNAPSHOT_SHA256)
    assert load_params(pinned).seed == 5, "nothing pinned: nothing to check"
