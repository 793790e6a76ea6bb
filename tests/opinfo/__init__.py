"""The OpInfo conformance table; see ``core.py``."""

from __future__ import annotations

import importlib
import pkgutil

from tests.opinfo.core import OpInfo


def all_opinfos() -> list[OpInfo]:
    out: list[OpInfo] = []
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("ops_"):
            out.extend(importlib.import_module(f"{__name__}.{mod.name}").OPINFOS)
    names = [o.name for o in out]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate OpInfo names: {sorted(dup)}"
    return out


ALL_OPINFOS = all_opinfos()
