"""C of ``FlexAttentionKernel`` (``ir/kernels.py``): the template ``csrc/flex_attention.c.in``
filled in with the kernel's sizes, strides and its traced ``score_mod``/``mask_mod`` rendered as
C statements (``render_mod``).  The lowering: ``lower/flex.py``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ember import dtypes as dt
from ember.compiler.c.ir.kernels import FlexAttentionKernel
from ember.compiler.c.ir.loop_ir import COMPUTE_CTYPES, CTYPES
from ember.compiler.c.lower.context import c_scalar
from ember.ops.registry import REGISTRY

_TEMPLATE = (Path(__file__).with_name("csrc") / "flex_attention.c.in").read_text()
_IND = " " * 10


def _dtype(name: str) -> Any:
    return getattr(dt, name)


def render_mod(expr: Any, in_dtypes: tuple, captured: tuple, result: str, ctype: str) -> str:
    """C statements computing ``expr`` (a ``FlexExpr``) into ``const <ctype> <result>``.
    Mod input ``k`` is the C variable ``x<k>`` of dtype ``in_dtypes[k]``; captured tensor
    ``k`` is the operand ``captured[k]``.  Raises ValueError for what C cannot express."""
    vals: list = []  # (C name, ember dtype) per node
    lines = []

    def arg(a: Any) -> tuple:
        if type(a) is tuple and len(a) == 2 and a[0] in ("x", "c", "v"):
            if a[0] == "x":
                return f"x{a[1]}", in_dtypes[a[1]]
            if a[0] == "v":
                return vals[a[1]]
            raise ValueError("a captured tensor used as a value (not indexed)")
        return a, None

    for j, (op, args, params, out_name) in enumerate(expr.nodes):
        out_dt = _dtype(out_name)
        if out_dt.np.name not in CTYPES:
            raise ValueError(f"dtype {out_name}")
        name = f"{result}_v{j}"
        ct_out = COMPUTE_CTYPES[out_dt.np.name]
        if op == "flex_load":
            c = captured[args[0][1]]
            if len(args) - 1 > len(c.shape) or len(args) - 1 != len(c.shape):
                raise ValueError("a partial index into a captured tensor")
            terms = [str(c.offset)]
            for d, a in enumerate(args[1:]):
                text, _ = arg(a)
                if not isinstance(text, str):
                    text = str(int(text))
                n = c.shape[d]
                terms.append(f"(((int64_t)({text}) + ({text} < 0 ? {n} : 0)) * {c.strides[d]})")
            expr_c = f"{c.buf.name}[{' + '.join(terms)}]"
        else:
            tmpl = REGISTRY[op].c_template(dict(params))
            if tmpl is None:
                raise ValueError(f"{op} has no C expression")
            refs = [arg(a) for a in args]
            in_dt = next((d for _, d in refs if d is not None), out_dt)
            ct = COMPUTE_CTYPES[in_dt.np.name]
            texts = [t if d is not None else c_scalar(t, ct) for t, d in refs]
            fmt = {"T": ct}
            for k, v in params:
                if k == "dtype":
                    fmt[k] = CTYPES[v.np.name]
                elif k != REGISTRY[op].c_selector:
                    if type(v) not in (int, float, bool):
                        raise ValueError(f"parameter {k}={v!r}")
                    fmt[k] = c_scalar(v, "double" if ct in ("float", "double") else ct)
            expr_c = tmpl.format(*texts, **fmt)
        lines.append(f"{_IND}const {ct_out} {name} = {expr_c};")
        vals.append((name, out_dt))
    text, _ = arg(expr.out)
    if not isinstance(text, str):
        text = c_scalar(text, ctype)
    lines.append(f"{_IND}const {ctype} {result} = ({ctype})({text});")
    return "\n".join(lines)


def helpers_used(text: str) -> set:
    return set(re.findall(r"\b(ember_\w+)\s*\(", text))


def mods_source(k: FlexAttentionKernel) -> tuple[str, str]:
    """(mask statements, score statements) of ``k``."""
    t = k.out.ctype
    ins = (k.out.dtype, dt.int32, dt.int32, dt.int32, dt.int32)
    mask = f"{_IND}const int keep = 1;" if k.mask is None else \
        render_mod(k.mask, ins, k.captured, "keep", "int")
    score = f"{_IND}const {t} res = x0;" if k.score is None else \
        render_mod(k.score, ins, k.captured, "res", t)
    return mask, score


def kernel_source(k: FlexAttentionKernel, openmp: bool = False) -> str:
    """The C function of one FlexAttentionKernel (stores, then loads, then ints/floats)."""
    loads, stores = k.buffers()
    t = k.out.ctype
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    mask, score = mods_source(k)
    kvn, kvi, fkn, fki = k.blocks
    nq = -(-k.L // k.QB)
    items = k.B * k.HQ * nq * k.splits
    fmt: dict = dict(
        name=k.name, ops=" ".join(k.ops), params=", ".join(params), T=t, B=k.B, HQ=k.HQ,
        L=k.L, S=k.S, E=k.E, EV=k.EV, QB=k.QB, KB=k.KB, NQ=nq, G=k.HQ // k.HKV,
        SPLITS=k.splits, scale=repr(float(k.scale)), mask=mask, score=score,
        O=k.outs[0].name, LSE=k.outs[1].name, MX=k.outs[2].name,
        omp_items=_omp(openmp, items, dynamic=True), omp_rows=_omp(openmp, k.B * k.HQ * k.L))
    for tag, x in (("q", k.q), ("k", k.k), ("v", k.v)):
        fmt[tag.upper()] = x.buf.name
        fmt[f"{tag}_off"] = x.offset
        for d in range(4):
            fmt[f"{tag}s{d}"] = x.strides[d]
    for tag, x in (("kvn", kvn), ("kvi", kvi)):
        fmt[tag.upper()] = x.buf.name
        fmt[f"{tag}_off"] = x.offset
        for d, st in enumerate(x.strides):
            fmt[f"{tag}{d}"] = st
    if fkn is None:
        fmt["nfull"] = "0"
        fmt["fki"] = "kvi"
        fmt["fki3"] = 0
    else:
        fmt["nfull"] = (f"(int64_t){fkn.buf.name}[{fkn.offset} + b * {fkn.strides[0]} + "
                        f"h * {fkn.strides[1]} + qi * {fkn.strides[2]}]")
        fmt["fki"] = (f"{fki.buf.name} + {fki.offset} + b * {fki.strides[0]} + "
                      f"h * {fki.strides[1]} + qi * {fki.strides[2]}")
        fmt["fki3"] = fki.strides[3]
    return _TEMPLATE.format(**fmt)


def _omp(openmp: bool, iterations: int, dynamic: bool = False) -> str:
    if not openmp or iterations < 2:
        return ""
    sched = " schedule(dynamic, 1)" if dynamic else ""
    return (f"#pragma omp parallel for num_threads(ember_num_threads){sched} "
            f"if(ember_num_threads > 1)")


__all__ = ["helpers_used", "kernel_source", "mods_source", "render_mod"]
