"""C for ``ScanKernel`` (cumsum, cumprod, cummax, cummin, logcumsumexp along one dim).

Loops: the dims before ``dim`` outside (the outermost split by OpenMP), then the scan index
``k`` (sequential, from the end for a reverse cumsum), then the dims after ``dim`` inside, each
element of those with its own running value (a scratch row of the accumulator type), so the
innermost loop reads and writes at unit stride when the input is C-ordered.  Every line is
folded in eager's order (NumPy's ``accumulate``), in eager's accumulator type: the dtype for
cumsum/cumprod (float for float16/bfloat16, rounded once at the store, as the ``lowp``
kernels), double for logcumsumexp.
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.ir.kernels import (
    ScanKernel,
)
from ember.compiler.c.ir.loop_ir import (
    compute_ctype,
    contiguous_strides,
    load_expr,
    numel,
    store_expr,
)


def acc_ctype(k: ScanKernel) -> str:
    """The running value's C type."""
    return "double" if k.op == "logcumsumexp" else compute_ctype(k.src.dtype)


def _step(k: ScanKernel, acc: str, v: str) -> str:
    """C expression of the next running value from ``acc`` and the element ``v``."""
    if k.op == "cumsum":
        return f"{acc} + {v}"
    if k.op == "cumprod":
        return f"{acc} * {v}"
    if k.op == "logcumsumexp":
        return f"ember_logaddexp({acc}, (double){v})"
    # np.maximum/np.minimum: NaN propagates; on a tie the second operand (the element) wins
    cmp = ">=" if k.op == "cummax" else "<="
    return f"((({v}) {cmp} ({acc})) | (({v}) != ({v}))) ? ({v}) : ({acc})"


def scan_kernel(k: ScanKernel, program: Any, openmp: bool, omp_for: Any, declare: Any,
                ints_marker: str) -> str:
    at = acc_ctype(k)
    ct = compute_ctype(k.src.dtype)
    shape, strides = tuple(k.geom.shape), tuple(k.geom.strides)
    nd = len(shape)
    outer = list(range(k.dim))
    inner = list(range(k.dim + 1, nd))
    params = [f"{k.dst.ctype} *restrict {k.dst.name}"]
    if k.idx is not None:
        params.append(f"int64_t *restrict {k.idx.name}")
    params += [f"const {k.src.ctype} *restrict {k.src.name}",
               "const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)} (scan along dim {k.dim}) */",
             f"static void {k.name}({', '.join(params)}) {{", ints_marker,
             "  (void)ints; (void)floats;",
             f"  const int64_t N_ = {shape[k.dim]};",
             f"  const int64_t I_ = {numel(tuple(shape[d] for d in inner))};"]
    # outputs in eager's memory order (their buffers' strides; C order when None)
    ostr = tuple(k.dst.strides or contiguous_strides(shape)) if k.dst.shape else (0,)
    istr_out = (tuple(k.idx.strides or contiguous_strides(shape)) if k.dst.shape else (0,)) \
        if k.idx is not None else ostr
    ind = "  "
    if openmp and outer:
        lines.append(f"{ind}{omp_for(f'(int64_t)({numel(shape)})')}")
    for d in outer:
        lines.append(f"{ind}for (int64_t d{d} = 0; d{d} < ({shape[d]}); d{d}++) {{")
        ind += "  "
    if inner:
        lines.append(f"{ind}{at} *acc_ = ({at} *)malloc((I_ ? I_ : 1) * sizeof({at}));")
        if k.idx is not None:
            lines.append(f"{ind}int64_t *ix_ = (int64_t *)malloc((I_ ? I_ : 1) * "
                         f"sizeof(int64_t));")
    else:
        lines.append(f"{ind}{at} acc_[1];")
        if k.idx is not None:
            lines.append(f"{ind}int64_t ix_[1];")
    lines.append(f"{ind}for (int64_t k_ = 0; k_ < N_; k_++) {{")
    ind += "  "
    lines.append(f"{ind}const int64_t d{k.dim} = {'N_ - 1 - k_' if k.reverse else 'k_'};")
    opened = 0
    for d in inner:
        lines.append(f"{ind}for (int64_t d{d} = 0; d{d} < ({shape[d]}); d{d}++) {{")
        ind += "  "
        opened += 1
    src = " + ".join([str(k.geom.offset)] + [f"(int64_t)({s}) * d{d}" for d, s in
                                              enumerate(strides) if s != 0])
    dst = " + ".join(["0"] + [f"(int64_t)({s}) * d{d}" for d, s in enumerate(ostr)])
    dsti = " + ".join(["0"] + [f"(int64_t)({s}) * d{d}" for d, s in enumerate(istr_out)])
    istr = contiguous_strides(tuple(shape[d] for d in inner))
    j = " + ".join(["0"] + [f"(int64_t)({s}) * d{d}" for d, s in zip(inner, istr)])
    lines.append(f"{ind}const {ct} v_ = {load_expr(k.src.dtype, f'{k.src.name}[{src}]')};")
    lines.append(f"{ind}const int64_t j_ = {j}, o_ = {dst};")
    if k.idx is not None:
        lines.append(f"{ind}const int64_t oi_ = {dsti};")
    lines.append(f"{ind}const {at} a_ = k_ == 0 ? ({at})v_ : ({at})({_step(k, 'acc_[j_]', 'v_')});")
    lines.append(f"{ind}acc_[j_] = a_;")
    lines.append(f"{ind}{k.dst.name}[o_] = {store_expr(k.dst.dtype, 'a_')};")
    if k.idx is not None:  # the latest position of the running extreme (or of a NaN)
        lines.append(f"{ind}if (k_ == 0 || v_ == a_ || v_ != v_) ix_[j_] = d{k.dim};")
        lines.append(f"{ind}{k.idx.name}[oi_] = ix_[j_];")
    for _ in range(opened + 1):
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    if inner:
        lines.append(f"{ind}free(acc_);")
        if k.idx is not None:
            lines.append(f"{ind}free(ix_);")
    for _ in outer:
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    lines.append("}")
    return declare(lines, program)


__all__ = ["acc_ctype", "scan_kernel"]
