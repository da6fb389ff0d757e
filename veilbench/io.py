"""Stage hand-off files: an ``arrays.npz`` plus a ``manifest.json``, written atomically.

A stage directory holds

* ``arrays.npz``: named numeric arrays, loaded back with ``allow_pickle=False`` (no pickle is
  ever read). Stored uncompressed: stage outputs are mostly float64 noise, which zlib shrinks by
  little on float noise at many times the write time. An array byte-identical to another of the same bundle
  (e.g. a family's uploads and the cross-family view's copy of them) is stored once;
* ``manifest.json``: ``{"stage", "shapes", "dtypes", "aliases", "arrays_sha256", "seed", "params",
  "info", "metrics", "sha256"}`` so a reader can check what it got without loading the arrays;
  ``aliases`` maps each array stored under another name to that name; ``arrays_sha256`` is the
  SHA-256 of the ``arrays.npz`` bytes (numpy writes fixed zip timestamps, so equal arrays give equal
  bytes) and ``sha256`` the seal of the manifest itself (below);
* ``timings.json`` (optional, :data:`TIMINGS`): what the run that wrote the bundle measured about
  itself (seconds, wall-clock start). It is not part of the output: the manifest and arrays are a
  function of the inputs (params, code, data, seeds) only, so equal inputs give byte-equal files on
  every run and machine, while ``.dvcignore`` hides ``timings.json`` from DVC (and
  :func:`bundle_intact` never reads it), so rewriting it changes no DVC hash and no reuse decision.

One verification rule for every stored record. A record is *sealed*: :func:`write_sealed_json`
(and :func:`write_bundle` for a manifest) stores ``sha256``, the SHA-256 of the record's canonical
JSON without that key, inside it. Wherever a record is read it is checked: :func:`read_sealed_json`
and :func:`bundle_intact` (reuse: a record that is missing, unreadable, truncated, edited by hand or
written before seals existed is recomputed, never reused) and :func:`read_verified_json` and
:func:`read_bundle` (every other reader: the same failures are a :class:`ValidationError` naming the
file). A seal is a checksum against accidents and careless edits, not a signature: whoever can write
the file can write a matching seal.

Writes go to a temporary sibling directory that is renamed into place, so a killed stage
leaves either the old complete output or none, never a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from veilbench.validation import ValidationError

ARRAYS = "arrays.npz"
MANIFEST = "manifest.json"
#: The run-dependent sidecar of an output (see the module docstring); ``.dvcignore`` lists it.
TIMINGS = "timings.json"

#: Arrays smaller than this are always stored under their own name (hashing them saves nothing).
_ALIAS_MIN_BYTES = 1 << 16


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _umask() -> int:
    """The process's file-mode creation mask, read without changing it (``os.umask`` can only be
    read by setting it, which would race with other threads): Linux's ``/proc/self/status``,
    else the common default 022."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def default_mode(directory: bool = False) -> int:
    """The mode ``open()``/``mkdir()`` would give a new file (0666) or directory (0777) under the
    umask. ``tempfile.mkstemp``/``mkdtemp`` create 0600/0700 (private temporaries); an output
    renamed into place from one gets this mode instead, like any file the user writes."""
    return (0o777 if directory else 0o666) & ~_umask()


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace`` (mode as a new file's:
    :func:`default_mode`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, default_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented, key-sorted JSON."""
    atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, sort_keys=True) + "\n")


def read_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


@contextmanager
def replacing_dir(target: str | Path) -> Iterator[Path]:
    """A new empty folder beside ``target`` (mode as a new folder's) to fill in the ``with`` body; on
    a clean exit it replaces ``target`` (the old folder renamed aside first, then removed: a reader
    finds the old folder or the new one, never a mix); on an exception it is removed and ``target``
    is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        tmp.chmod(default_mode(directory=True))
        yield tmp
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_bundle(
    directory: str | Path,
    arrays: Mapping[str, np.ndarray],
    manifest: Mapping[str, Any],
    timings: Mapping[str, Any] | None = None,
) -> Path:
    """Atomically (re)create ``directory`` holding ``arrays.npz`` and ``manifest.json`` (and, when
    ``timings`` is given, the run-dependent sidecar ``timings.json``, replaced with the rest)."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    clean = {}
    for key, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype == object:
            raise ValidationError(f"arrays[{key!r}]: object arrays cannot be saved (no pickles)")
        clean[key] = arr
    stored, aliases = _deduplicate(clean)
    full_manifest = dict(manifest)
    full_manifest["shapes"] = {k: list(v.shape) for k, v in clean.items()}
    full_manifest["dtypes"] = {k: str(v.dtype) for k, v in clean.items()}
    full_manifest["aliases"] = aliases
    with replacing_dir(directory) as tmp:
        np.savez(tmp / ARRAYS, **stored)
        full_manifest["arrays_sha256"] = file_sha256(tmp / ARRAYS)
        full_manifest.pop(SEAL, None)
        full_manifest[SEAL] = _seal(full_manifest)
        (tmp / MANIFEST).write_text(json.dumps(_jsonable(full_manifest), indent=2, sort_keys=True) + "\n")
        if timings is not None:
            (tmp / TIMINGS).write_text(json.dumps(_jsonable(timings), indent=2, sort_keys=True) + "\n")
    return directory


def read_timings(path: str | Path) -> dict[str, Any] | None:
    """The timings sidecar at ``path`` (a :data:`TIMINGS` file, or a directory holding one), or
    ``None`` when it is missing or unreadable: timings are advisory, never an error."""
    path = Path(path)
    if path.is_dir():
        path = path / TIMINGS
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def file_sha256(path: str | Path) -> str:
    """SHA-256 of the bytes of the file at ``path`` (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _seal(obj: Any) -> str:
    return hashlib.sha256(json.dumps(_jsonable(obj), sort_keys=True).encode()).hexdigest()


#: The key under which a sealed record (a manifest, :func:`write_sealed_json`) stores its digest.
SEAL = "sha256"


def sealed(record: Any) -> bool:
    """True when ``record`` is a mapping whose ``sha256`` is the SHA-256 of the rest of it."""
    return isinstance(record, dict) and record.get(SEAL) == _seal({k: v for k, v in record.items() if k != SEAL})


def _bundle_problem(directory: Path) -> str | None:
    """Why the bundle in ``directory`` is not intact (None when it is): see :func:`bundle_intact`."""
    try:
        manifest = read_json(directory / MANIFEST)
    except FileNotFoundError:
        return f"{directory / MANIFEST}: missing; run the stage that produces it first"
    except (OSError, ValueError) as exc:
        return f"{directory / MANIFEST}: unreadable ({type(exc).__name__}: {exc})"
    if not sealed(manifest):
        return _edited(directory / MANIFEST)
    try:
        digest = file_sha256(directory / ARRAYS)
    except OSError as exc:
        return f"{directory / ARRAYS}: unreadable ({exc.strerror or exc})"
    if digest != manifest.get("arrays_sha256"):
        return _edited(directory / ARRAYS, "the SHA-256 its manifest recorded")
    return None


def _edited(path: Path, what: str = "its recorded SHA-256") -> str:
    return (f"{path}: does not match {what} (edited or damaged since it was written, or written before records "
            f"were sealed); run the stage that produces it again (`veilbench run`) to recompute it")


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of the bundle in ``directory`` once :func:`bundle_intact` holds (the arrays are
    hashed, not loaded); a :class:`ValidationError` naming the file otherwise."""
    problem = _bundle_problem(Path(directory))
    if problem is not None:
        raise ValidationError(problem)
    return read_json(Path(directory) / MANIFEST)


def bundle_intact(directory: str | Path) -> bool:
    """True when ``directory`` holds a sealed, unedited ``manifest.json`` and an ``arrays.npz`` whose
    SHA-256 is the one the manifest recorded (False for a truncated, replaced, edited or missing file)."""
    return _bundle_problem(Path(directory)) is None


def write_sealed_json(path: str | Path, obj: Mapping[str, Any]) -> None:
    """:func:`write_json` of the mapping ``obj`` plus ``"sha256"``, the SHA-256 of its canonical JSON."""
    write_json(path, {**obj, SEAL: _seal({k: v for k, v in obj.items() if k != SEAL})})


def read_sealed_json(path: str | Path) -> dict[str, Any] | None:
    """The record written by :func:`write_sealed_json` at ``path``, or ``None`` when it is missing,
    not JSON (e.g. truncated), or no longer matches its seal (edited)."""
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    return record if sealed(record) else None


def read_verified_json(path: str | Path) -> dict[str, Any]:
    """The record written by :func:`write_sealed_json` at ``path``; a :class:`ValidationError`
    naming the file when it is missing, unreadable or no longer matches its seal."""
    path = Path(path)
    try:
        record = read_json(path)
    except FileNotFoundError:
        raise ValidationError(f"{path}: missing; run the stage that produces it first") from None
    except (OSError, ValueError) as exc:
        raise ValidationError(f"{path}: unreadable ({type(exc).__name__}: {exc}); run the stage that produces it "
                              f"again (`veilbench run`)") from None
    if not sealed(record):
        raise ValidationError(_edited(path))
    return record


def _deduplicate(arrays: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Split ``arrays`` into those to store and ``{alias: stored name}`` for byte-identical repeats
    (same dtype, shape and SHA-256 of the bytes; the first name in sorted order is stored)."""
    stored: dict[str, np.ndarray] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple[str, tuple[int, ...], bytes], str] = {}
    for key in sorted(arrays):
        arr = arrays[key]
        if arr.nbytes >= _ALIAS_MIN_BYTES:
            sig = (arr.dtype.str, arr.shape, hashlib.sha256(np.ascontiguousarray(arr).data).digest())
            if sig in seen:
                aliases[key] = seen[sig]
                continue
            seen[sig] = key
        stored[key] = arr
    return stored, aliases


#: Most bytes an ``.npz`` may declare in all (after decompression) before anything is allocated.
MAX_NPZ_BYTES = 16 << 30
#: Largest decompressed/compressed size ratio of one ``.npz`` member bigger than
#: :data:`_RATIO_FLOOR` bytes: real data compress a few times, a zip bomb thousands of times.
MAX_COMPRESSION_RATIO = 200
_RATIO_FLOOR = 1 << 24


def check_npz_members(path: str | Path, max_bytes: int = MAX_NPZ_BYTES) -> None:
    """Check an ``.npz`` before loading it, from the zip directory and each ``.npy`` header
    (``numpy.lib.format``) only: every member's declared shape × item size must equal its stored
    size, the total must stay under ``max_bytes``, and no large member may be compressed more than
    :data:`MAX_COMPRESSION_RATIO` times. Raises :class:`ValidationError` naming the file."""
    path = Path(path)
    total = 0
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.file_size > _RATIO_FLOOR and info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
                    raise ValidationError(
                        f"{path}: member {info.filename!r} expands {info.file_size / max(info.compress_size, 1):.0f} "
                        f"times ({info.compress_size} → {info.file_size} bytes); refusing a possible zip bomb")
                total += info.file_size
                if total > max_bytes:
                    raise ValidationError(f"{path}: declares more than {max_bytes} bytes of arrays; too large to load")
                if not info.filename.endswith(".npy"):
                    continue
                with zf.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    shape, _, dtype = (np.lib.format.read_array_header_1_0(fh) if version == (1, 0)
                                       else np.lib.format.read_array_header_2_0(fh))
                    header = fh.tell()
                if dtype.hasobject:
                    continue  # refused with its own message when loaded
                declared = math.prod(shape) * dtype.itemsize
                if declared != info.file_size - header:
                    raise ValidationError(
                        f"{path}: array {info.filename[:-4]!r} declares shape {shape} ({declared} bytes) but stores "
                        f"{info.file_size - header} bytes; the file is corrupt or forged")
    except ValidationError:
        raise
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise ValidationError(f"{path}: not a readable .npz file (truncated or corrupt: {exc})") from None


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Load every array of an ``.npz`` without ever unpickling.

    Raises :class:`ValidationError` naming the file when it is missing, truncated, not an npz,
    declares more than it stores (:func:`check_npz_members`), or holds an object (pickled) array.
    """
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"{path}: file not found")
    if not zipfile.is_zipfile(path):
        raise ValidationError(f"{path}: not a readable .npz file (not a zip archive: truncated or corrupt)")
    check_npz_members(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise ValidationError(f"{path}: holds a pickled/object array; only numeric arrays are accepted") from None
        raise ValidationError(f"{path}: not a readable .npz file ({exc})") from None
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        raise ValidationError(f"{path}: not a readable .npz file (truncated or corrupt: {exc})") from None


def read_bundle(directory: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Load a stage directory written by :func:`write_bundle`: the manifest's seal and the arrays'
    recorded SHA-256 are checked first (:func:`bundle_intact`; a :class:`ValidationError` naming the
    file when either fails), then the arrays' shapes against the manifest."""
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise ValidationError(f"{directory}: missing {MANIFEST}; run the stage that produces it first")
    problem = _bundle_problem(directory)
    if problem is not None:
        raise ValidationError(problem)
    manifest = read_json(manifest_path)
    arrays = load_npz(directory / ARRAYS)
    for alias, name in manifest.get("aliases", {}).items():
        if name not in arrays:
            raise ValidationError(f"{directory}: alias {alias!r} names {name!r}, which is not stored")
        arrays[alias] = arrays[name].copy()  # independent, as if stored twice
    for key, shape in manifest.get("shapes", {}).items():
        if key not in arrays or list(arrays[key].shape) != list(shape):
            raise ValidationError(f"{directory}: array {key!r} does not match its manifest shape {shape}")
    return arrays, manifest
