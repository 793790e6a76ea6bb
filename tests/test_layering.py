"""ARCHITECTURE.md §1: each layer imports only from the layers below it (or its own)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "ember"

LAYERS = {
    "dtypes": 1, "_memory": 1, "device": 1, "errors": 1, "config": 1, "sym": 1, "_pytree": 1,
    "ops": 2,
    "tensor": 3, "_lazy": 3, "random": 3, "autograd": 3, "_frontend": 3, "_tensor_str": 3,
    "functional": 3,
    "linalg": 3, "special": 3, "testing": 3, "sparse": 3,
    "nn": 4, "optim": 4, "utils": 4, "serialization": 4, "amp": 4, "library": 4,
    "attention": 4, "cuda": 4, "backends": 4, "accelerator": 4, "mps": 4, "xpu": 4, "jit": 4,
    "cpu": 4,
    "compiler": 5, "_dynamo": 5,
    "export": 6, "aot": 6, "distributed": 6, "onnx": 6, "cli": 6, "demo": 6, "__main__": 6,
}


def _layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "ember":
        return None
    if len(parts) == 1:
        return 6  # the package root re-exports everything; only layer 6 may import it
    return LAYERS.get(parts[1])


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def test_every_top_level_module_has_a_layer():
    for p in ROOT.iterdir():
        name = p.stem if p.suffix == ".py" else p.name
        if name in ("__init__", "__pycache__") or (p.is_dir() and not (p / "__init__.py").exists()):
            continue
        assert name in LAYERS, f"ember/{p.name} has no layer in ARCHITECTURE.md §1 / LAYERS"


def test_imports_only_go_down():
    bad = []
    for path in ROOT.rglob("*.py"):
        mod = _module_name(path)
        if mod == "ember":
            continue
        own = _layer_of(mod)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "ember":  # from ember import dtypes -> ember.dtypes
                    targets = [f"ember.{a.name}" for a in node.names]
                else:
                    targets = [node.module]
            for t in targets:
                layer = _layer_of(t)
                if layer is not None and own is not None and layer > own:
                    bad.append(f"{mod} (layer {own}) imports {t} (layer {layer})")
    assert not bad, "upward imports:\n" + "\n".join(bad)
