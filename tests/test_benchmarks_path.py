"""The benchmark scripts honour ``PYTHONPATH`` (docs/performance.md, "Measuring two trees"): a
script may put its own checkout on ``sys.path`` only behind ``PYTHONPATH``, so that
``PYTHONPATH=other/tree python benchmarks/X.py`` measures the other tree.  A script that put its
checkout first made before/after pairs time one tree twice."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def _root_expr(node: ast.expr, root_names: set) -> bool:
    """Whether ``node`` names the checkout's root (not the benchmarks folder)."""
    text = ast.unparse(node)
    return (text in root_names or "parents[1]" in text
            or text.count("dirname(") >= 2 or text == "os.path.dirname(HERE)")


def _root_names(tree: ast.Module) -> set:
    """Module-level names bound to the checkout's root (``ROOT = ...parents[1]``)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and _root_expr(node.value, set()):
            names.add(node.targets[0].id)
    return names | {f"str({n})" for n in names}


def _guarded(tree: ast.Module) -> set:
    """ids of the calls in the ``else`` of an ``if os.environ.get("PYTHONPATH"):``."""
    ok = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "PYTHONPATH" in ast.unparse(node.test):
            for sub in node.orelse:
                for call in ast.walk(sub):
                    ok.add(id(call))
    return ok


def _unguarded_root_inserts(path: Path) -> list:
    tree = ast.parse(path.read_text())
    names, ok = _root_names(tree), _guarded(tree)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "sys.path.insert" and \
                len(node.args) == 2 and ast.unparse(node.args[0]) == "0" and \
                _root_expr(node.args[1], names) and id(node) not in ok:
            bad.append(f"{path.name}:{node.lineno}")
    return bad


def test_the_check_finds_a_root_put_first(tmp_path: Path) -> None:
    bad = tmp_path / "bench_x.py"
    bad.write_text("import os, sys\nsys.path.insert(0, "
                   "os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n")
    assert _unguarded_root_inserts(bad) == ["bench_x.py:2"]
    fine = tmp_path / "bench_y.py"
    fine.write_text("import os, sys\nROOT = os.path.dirname(os.path.dirname(__file__))\n"
                    "sys.path.insert(0, os.path.dirname(__file__))\n"
                    "if os.environ.get('PYTHONPATH'):\n    sys.path.append(ROOT)\n"
                    "else:\n    sys.path.insert(0, ROOT)\n")
    assert _unguarded_root_inserts(fine) == []


def test_no_benchmark_puts_its_checkout_before_pythonpath() -> None:
    scripts = sorted(BENCH.glob("*.py"))
    assert len(scripts) > 30, scripts
    bad = [b for p in scripts for b in _unguarded_root_inserts(p)]
    assert not bad, ("these scripts put their checkout first on sys.path, so PYTHONPATH cannot "
                     "choose the tree they measure (put it behind PYTHONPATH as the others "
                     "do):\n" + "\n".join(bad))


def test_a_benchmark_imports_the_ember_pythonpath_names(tmp_path: Path) -> None:
    """Run as a script with PYTHONPATH naming another tree, a benchmark imports that tree's
    ember (a stand-in package here), not its own checkout's."""
    fake = tmp_path / "other" / "ember"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("MARK = 'other tree'\n")
    probe = ("import runpy, sys\ntry:\n    runpy.run_path(sys.argv[1], run_name='probe')\n"
             "except Exception:\n    pass\nimport ember\nprint(ember.__file__)")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "other"))
    out = subprocess.run([sys.executable, "-c", probe, str(BENCH / "bench_models.py")],
                         env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    # the stand-in lacks what the script uses next, so the script fails after importing it:
    # the ember left in sys.modules is the one it imported
    assert out.stdout.strip() == str(fake / "__init__.py"), out.stdout + out.stderr[-2000:]
