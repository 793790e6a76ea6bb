"""API coverage: which names of PyTorch's namespaces ember has, written to docs/api_coverage.md.

    python benchmarks/api_coverage.py --scan DIR [DIR ...]   # needs torch: refresh the name lists
    python benchmarks/api_coverage.py                        # write docs/api_coverage.md
    python benchmarks/api_coverage.py --check                # exit 1 if the file is stale

``--scan`` records, in ``benchmarks/data/api_names.json``, (a) every public name of each
namespace in the installed torch, (b) every overridable function of
``torch.overrides.get_overridable_functions()``, and (c) the names that public model code uses,
found by reading the ``.py`` files under the given folders with ``ast``: attribute chains rooted
at ``torch`` and at the usual aliases (``nn``, ``F``, ``optim``), and, for ``Tensor``, any
attribute whose name is a public ``torch.Tensor`` attribute (a heuristic: ``x.view(...)`` counts
whatever ``x`` is).  Writing the report needs only ember and that JSON, so the staleness test
runs without torch.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "api_names.json"
REPORT = ROOT / "docs" / "api_coverage.md"
NAMESPACES = ["torch", "torch.nn.functional", "Tensor", "torch.nn", "torch.optim", "torch.linalg"]
GOAL_PUBLIC, GOAL_OVERRIDABLE = 0.90, 0.75


# ----------------------------------------------------------------------------- scanning
def _torch_names(torch) -> dict[str, list[str]]:  # noqa: ANN001
    import inspect
    import types

    def public(obj, keep=lambda v: True):  # noqa: ANN001, ANN202
        out = []
        for n in dir(obj):
            if n.startswith("_"):
                continue
            try:
                v = getattr(obj, n)
            except Exception:  # noqa: BLE001 (a lazy attribute that fails to import)
                continue
            if not isinstance(v, types.ModuleType) and keep(v):
                out.append(n)
        return sorted(out)

    is_module = lambda v: inspect.isclass(v) and issubclass(v, torch.nn.Module)  # noqa: E731
    optim = public(torch.optim, inspect.isclass)
    optim += [f"lr_scheduler.{n}" for n in public(torch.optim.lr_scheduler, inspect.isclass)]
    return {"torch": public(torch), "torch.nn.functional": public(torch.nn.functional),
            "Tensor": public(torch.Tensor), "torch.nn": public(torch.nn, is_module),
            "torch.optim": sorted(optim), "torch.linalg": public(torch.linalg)}


def _overridable(torch) -> list[str]:  # noqa: ANN001
    """Dotted names ('torch.add', 'Tensor.add', 'torch.nn.functional.relu', ...)."""
    out = set()
    for ns, fns in torch.overrides.get_overridable_functions().items():
        prefix = "Tensor" if ns is torch.Tensor else getattr(ns, "__name__", str(ns))
        if prefix == "torch.functional":  # torch.functional's functions are torch.X
            prefix = "torch"
        short = prefix.rsplit(".", 1)[-1] + "_"
        for f in fns:
            name = getattr(f, "__name__", None)
            if prefix in ("torch.special", "torch.linalg", "torch.fft") and name and \
                    name.startswith(short):
                name = name[len(short):]  # C builtins are named special_erf, linalg_inv, ...
            if name and not name.startswith("_"):
                out.add(f"{prefix}.{name}")
    return sorted(out)


_ALIASES = {"torch": "torch", "torch.nn": "torch.nn", "torch.nn.functional": "torch.nn.functional",
            "torch.optim": "torch.optim", "torch.linalg": "torch.linalg"}


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> torch module it stands for (``import torch.nn as nn``, ``from torch import
    nn``, ``from torch.nn import functional as F``)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in _ALIASES:
                    names[a.asname or a.name.split(".")[0]] = a.name if a.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and node.module in ("torch", "torch.nn"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in _ALIASES:
                    names[a.asname or a.name] = full
    return names


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _classify(full: list[str]) -> tuple[str, str] | None:
    """('torch.nn', 'Linear') for ['torch', 'nn', 'Linear'], etc."""
    dotted = ".".join(full)
    for ns in ("torch.nn.functional", "torch.optim.lr_scheduler", "torch.optim", "torch.linalg",
               "torch.nn"):
        if dotted.startswith(ns + ".") and len(full) > ns.count(".") + 1:
            name = full[ns.count(".") + 1]
            if ns == "torch.optim.lr_scheduler":
                return "torch.optim", f"lr_scheduler.{name}"
            return ns, name
    if len(full) >= 2 and full[0] == "torch":
        return "torch", full[1]
    return None


def scan_code(dirs: list[Path], tensor_names: set[str]) -> dict[str, Counter]:
    used = {ns: Counter() for ns in NAMESPACES}
    for d in dirs:
        for path in sorted(Path(d).rglob("*.py")):
            try:
                tree = ast.parse(path.read_text(errors="replace"))
            except SyntaxError:
                continue
            aliases = _aliases(tree)
            attrs = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
            inner = {id(n.value) for n in attrs if isinstance(n.value, ast.Attribute)}
            for node in attrs:
                chain = _chain(node)
                if chain and chain[0] in aliases:
                    if id(node) in inner:  # count torch.nn.functional.relu once, as relu
                        continue
                    full = aliases[chain[0]].split(".") + chain[1:]
                    hit = _classify(full)
                    if hit:
                        used[hit[0]][hit[1]] += 1
                elif node.attr in tensor_names:
                    used["Tensor"][node.attr] += 1
    return used


def refresh(dirs: list[Path]) -> None:
    import torch

    names = _torch_names(torch)
    used = scan_code(dirs, set(names["Tensor"]))
    for ns in NAMESPACES:  # keep only names torch really has in that namespace
        have = set(names[ns])
        used[ns] = Counter({k: v for k, v in used[ns].items() if k in have})
    DATA.parent.mkdir(parents=True, exist_ok=True)
    DATA.write_text(json.dumps({
        "torch_version": torch.__version__.split("+")[0],
        "corpus": sorted(Path(d).name for d in dirs),
        "names": names, "overridable": _overridable(torch),
        "used": {ns: dict(sorted(c.items())) for ns, c in used.items()},
    }, indent=1, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------- the report
def _ember_has(ns: str, name: str) -> bool:
    import ember
    import ember.nn.functional

    objs = {"torch": ember, "torch.nn.functional": ember.nn.functional, "Tensor": ember.Tensor,
            "torch.nn": ember.nn, "torch.optim": ember.optim, "torch.linalg": ember.linalg}
    obj = objs[ns]
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 (AttributeError or ember's not-implemented errors)
            return False
    return True


def _resolve_dotted(dotted: str) -> bool:
    head, _, rest = dotted.partition(".")
    if head == "Tensor":
        return _ember_has("Tensor", rest)
    ns, _, name = dotted.rpartition(".")
    mapping = {"torch": "torch", "torch.nn.functional": "torch.nn.functional",
               "torch.linalg": "torch.linalg"}
    if ns in mapping:
        return _ember_has(mapping[ns], name)
    import importlib

    try:
        mod = importlib.import_module("ember" + ns[len("torch"):])
    except ImportError:
        return False
    return hasattr(mod, name)


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def render() -> str:
    data = json.loads(DATA.read_text())
    lines = [
        "# API coverage",
        "",
        "Generated by `python benchmarks/api_coverage.py` from `benchmarks/data/api_names.json`",
        f"(torch {data['torch_version']}'s names; names used by public model code, read from: "
        f"{', '.join(data['corpus'])}).  Do not edit by hand: `tests/test_api_coverage.py` fails",
        "when this file is stale.  *Used* counts distinct names of the namespace that the public",
        "code uses (Tensor: any attribute with a Tensor attribute's name, a heuristic).",
        "",
        "| namespace | torch names | ember has | used by public code | ember has of those |",
        "| --- | --- | --- | --- | --- |",
    ]
    missing_used: dict[str, list[str]] = {}
    for ns in NAMESPACES:
        names, used = data["names"][ns], sorted(data["used"][ns])
        have = [n for n in names if _ember_has(ns, n)]
        have_used = [n for n in used if _ember_has(ns, n)]
        missing_used[ns] = [n for n in used if n not in have_used]
        lines.append(f"| `{ns}` | {len(names)} | {len(have)} ({_pct(len(have), len(names))}) | "
                     f"{len(used)} | {len(have_used)} ({_pct(len(have_used), len(used))}) |")
    over = data["overridable"]
    have_over = sum(_resolve_dotted(d) for d in over)
    lines += ["", f"Overridable functions (`torch.overrides.get_overridable_functions()`): "
                  f"{len(over)}, ember has {have_over} ({_pct(have_over, len(over))}).",
              "", f"Goals (issue 13): >= {GOAL_PUBLIC:.0%} of each namespace's names used by "
                  f"public code, >= {GOAL_OVERRIDABLE:.0%} of all overridable names.", "",
              "## Used by public code, missing in ember", ""]
    for ns in NAMESPACES:
        counts = data["used"][ns]
        miss = sorted(missing_used[ns], key=lambda n: (-counts[n], n))
        shown = ", ".join(f"`{n}` ({counts[n]})" for n in miss) or "none"
        lines.append(f"- `{ns}`: {shown}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scan", nargs="+", type=Path, help="folders of public code (needs torch)")
    p.add_argument("--check", action="store_true", help="exit 1 if the report is stale")
    args = p.parse_args(argv)
    if args.scan:
        refresh(args.scan)
    text = render()
    if args.check:
        ok = REPORT.exists() and REPORT.read_text() == text
        print("docs/api_coverage.md is " + ("up to date" if ok else "STALE: rerun "
              "python benchmarks/api_coverage.py"))
        return 0 if ok else 1
    REPORT.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
        sys.path.append(str(ROOT))
    else:
        sys.path.insert(0, str(ROOT))
    sys.exit(main())
