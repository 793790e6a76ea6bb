"""C templates live in files under ``csrc/``, not in Python strings (issue 14).

A string literal (plain or f-string) of four or more lines with both ``;`` and ``{`` in a
Python file under ``ember/compiler/c/`` is C text and belongs in a ``csrc/`` file (read once at
import, e.g. ``codegen.csrc("gemm_micro.h.in")``).  Docstrings are prose and are skipped.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
C_DIR = ROOT / "ember" / "compiler" / "c"

# "path:line" -> why that string stays in Python (none today)
ALLOWED: dict[str, str] = {}


def _docstrings(tree: ast.AST) -> set:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return None


def c_templates(source: str) -> list[int]:
    """Line numbers of the string literals in ``source`` that look like C templates."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        text = _text(node)
        if text is None or id(node) in skip:
            continue
        if text.count("\n") >= 3 and ";" in text and "{" in text:
            found.append(node.lineno)
    return sorted(set(found))


def test_the_check_finds_a_template_and_skips_docstrings():
    bad = 'def f():\n    """Doc {\n a;\n b;\n c;\n"""\n    return r"""\nint f(void) {\n' \
          '  return 0;\n}\n"""\n'
    assert c_templates(bad) == [7]
    short = 'X = "for (i = 0; i < n; i++) {\\n}\\n"\n'
    assert c_templates(short) == []
    fstr = 'Y = f"""\n{{\n  a = {x};\n  b;\n}}\n"""\n'
    assert c_templates(fstr) == [1]


def test_no_c_template_strings_under_compiler_c():
    found = []
    for path in sorted(C_DIR.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line in c_templates(path.read_text()):
            if f"{rel}:{line}" not in ALLOWED:
                found.append(f"{rel}:{line}")
    assert not found, f"C templates in Python strings (move them under csrc/): {found}"


@pytest.mark.parametrize("csrc", sorted(C_DIR.rglob("csrc")), ids=lambda p: p.parent.name)
def test_csrc_files_are_package_data(csrc):
    """A template missing from the wheel would fail at import in an installed ember."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["ember"]
    files = [p.relative_to(ROOT / "ember").as_posix() for p in csrc.iterdir() if p.is_file()]
    assert files
    missing = [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert not missing, missing
