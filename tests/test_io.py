"""Stage hand-off files: atomic, pickle-free, checked against their manifest."""

from __future__ import annotations

import json

import numpy as np
import pytest

from veilbench.io import (bundle_intact, load_npz, read_bundle, read_sealed_json, read_verified_json, sealed,
                          write_bundle, write_json, write_sealed_json)
from veilbench.validation import ValidationError


def _reseal(manifest: dict) -> dict:
    """``manifest`` edited and sealed again (as a writer of a consistent but wrong manifest would)."""
    from veilbench.io import SEAL, _seal

    manifest.pop(SEAL, None)
    return {**manifest, SEAL: _seal(manifest)}


def test_bundle_roundtrip_records_shapes_and_params(tmp_path) -> None:
    arrays = {"a": np.arange(6.0).reshape(2, 3), "b": np.array([1, 2, 3])}
    out = write_bundle(tmp_path / "stage", arrays, {"stage": "x", "seed": 3, "params": {"eps": 1.0}})
    got, manifest = read_bundle(out)
    assert manifest["shapes"] == {"a": [2, 3], "b": [3]} and manifest["seed"] == 3
    assert manifest["params"] == {"eps": 1.0}
    assert all(np.array_equal(got[k], arrays[k]) for k in arrays)


def test_rewrite_replaces_whole_directory_and_leaves_no_temporaries(tmp_path) -> None:
    write_bundle(tmp_path / "stage", {"old": np.ones(2)}, {"stage": "x"})
    write_bundle(tmp_path / "stage", {"new": np.zeros(3)}, {"stage": "x"})
    got, _ = read_bundle(tmp_path / "stage")
    assert set(got) == {"new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage"]


def test_failed_write_keeps_previous_output(tmp_path) -> None:
    write_bundle(tmp_path / "stage", {"keep": np.ones(2)}, {"stage": "x"})
    with pytest.raises(ValidationError, match="object arrays"):
        write_bundle(tmp_path / "stage", {"bad": np.array([{}, {}], dtype=object)}, {"stage": "x"})
    got, _ = read_bundle(tmp_path / "stage")
    assert set(got) == {"keep"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage"]


def test_manifest_mismatch_and_missing_manifest_are_errors(tmp_path) -> None:
    out = write_bundle(tmp_path / "stage", {"a": np.ones((2, 2))}, {"stage": "x"})
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shapes"]["a"] = [3, 3]
    (out / "manifest.json").write_text(json.dumps(_reseal(manifest)))
    with pytest.raises(ValidationError, match="does not match its manifest"):
        read_bundle(out)
    with pytest.raises(ValidationError, match="missing manifest.json"):
        read_bundle(tmp_path / "nothing")


def test_load_npz_never_unpickles(tmp_path) -> None:
    np.savez(tmp_path / "p.npz", x=np.array([object()], dtype=object))
    with pytest.raises(ValidationError, match="pickled"):
        load_npz(tmp_path / "p.npz")


def test_write_json_is_sorted_and_handles_numpy(tmp_path) -> None:
    write_json(tmp_path / "m.json", {"b": np.float64(1.5), "a": np.arange(2)})
    assert json.loads((tmp_path / "m.json").read_text()) == {"a": [0, 1], "b": 1.5}


def test_identical_arrays_are_stored_once_and_read_back_independent(tmp_path) -> None:
    rng = np.random.default_rng(0)
    big = rng.normal(size=(200, 64))  # 100 KiB: above the aliasing threshold
    arrays = {"Y_train": big, "xfam_attack_rep": big.copy(), "other": big + 1.0, "small": np.ones(3), "small2": np.ones(3)}
    out = write_bundle(tmp_path / "stage", arrays, {"stage": "x"})
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["aliases"] == {"xfam_attack_rep": "Y_train"}  # byte-identical; small arrays never aliased
    assert set(load_npz(out / "arrays.npz")) == {"Y_train", "other", "small", "small2"}
    got, _ = read_bundle(out)
    assert set(got) == set(arrays) and all(np.array_equal(got[k], arrays[k]) for k in arrays)
    got["xfam_attack_rep"][0, 0] = 123.0  # an alias is its own array, as if stored twice
    assert got["Y_train"][0, 0] == big[0, 0]


def test_same_bytes_different_shape_or_dtype_are_not_aliased(tmp_path) -> None:
    base = np.arange(16384, dtype=np.float64)
    arrays = {"a": base, "b": base.reshape(128, 128), "c": base.view(np.int64)}
    out = write_bundle(tmp_path / "stage", arrays, {"stage": "x"})
    assert json.loads((out / "manifest.json").read_text())["aliases"] == {}
    got, _ = read_bundle(out)
    assert all(got[k].dtype == arrays[k].dtype and np.array_equal(got[k], arrays[k]) for k in arrays)


def test_alias_to_a_missing_array_is_a_clear_error(tmp_path) -> None:
    out = write_bundle(tmp_path / "stage", {"a": np.ones(2)}, {"stage": "x"})
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["aliases"] = {"b": "gone"}
    manifest["shapes"]["b"] = [2]
    (out / "manifest.json").write_text(json.dumps(_reseal(manifest)))
    with pytest.raises(ValidationError, match="alias 'b' names 'gone'"):
        read_bundle(out)


def test_an_edited_manifest_is_refused_by_every_reader(tmp_path) -> None:
    """The manifest is sealed: an edit (ε 1 → 99) makes it not intact for reuse and an error naming
    the file for a reader; a manifest without a seal (or a replaced arrays file) likewise."""
    out = write_bundle(tmp_path / "stage", {"a": np.ones(3)}, {"stage": "x", "params": {"epsilon": 1.0}})
    assert bundle_intact(out) and sealed(json.loads((out / "manifest.json").read_text()))  # the control
    text = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text(text.replace('"epsilon": 1.0', '"epsilon": 99.0'))
    assert not bundle_intact(out)
    with pytest.raises(ValidationError, match=r"manifest.json: does not match its recorded SHA-256"):
        read_bundle(out)
    unsealed = json.loads(text)
    del unsealed["sha256"]
    (out / "manifest.json").write_text(json.dumps(unsealed))
    assert not bundle_intact(out)
    (out / "manifest.json").write_text(text)
    np.savez(out / "arrays.npz", a=np.zeros(3))
    with pytest.raises(ValidationError, match=r"arrays.npz: does not match the SHA-256 its manifest recorded"):
        read_bundle(out)


def test_sealed_records_are_checked_wherever_read(tmp_path) -> None:
    path = tmp_path / "cell.json"
    write_sealed_json(path, {"summary": {"u": {"mean": 0.129}}})
    assert read_verified_json(path) == read_sealed_json(path) and read_verified_json(path)["summary"]["u"]["mean"] == 0.129
    path.write_text(path.read_text().replace("0.129", "0.988"))
    assert read_sealed_json(path) is None
    with pytest.raises(ValidationError, match=r"cell.json: does not match its recorded SHA-256"):
        read_verified_json(path)
    with pytest.raises(ValidationError, match=r"gone.json: missing"):
        read_verified_json(tmp_path / "gone.json")
    (tmp_path / "cut.json").write_text('{"summary": ')
    with pytest.raises(ValidationError, match=r"cut.json: unreadable"):
        read_verified_json(tmp_path / "cut.json")
