"""Registry of method families: name → module implementing :mod:`veilbench.families.base`."""

from __future__ import annotations

import importlib
from types import ModuleType

from veilbench.validation import ValidationError

#: Family name → module path. Modules are imported lazily (torch, umap are heavy).
FAMILY_MODULES: dict[str, str] = {
    "scoreshield": "veilbench.scoreshield.family",
    "gca": "veilbench.gca.family",
    "dc": "veilbench.dc.family",
    "anchornoise": "veilbench.anchornoise.family",
}


def get_family(name: str) -> ModuleType:
    """Import and return the family module registered under ``name``."""
    try:
        path = FAMILY_MODULES[name]
    except KeyError:
        raise ValidationError(f"family: must be one of {sorted(FAMILY_MODULES)}, got {name!r}") from None
    return importlib.import_module(path)
