"""The exp pass of float softmax/log_softmax row kernels: ``csrc/row_exp.h``.

A row kernel computes the row's max, then ``exp(x - max)`` and its sum, then the output.  In
float (float32 rows, and float16/bfloat16 rows converted into a float row, ``half.row_tail``)
the exp pass calls ``ember_row_expsum`` (one exp per element, written once into the row
scratch; AVX-512 ``vscalefps`` or AVX2 exponent arithmetic, degree-6 polynomial) and softmax
multiplies by the reciprocal of the sum (``ember_row_scale``).  float64 rows keep the
prelude's ``ember_exp`` loops.  Eager's C softmax (``ember/ops/csrc/act_eager.c``) calls the
same helpers, so eager and compiled rows are bit-identical.

>>> softmax_tail("y", "x", "NULL", 4)[0]
'  const float st = ember_row_expsum(y, x, m, C, NULL, 4);'
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.codegen import csrc

HEADER = csrc("row_exp.h")
"""The helpers, inserted into a translation unit whose kernels call them."""


def uses(text: str) -> bool:
    """Whether C ``text`` calls the row exp helpers."""
    return "ember_row_expsum(" in text


def prefetch_arg(k: Any, fits: str | None) -> str:
    """The ``pf`` argument: the next row's address (``x + C``) where the row kernel ``k``
    prefetches its rows (``fits``: ``prefetch.fits_prefetch``), else ``NULL``.  Emitted after
    ``pf_`` is declared."""
    if k.prologue or fits is None:
        return "NULL"
    return "(pf_ ? (const char *)(x + C) : NULL)"


def softmax_tail(y: str, x: str, pf: str, pfsz: int) -> list:
    """softmax's exp pass into ``y`` (from the float row ``x``) and the scaling by 1 / sum."""
    return [f"  const float st = ember_row_expsum({y}, {x}, m, C, {pf}, {pfsz});",
            f"  ember_row_scale({y}, st, C);"]


def logsumexp_sum(x: str, pf: str, pfsz: int) -> list:
    """log_softmax's exp pass over the float row ``x``: the sum ``s`` only."""
    return [f"  const float s = ember_row_expsum(NULL, {x}, m, C, {pf}, {pfsz});"]


__all__ = ["HEADER", "logsumexp_sum", "prefetch_arg", "softmax_tail", "uses"]
