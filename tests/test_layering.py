"""ARCHITECTURE.md §1: each layer imports only from the layers below it (or its own)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "ember"

LAYERS = {
    "dtypes": 1, "_memory": 1, "device": 1, "errors": 1, "config": 1, "sym": 1, "_pytree": 1,
    "ops": 2,
    "tensor": 3, "_bind_fast": 3, "_meta_check": 3, "_lazy": 3, "_lazy_array": 3, "_known": 3,
    "_frozen": 3, "random": 3,
    "autograd": 3,
    "_frontend": 3,
    "_tensor_str": 3,
    "functional": 3,
    "linalg": 3, "special": 3, "testing": 3, "sparse": 3,
    "nn": 4, "optim": 4, "utils": 4, "serialization": 4, "amp": 4, "library": 4,
    "attention": 4, "cuda": 4, "backends": 4, "accelerator": 4, "mps": 4, "xpu": 4, "jit": 4,
    "cpu": 4, "ao": 4, "quantization": 4,
    "compiler": 5, "_dynamo": 5, "kernel": 5,
    "utils.cpp_extension": 6,  # builds with the C toolchain; imported explicitly, as PyTorch's
    "export": 6, "fx": 6, "aot": 6, "_inductor": 6, "distributed": 6, "onnx": 6, "cli": 6,
    "demo": 6, "__main__": 6,
}


def _layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "ember":
        return None
    if len(parts) == 1:
        return 6  # the package root re-exports everything; only layer 6 may import it
    return LAYERS.get(".".join(parts[1:3]), LAYERS.get(parts[1]))


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


# --- inside the compiler (ARCHITECTURE.md §1, layer 5) ---------------------------------------
COMPILER = ROOT / "compiler"
COMPILER_PACKAGES = ("frontend", "c", "c/ir", "c/lower", "c/codegen", "c/build", "minifier")


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, at any depth (function-level imports included)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return out


def test_the_compiler_is_a_frontend_and_a_c_backend():
    """compiler/ holds only its package wiring; the code lives in frontend/, c/ and
    minifier/ (which reaches the C backend through the backend registry)."""
    flat = sorted(p.name for p in COMPILER.glob("*.py") if p.name != "__init__.py")
    assert not flat, f"modules directly under ember/compiler/: {flat}"
    for pkg in COMPILER_PACKAGES:
        assert (COMPILER / pkg / "__init__.py").exists(), f"ember/compiler/{pkg} is no package"


def test_the_frontend_does_not_import_the_c_backend():
    """The frontend reaches the C backend only through the backend registry."""
    bad = [f"{p.relative_to(ROOT)} imports {t}" for p in (COMPILER / "frontend").rglob("*.py")
           for t in _imports(p) if t == "ember.compiler.c" or t.startswith("ember.compiler.c.")]
    assert not bad, "\n".join(bad)


def test_the_runtime_imports_alone():
    """An AOT package loads and runs with build/runtime.py: importing it loads none of the
    C backend's lowering, codegen or toolchain (checked in a fresh process)."""
    import subprocess
    import sys

    code = ("import sys, ember.compiler.c.build.runtime as r; "
            "print(' '.join(m for m in sys.modules if m.startswith('ember.compiler.c.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT.parent, timeout=120, check=True)
    loaded = set(out.stdout.split())
    assert "ember.compiler.c.build.runtime" in loaded
    assert loaded <= {"ember.compiler.c.build", "ember.compiler.c.build.runtime"}, loaded


def _compiler_import_graph() -> dict[str, set[str]]:
    """``module -> compiler modules it imports`` (``from pkg import mod`` counts as ``pkg.mod``)."""
    mods = {_module_name(p): p for p in COMPILER.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods
                         else node.module for a in node.names]
            deps.update(n for n in names if n in mods and n != mod)
        graph[mod] = deps
    return graph


def test_no_import_cycles_in_the_compiler():
    """No cycle among the compiler's modules (function-level imports included): each pass
    imports only the stages before it and the IR."""
    graph = _compiler_import_graph()
    index: dict = {}
    low: dict = {}
    stack: list = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"
