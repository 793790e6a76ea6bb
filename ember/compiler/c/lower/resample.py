"""``resample`` and ``resample_backward`` (``F.interpolate``'s primitives) -> one
``ResampleKernel`` each.

The kernel runs eager's separable passes with eager's own index/weight tables
(``nn_resize.taps`` forward, ``nn_resize.transposed_taps`` backward, computed here at lowering
time and emitted as static C arrays): the same products and sums in the same order, in float32
for float32/float16/bfloat16 (rounded once at the end) and float64 for float64, so the C result
is bit-equal to eager (the backward is a gather over transposed taps, deterministic, not an
atomic scatter).  Every mode of the op is covered (nearest, nearest-exact, linear, cubic, their
antialiased variants, area), 1-3 spatial dims, both ``align_corners``, sizes or scales.  The
spatial sizes must be static (the tables are built from them); the leading (batch, channel)
dims may be symbolic (a graph made dynamic by a new batch size).
"""

from __future__ import annotations

from typing import Any

from ember.compiler.c.ir.kernels import ResampleKernel
from ember.compiler.c.ir.loop_ir import STORAGE_CTYPES, Geometry, contiguous_strides
from ember.compiler.c.lower.context import LoweringContext, MemoryValue, is_ref, log
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS
from ember.ops import nn_resize as R

# a table longer than this stays an extern (the C source would grow past what compiles fast)
MAX_TABLE = 1 << 16


def _compute_name(dt: Any) -> str:
    """The dtype name eager builds its tables in (float16/bfloat16 run in float32)."""
    name = dt.np.name
    return "float32" if name in ("float16", "bfloat16") else name


def _plan(n: Any, backward: bool, xs: tuple, out_shape: tuple, cname: str) -> list | str:
    """``[(dim, idx, w)]`` in eager's pass order, or why not."""
    p = n.params
    nd = len(p["input_size"] if backward else p["size"])
    scales = tuple(p["scales"])
    if any(s is not None and type(s) is not float for s in scales):
        return "lifted scales"
    fwd_in, fwd_out = (out_shape, xs) if backward else (xs, out_shape)  # the forward's sizes
    sp_in, sp_out = tuple(fwd_in[len(fwd_in) - nd:]), tuple(fwd_out[len(fwd_out) - nd:])
    table = R.transposed_taps if backward else R.taps
    passes = []
    for d in (range(nd) if backward else range(nd - 1, -1, -1)):
        idx, w = table(p["mode"], sp_in[d], sp_out[d], bool(p["align_corners"]), scales[d],
                       cname)
        if idx.size > MAX_TABLE:
            return "index tables too long"
        passes.append((d, idx, w))
    return passes


@lowering(OPS.resample, backward=False)
@lowering(OPS.resample_backward, backward=True)
def lower_resample(lw: LoweringContext, i: int, n: Any, backward: bool) -> str | None:
    """``resample`` / ``resample_backward`` as one ``ResampleKernel``."""
    nd = len(n.params["input_size"] if backward else n.params["size"])
    got = tap_operand(lw, n, nd)
    if isinstance(got, str):
        return got
    x, out_shape, dt = got
    xs = tuple(x.geom.shape)
    passes = _plan(n, backward, xs, out_shape, _compute_name(dt))
    if isinstance(passes, str):
        return passes
    return emit_tap_kernel(lw, i, n, x, nd, out_shape, passes, backward)


def tap_operand(lw: LoweringContext, n: Any, nd: int, sizes: tuple | None = None,
                out_sizes: tuple | None = None) -> tuple | str:
    """``(x, out_shape, dtype)`` of a one-input op run as a ``ResampleKernel`` over its ``nd``
    trailing dims, or why not: float (or uint8) storage, static trailing sizes and strides
    (runtime leading dims are fine), nothing empty.  ``sizes``/``out_sizes``: the trailing
    sizes of the input and result when the op's (static) params give them: a C-contiguous
    input whose trailing sizes are runtime expressions (of one value: meta checked it) is then
    read with these."""
    x_r = n.args[0]
    if not is_ref(x_r):
        return "a non-tensor operand"
    out_shape, dt = n.specs[0]
    out_shape = tuple(out_shape)
    if dt.np.name not in STORAGE_CTYPES or lw.dtype_of(x_r) != dt:
        return f"dtype {dt.name}"
    if not (dt.is_floating_point or dt.np.name == "uint8"):
        return f"dtype {dt.name}"
    x = lw.in_memory(x_r)
    if x is None:
        return "an operand is not in memory"
    xs, st = tuple(x.geom.shape), tuple(x.geom.strides)
    if out_sizes is not None:
        out_shape = out_shape[:len(out_shape) - nd] + tuple(out_sizes)
    if sizes is not None and any(type(m) is not int for m in xs[len(xs) - nd:]) \
            and st == contiguous_strides(xs):
        xs = xs[:len(xs) - nd] + tuple(sizes)
        x = MemoryValue(x.buf, Geometry(xs, contiguous_strides(xs), x.geom.offset), x.dtype)
        st = tuple(x.geom.strides)
    spatial = xs[len(xs) - nd:] + st[len(st) - nd:] + out_shape[len(out_shape) - nd:]
    if any(type(m) is not int for m in spatial):
        return "dynamic sizes"  # symbolic leading (batch, channel) dims are fine
    if 0 in xs or 0 in out_shape:
        return "an empty input or result"
    return x, out_shape, dt


def emit_tap_kernel(lw: LoweringContext, i: int, n: Any, x: Any, nd: int, out_shape: tuple,
                    passes: list, backward: bool) -> str | None:
    """Close the group and add one ``ResampleKernel`` running ``passes`` (``(dim, idx, w)``
    over the ``nd`` trailing dims) from ``x`` into a new buffer bound to output 0 of node ``i``."""
    if any(idx.size > MAX_TABLE for _d, idx, _w in passes):
        return "index tables too long"
    dt = n.specs[0][1]
    xs = tuple(x.geom.shape)
    lead = xs[:len(xs) - nd]
    shape = lead + out_shape[len(out_shape) - nd:]
    lw.close_group()
    lw.open_segment()
    out = lw.buffer(dt, shape, "temp")
    kname = lw.kernel_name()
    lw.add_kernel(ResampleKernel(kname, dt, x.buf, x.geom, out, lead, xs[len(xs) - nd:],
                                 out_shape[len(out_shape) - nd:], passes, backward,
                                 [n.op.name]))
    lw.bind(i, 0, out, Geometry.contiguous(shape), dt)
    log("fusion", f"{kname}: {n.op.name} as one separable-taps kernel", 3)
    return None


__all__ = ["emit_tap_kernel", "lower_resample", "tap_operand"]
