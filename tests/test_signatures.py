"""PyTorch's signatures: every public function of ``ember``, ``ember.nn.functional``,
``ember.linalg``, ``ember.special`` and every ``Tensor`` method that torch also has accepts the
calls torch's signature accepts (parameter names, positions, keyword-only names, defaults;
the rule is in tests/signatures.py).  A difference fails unless it is listed below with a
reason; a listed difference that is gone fails too, so the list stays true."""

from __future__ import annotations

import inspect
import re

import pytest

import ember
import ember.nn.functional as EF
from tests.signatures import from_inspect, problems, torch_overloads

torch = pytest.importorskip("torch")

# Differences by kind (regular expression over one problem's text) -> why ember keeps it.
KNOWN_KINDS = {
    r"default memory_format=None, torch: \[.*\]": "None means PyTorch's default format "
    "(ember tensors are always strided, row-major or preserved)",
    r"default pin_memory=False, torch: \['None'\]": "same behaviour: None and False both mean "
    "unpinned",
    r"default unbiased=None, torch: \['True'\]": "None = not given, so that `correction` decides; "
    "the result is PyTorch's",
    r"default dtype=None, torch: \['4.0'\]": "None means int64 here, PyTorch's default",
    r"default (stride|dims)=None, torch: \['\(\)'\]": "None and () both mean the default",
    r"default nan=0.0, torch: \['None'\]": "PyTorch's None means 0.0",
    r"default layout=None, torch: \['strided'\]": "None means strided, ember's only dense layout",
}

# Differences of one function -> why.
KNOWN = {
    "torch.load": "weights_only defaults to True (PyTorch's None also means True since 2.6)",
    "torch.compile": "PyTorch 2.9+ options without an ember counterpart yet",
    "torch.from_dlpack": "copy=/device= (PyTorch 2.9) not taken: ember imports zero-copy, CPU only",
    "torch.from_numpy": "PyTorch refuses keyword arguments here; ember's name is never seen",
    "linalg.vector_norm": "PyTorch accepts both x= and input=; ember takes x (the documented name)",
    "torch.tensor_split": "PyTorch's three overloads name the second argument indices=, sections= "
                          "or tensor_indices_or_sections=; ember takes it positionally",
    "Tensor.tensor_split": "as torch.tensor_split",
    "Tensor.to_sparse": "blocked and hybrid layouts (blocksize=, dense_dim=) are not supported",
    "F.elu_": "scale/input_scale are private arguments of PyTorch's C++ binding",
    "Tensor.where": "PyTorch's docstring says where(condition, y); its binding takes other= "
                    "(checked with torch 2.13), as ember does",
    "torch.set_num_threads": "PyTorch's binding takes no keyword arguments; the name is unseen",
}


def _pairs():
    spaces = [("torch", torch, ember), ("F", torch.nn.functional, EF),
              ("linalg", torch.linalg, ember.linalg)]
    if hasattr(ember, "special"):
        spaces.append(("special", torch.special, ember.special))
    for ns, tmod, emod in spaces:
        for name in sorted(dir(emod)):
            if name.startswith("_"):
                continue
            try:
                e, t = getattr(emod, name), getattr(tmod, name, None)
            except Exception:  # noqa: BLE001 (ember's lazily failing names)
                continue
            if (t is None or not callable(e) or not callable(t) or inspect.isclass(e)
                    or inspect.isclass(t) or inspect.ismodule(e)):
                continue
            yield f"{ns}.{name}", ns, name, t, e, False
    for name in sorted(dir(ember.Tensor)):
        if name.startswith("_") or isinstance(inspect.getattr_static(ember.Tensor, name),
                                              property):
            continue
        e, t = getattr(ember.Tensor, name), getattr(torch.Tensor, name, None)
        if t is not None and callable(e) and callable(t) and not inspect.isclass(e):
            yield f"Tensor.{name}", "Tensor", name, t, e, True


def _unexplained(found: list[str]) -> list[str]:
    return [p for p in found if not any(re.fullmatch(k, p) for k in KNOWN_KINDS)]


NO_ORACLE: list[str] = []  # torch functions whose Python signature cannot be read


def _differences() -> dict[str, list[str]]:
    out = {}
    for full, ns, name, t, e, method in _pairs():
        overloads = torch_overloads(torch, ns, name, t)
        if not overloads:
            NO_ORACLE.append(full)
            continue
        ep = from_inspect(inspect.signature(e), drop_self=method)
        found = _unexplained(problems(ep, overloads))
        if found:
            out[full] = found
    return out


DIFFS = _differences()


def test_the_comparison_covers_the_api():
    """Hundreds of functions are compared, and the comparison does find a difference."""
    assert sum(1 for _ in _pairs()) > 700
    wrong = problems(from_inspect(inspect.signature(lambda input, dim=1: 0)),
                     torch_overloads(torch, "torch", "sum", torch.sum))
    assert wrong, "sum(input, dim=1) must differ from torch.sum's signature"


def test_few_functions_lack_a_torch_signature():
    """torch C bindings without a schema or documented signature cannot be compared; they
    stay few (each is a setting getter/setter, checked by its own tests)."""
    assert len(NO_ORACLE) <= 15, NO_ORACLE


def test_signatures_match_torch():
    unexplained = {k: v for k, v in DIFFS.items() if k not in KNOWN}
    assert not unexplained, "signatures differ from PyTorch's:\n" + "\n".join(
        f"  {k}: {'; '.join(v)}" for k, v in sorted(unexplained.items()))


def test_known_differences_still_exist():
    stale = sorted(k for k in KNOWN if k not in DIFFS)
    assert not stale, f"listed in KNOWN but now matching PyTorch (remove them): {stale}"
