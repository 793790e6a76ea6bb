"""``einsum``: parse PyTorch's equation forms into the strict ``einsum`` primitive.

The frontend expands ellipses into fresh labels, resolves the implicit output (ellipsis dims
first, then the labels seen once, in ASCII order), checks sizes with PyTorch's messages, and
expands size-1 dims that broadcast against a larger size, so the primitive only sees an
explicit equation whose labels each have one size.
"""

from __future__ import annotations

import functools
from typing import Any

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import check_tensor, expand_to, to_dtype
from ember.errors import DTypeRuntimeError, EmberValueError, ShapeError
from ember.ops.linalg import EINSUM
from ember.ops.registry import bind
from ember.tensor import Tensor

__all__ = ["einsum"]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SCALAR = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
           "int32": "Int", "int64": "Long", "int16": "Short", "int8": "Char", "uint8": "Byte",
           "bool": "Bool"}


def _err(msg: str) -> ShapeError:
    return ShapeError(f"[einsum] einsum(): {msg}")


def _tokens(term: str, start: int, where: str) -> list[str]:
    """Letters of one term, with ``"..."`` as one token."""
    out: list[str] = []
    i = 0
    while i < len(term):
        c = term[i]
        if c == ".":
            if term[i:i + 3] != "...":
                raise _err(f"found '.' for {where} that is not part of any ellipsis")
            if "..." in out:
                raise _err(f"found '.' for {where} for which an ellipsis was already found")
            out.append("...")
            i += 3
            continue
        if c not in _LETTERS:
            raise _err(f"invalid subscript given at index {start + i} in the equation string, "
                       f"subscripts must be in [a-zA-Z]")
        out.append(c)
        i += 1
    return out


@functools.lru_cache(maxsize=512)
def _parse(equation: str, ndims: tuple) -> tuple[tuple[str, ...], str, frozenset]:
    """Normalized input terms, output term and the ellipsis labels for operands of ``ndims``."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms, pos = [], 0
    for t in lhs.split(","):
        terms.append(_tokens(t, pos, f"operand {len(terms)}"))
        pos += len(t) + 1
    if len(terms) > len(ndims):
        raise _err("fewer operands were provided than specified in the equation")
    if len(terms) < len(ndims):
        raise _err("more operands were provided than specified in the equation")
    ell = 0
    for i, (t, nd) in enumerate(zip(terms, ndims)):
        n = len(t) - ("..." in t)
        if "..." not in t and n != nd:
            raise _err(f"the number of subscripts in the equation ({n}) does not match the "
                       f"number of dimensions ({nd}) for operand {i} and no ellipsis was given")
        if "..." in t:
            if n > nd:
                raise _err(f"the number of subscripts in the equation ({n}) is more than the "
                           f"number of dimensions ({nd}) for operand {i}")
            ell = max(ell, nd - n)
    spare = [c for c in _LETTERS if c not in eq]
    if ell > len(spare):
        raise EmberValueError("[einsum] too many dimensions: einsum supports 52 labels at most")
    ell_labels = "".join(spare[:ell])
    norm = []
    for t, nd in zip(terms, ndims):
        k = nd - (len(t) - ("..." in t))
        norm.append("".join(ell_labels[ell - k:] if c == "..." else c for c in t))
    if arrow:
        out_tokens = _tokens(rhs, len(lhs) + 2, "output")
        out = "".join(ell_labels if c == "..." else c for c in out_tokens)
        used = "".join(norm)
        for c in out_tokens:
            if c != "..." and c not in used:
                raise _err(f"output subscript {c} does not appear in the equation for any input "
                           f"operand")
            if c != "..." and out_tokens.count(c) > 1:
                raise _err(f"output subscript {c} appears more than once in the output")
    else:
        letters = [c for t in terms for c in t if c != "..."]
        out = ell_labels + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return tuple(norm), out, frozenset(ell_labels)


@autocast_op("lower")
def einsum(*args: Any) -> Tensor:
    """Einstein summation: ``einsum("ij,jk->ik", a, b)``, ``einsum("ij,jk", [a, b])`` or the
    sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``."""
    if not args:
        raise EmberValueError("[einsum] einsum(): must specify the equation string and at least "
                              "one operand, or at least one operand and its subscripts list")
    if isinstance(args[0], str):
        equation, ops = args[0], list(args[1:])
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = list(ops[0])
    else:
        equation, ops = _from_sublists(args)
    for i, op in enumerate(ops):
        check_tensor(op, "einsum", f"operand {i}")
    terms, out, ell = _parse(equation, tuple(op._data.ndim for op in ops))
    d = ops[0]._dtype
    for op in ops[1:]:
        if op._dtype is not d:
            raise DTypeRuntimeError(f"[einsum] expected scalar type {_SCALAR[d.name]} but found "
                                    f"{_SCALAR[op._dtype.name]}")
    sizes: dict[str, int] = {}
    for i, (t, op) in enumerate(zip(terms, ops)):
        for c, n in zip(t, op._data.shape):
            seen = sizes.get(c, 1)
            if n != 1 and seen != 1 and n != seen:
                if c in ell:
                    raise _err(f"dimension {sorted(ell).index(c)} covered by ellipsis in operand "
                               f"{i}has size {n} which does not broadcast with previously seen "
                               f"ellipsis with size {seen} for the respective dimension")
                raise _err(f"subscript {c} has size {n} for operand {i} which does not "
                           f"broadcast with previously seen size {seen}")
            if n != 1 or c not in sizes:
                sizes[c] = n
    alone = False
    if d.category == 1 or d in (dt.float16, dt.bfloat16):
        alone = _summed_alone(terms, out, tuple(op._data.shape for op in ops))
    ops = [expand_to(op, tuple(sizes[c] for c in t)) for t, op in zip(terms, ops)]
    if alone and d.category == 1 and d is not dt.int64:
        ops = [to_dtype(op, dt.int64) for op in ops]  # PyTorch sums those labels with sum()
    if d in (dt.float16, dt.bfloat16) and (alone or len(ops) > 2):
        return _pairwise(list(terms), out, ops)
    return bind(EINSUM, *ops, equation=",".join(terms) + "->" + out)


def _summed_alone(terms: tuple, out: str, shapes: tuple) -> bool:
    """Whether PyTorch sums a label out of a single operand (it is not in the output and no
    other operand has it with a size above 1); that ``sum`` promotes integers to int64.  With
    one operand every label missing from the output is summed, even of size 1."""
    for i, t in enumerate(terms):
        for c, n in zip(t, shapes[i]):
            if c in out or (n == 1 and len(terms) > 1):  # with several operands PyTorch
                continue                                   # squeezes size-1 labels instead
            if not any(m != 1 for j, u in enumerate(terms) if j != i
                       for e, m in zip(u, shapes[j]) if e == c):
                return True
    return False


def _pairwise(terms: list, out: str, ops: list) -> Tensor:
    """PyTorch's order for low precision: sum labels found in one operand only, then contract
    left to right, rounding after each step as PyTorch does."""
    for i, t in enumerate(terms):
        keep = ""
        for c in t:
            if c not in keep and (c in out or any(c in u for j, u in enumerate(terms) if j != i)):
                keep += c
        if keep != t:
            ops[i] = bind(EINSUM, ops[i], equation=f"{t}->{keep}")
            terms[i] = keep
    acc, at = ops[0], terms[0]
    for j in range(1, len(ops)):
        later = out + "".join(terms[j + 1:])
        labels = ""
        for c in at + terms[j]:
            if c in later and c not in labels:
                labels += c
        acc = bind(EINSUM, acc, ops[j], equation=f"{at},{terms[j]}->{labels}")
        at = labels
    return acc if at == out else bind(EINSUM, acc, equation=f"{at}->{out}")


def _from_sublists(args: tuple) -> tuple[str, list]:
    ops = list(args[0::2])
    subs = list(args[1::2])
    out = None
    if len(args) % 2 == 1:
        out = ops.pop()
    if out is not None and isinstance(out, Tensor):
        raise EmberValueError("[einsum] the sublist format needs a subscript list per operand")

    def term(sub: Any) -> str:
        s = []
        for x in sub:
            if x is Ellipsis:
                s.append("...")
            elif isinstance(x, int) and 0 <= x < 52:
                s.append(_LETTERS[x])
            else:
                raise EmberValueError(f"[einsum] einsum(): expected subscript to be within the "
                                      f"range [0, 52), but got {x}")
        return "".join(s)

    eq = ",".join(term(s) for s in subs)
    if out is not None:
        eq += "->" + term(out)
    return eq, ops
