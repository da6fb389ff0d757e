"""What ``veilbench run`` checks before any stage runs, shared with ``veilbench validate``.

Besides the schema (:func:`veilbench.config.load_config`), a run through DVC needs every params
key that ``dvc.yaml``'s stages declare: DVC resolves ``params:`` entries such as ``seed``,
``sweeps.${key}`` or ``report`` against the file when it saves a stage, and a missing key
(``MissingParamsError``) surfaces only then, after the stages before it ran. The schema gives
those keys defaults (an empty ``report``), so only a check against ``dvc.yaml`` sees them missing.

For a stage with ``foreach: ${<section>}``, each ``${key}`` entry is checked for every key of that
section (``sweeps.${key}`` for every sweep); ``${item.…}`` entries name dependencies, not params.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from veilbench import strict_yaml


def _has(raw: Any, dotted: str) -> bool:
    node = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def dvc_param_keys(dvc_yaml: Path, raw: dict[str, Any]) -> dict[str, list[str]]:
    """Dotted params key → the DVC stages (addresses) that read it, for the params file ``raw``
    (``foreach`` stages expanded over the keys of their section in ``raw``)."""
    spec = yaml.safe_load(dvc_yaml.read_text(encoding="utf-8")) or {}
    wanted: dict[str, list[str]] = {}
    for name, stage in (spec.get("stages") or {}).items():
        foreach = stage.get("foreach") if isinstance(stage, dict) else None
        if isinstance(foreach, str) and (m := re.fullmatch(r"\$\{(\w+)\}", foreach)):
            section = raw.get(m.group(1))
            keys = list(section) if isinstance(section, dict) else []
            body = stage.get("do") or {}
        else:
            keys, body = [None], stage
        for entry in body.get("params") or []:
            if not isinstance(entry, str) or "${item" in entry:
                continue
            for key in keys:
                if "${key}" in entry and key is None:
                    continue
                dotted = entry.replace("${key}", str(key)) if key is not None else entry
                wanted.setdefault(dotted, []).append(name if key is None else f"{name}@{key}")
    return wanted


def missing_dvc_params(params_path: Path, dvc_yaml: Path) -> list[str]:
    """One problem line per params key that a stage of ``dvc_yaml`` reads and ``params_path`` lacks."""
    raw = strict_yaml.load(params_path)
    if not isinstance(raw, dict):
        return []  # the schema check says what is wrong
    problems = []
    for dotted, stages in dvc_param_keys(dvc_yaml, raw).items():
        if not _has(raw, dotted):
            shown = ", ".join(stages[:3]) + (f" and {len(stages) - 3} more" if len(stages) > 3 else "")
            problems.append(f"{dotted}: missing; dvc.yaml's stage {shown} reads it (DVC would stop there with "
                            f"MissingParamsError): add it to {params_path.name}")
    return problems
