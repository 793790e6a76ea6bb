"""``repr`` of tensors in PyTorch's format, and ``set_printoptions``.

The layout rules (integer mode, scientific mode, widths, summarization with edge items, line
wrapping at ``linewidth``, suffixes such as ``dtype=`` and ``grad_fn=``) follow PyTorch's so
that printed output reads the same; the only difference is the ``ember.`` prefix of dtypes.
Works on the NumPy payload directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember import dtypes as dt

__all__ = ["set_printoptions", "get_printoptions"]


@dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrintOptions()


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print (``profile``: 'default', 'short' or 'full'), as in PyTorch."""
    if profile is not None:
        presets = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
                   "full": (4, math.inf, 3, 80)}
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, \
            PRINT_OPTS.linewidth = presets[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    return dict(PRINT_OPTS.__dict__)


class _Formatter:
    def __init__(self, values: np.ndarray, floating: bool) -> None:
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = PRINT_OPTS.precision
        flat = values.reshape(-1)
        if not floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(str(v)))
        else:
            vals = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
            if vals.size:
                a = np.abs(vals)
                vmin, vmax = float(a.min()), float(a.max())
                self.int_mode = bool(np.all(vals == np.ceil(vals)))
                if self.int_mode:
                    if vmax / vmin > 1000.0 or vmax > 1.0e8:
                        self.sci_mode = True
                        self.max_width = max(len(f"{v:.{p}e}") for v in vals.tolist())
                    else:
                        self.max_width = max(len(f"{v:.0f}") + 1 for v in vals.tolist())
                else:
                    if vmax / vmin > 1000.0 or vmax > 1.0e8 or vmin < 1.0e-4:
                        self.sci_mode = True
                        self.max_width = max(len(f"{v:.{p}e}") for v in vals.tolist())
                    else:
                        self.max_width = max(len(f"{v:.{p}f}") for v in vals.tolist())
        if PRINT_OPTS.sci_mode is not None:
            self.sci_mode = PRINT_OPTS.sci_mode

    def format(self, value: Any) -> str:
        p = PRINT_OPTS.precision
        if self.floating:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{p}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{p}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


def _summarized(a: np.ndarray) -> np.ndarray:
    """The edge items of every dim (what is shown when summarizing)."""
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * e:
        a = np.concatenate([a[:e], a[-e:]])
    return np.stack([_summarized(x) for x in a]) if a.ndim > 1 else a


def _vector_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    element_length = fmt.max_width + 2
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / element_length)))
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        data = [fmt.format(v) for v in a[:e].tolist()] + [" ..."] + \
            [fmt.format(v) for v in a[-e:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        slices = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."] + \
            [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(len(a) - e, len(a))]
    else:
        slices = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last_line_len + len(s) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + s)
            last_line_len = indent + len(s)
        else:
            parts.append(", " + s)
            last_line_len += len(s) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t: Any) -> str:
    prefix = "tensor("
    indent = len(prefix)
    a = t._data
    d = t.dtype
    if d in (dt.float16, dt.bfloat16):
        a = a.astype(np.float32)
    suffixes = []
    has_default = d in (dt.get_default_dtype(), dt.int64, dt.bool)
    if a.size == 0:
        if a.ndim != 1:
            suffixes.append("size=" + str(tuple(a.shape)))
        if not has_default:
            suffixes.append(f"dtype={d!r}")
        body = "[]"
    else:
        if not has_default:
            suffixes.append(f"dtype={d!r}")
        summarize = a.size > PRINT_OPTS.threshold
        fmt = _Formatter(_summarized(a) if summarize else a, d.is_floating_point)
        if d is dt.bool:
            fmt = _Formatter(a if not summarize else _summarized(a), False)
        body = _tensor_str(a, indent, summarize, fmt)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
