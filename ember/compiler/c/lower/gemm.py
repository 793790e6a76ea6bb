"""Matrix products in the loop IR: ``matmul``, ``addmm``, ``linear``, ``convolution``,
``conv_weight_grad`` and ``conv_input_grad`` become ``GemmKernel``s inside a C segment
(ARCHITECTURE.md §5, "Matrix products"; convolutions add an ``Im2colKernel`` (im2col or
col2im) around a batched GEMM, as eager computes them).

* ``lower_gemm(lw, i, node, form, conv)`` (registered for each product's OpDef, with its
  ``form`` and ``conv`` properties) turns a float32/float64 or integer product into one
  ``GemmKernel`` (integers: codegen's wrapping loop; float16/bfloat16: the template GEMM over
  the half operands, converted while packed, one rounding after it;
  products of a few static rows widen the factors to float32 for BLAS instead):
  operands are buffers seen through their view geometry (a transposed or sliced view is a pair
  of strides, mapped to BLAS trans flags and leading dims at run time, copied only when neither
  layout is one BLAS accepts), batch dims (broadcast
  ones have stride 0) are loops around the product, and ``linear``'s bias and ``addmm``'s
  ``beta * c`` / ``alpha`` become the kernel's epilogue, computed as eager computes them.
* ``schedule.fuse_epilogues`` (a pass after lowering, ``c/schedule.py``) then moves a pointwise
  kernel that reads the product element by element into the GEMM's epilogue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember import dtypes
from ember.compiler.c.ir.kernels import (
    GemmKernel,
    Im2colKernel,
    MatOperand,
)
from ember.compiler.c.ir.loop_ir import (
    CTYPES,
    Accum,
    Buffer,
    Const,
    Geometry,
    Index,
    Kernel,
    Let,
    Load,
    Local,
    Op,
    ReduceKernel,
    ReducePass,
    Store,
    contiguous_strides,
    numel,
    s_add,
    s_mul,
)
from ember.compiler.c.lower import half_operands
from ember.compiler.c.lower.context import (
    LoweringContext,
    MemoryValue,
    c_scalar,
    has_sym,
    is_ref,
    log,
    loop_index,
    size_of,
)
from ember.compiler.c.lower.registry import lowering
from ember.ops import OPS

_FLOATS = ("float32", "float64")
_HALVES = ("float16", "bfloat16")
_INTS = ("int64", "int32", "int16", "int8", "uint8")
_DTYPES = _FLOATS + _HALVES + _INTS


@lowering(OPS.matmul, form="matmul", conv=False)
@lowering(OPS.addmm, form="addmm", conv=False)
@lowering(OPS.linear, form="linear", conv=False)
@lowering(OPS.convolution, form="convolution", conv=True)
@lowering(OPS.conv_weight_grad, form="conv_weight_grad", conv=True)
@lowering(OPS.conv_input_grad, form="conv_input_grad", conv=True)
def lower_gemm(lw: LoweringContext, i: int, n: Any, form: str, conv: bool) -> str | None:
    """Lower graph node ``n`` (index ``i``) to a GemmKernel in ``lw``'s open segment; returns
    None when lowered, else why not (the node then runs as an extern).  Bound at
    registration: ``form``, which operands and epilogue the product has; ``conv``, whether it
    is one of the convolution rules (an ``Im2colKernel`` around a batched GEMM)."""
    why = _lower_gemm(lw, i, n, form, conv)
    if why is not None:
        _materialize_casts(lw, n)
    return why


def _materialize_casts(lw: LoweringContext, n: Any) -> None:
    """Casts that ``lower_cast`` left to the products, computed after all (node ``n`` runs
    another way): a pointwise cast into the open group, as any other cast."""
    from ember.compiler.c.lower.pointwise import lower_pointwise
    for r in n.args:
        if is_ref(r) and r in lw.cast_sources:
            del lw.cast_sources[r]
            why = lower_pointwise(lw, r[1], lw.graph.nodes[r[1]])
            assert why is None, why


def _lower_gemm(lw: LoweringContext, i: int, n: Any, form: str, conv: bool) -> str | None:
    refs = [a for a in n.args if is_ref(a)]
    if any(a is not None and not is_ref(a) for a in n.args):
        return "a non-tensor operand"
    out_dt = n.specs[0][1]
    if any(r not in lw.vals for r in refs) or out_dt.np.name not in _DTYPES:
        return "not a float, half or integer product"
    if any(lw.dtype_of(r) != out_dt for r in refs):
        return "mixed dtypes"
    if out_dt.np.name in _HALVES and form in ("matmul", "addmm", "linear"):
        why = _lower_half(lw, i, n, form, refs, out_dt)
        if why != "small":
            return why
    if out_dt.np.name in _HALVES and conv:
        return _lower_half_conv(lw, i, n, form, refs, out_dt)
    if any(r in lw.cast_sources for r in refs):
        _materialize_casts(lw, n)
    mats = [lw.in_memory(r) for r in refs]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    if out_dt.np.name not in _HALVES:
        return _lower_product(lw, i, n, form, mats, out_dt)
    # float16/bfloat16 as eager computes them: float32 operands, a float32 product (and
    # epilogue: it loads linear's bias or addmm's c widened, no copy), rounded once to the
    # dtype (a pointwise kernel fuse_epilogues merges into the GEMM's epilogue when the
    # product is the last step)
    factors = (1, 2) if form == "addmm" else (0, 1)

    def widened() -> str | None:
        wide = [_to_float32(lw, m) if j in factors else m for j, m in enumerate(mats)]
        return _lower_product(lw, i, n, form, wide, dtypes.float32)

    return _rounded_once(lw, i, out_dt, widened)


def _rounded_once(lw: LoweringContext, i: int, out_dt: Any,
                  lower: Callable[[], str | None]) -> str | None:
    """``lower()`` adds a half product's kernels (float32 result) to a fresh segment; that
    result is then rounded once to ``out_dt``.  When ``lower()`` gives a reason instead (an
    extern after all: its checks come before its own kernels), the kernels it added
    before failing (conversions) are dropped."""
    lw.close_group()
    seg = lw.open_segment()
    before = len(seg.kernels)
    why = lower()
    if why is None:
        half_operands.round_to_group(lw, i, out_dt, f"to_{out_dt.np.name}")
    else:
        lw.stats.kernels -= len(seg.kernels) - before
        del seg.kernels[before:]
    return why


_HALF_CODE = {"float16": "h", "bfloat16": "b"}
_CAST_CODE = {"float16": "q", "bfloat16": "r"}


def _lower_half(lw: LoweringContext, i: int, n: Any, form: str, refs: list,
                out_dt: Any) -> str | None:
    """A float16/bfloat16 product as one GemmKernel of the template over the half operands,
    converted while packed (``GemmKernel.half``), float32 accumulation, its epilogue in float32
    and one rounding to the dtype (``half_operands.round_to_group``).  A factor that is a cast
    of a float32 tensor in memory (autocast's cast of a weight) is packed from the float32
    tensor, rounded as it is packed: the cast's own pass and buffer go (when nothing else
    reads it).  "small" when the product has a few static rows (the widening + BLAS path,
    where BLAS's gemv reads the weight once)."""
    factors = (1, 2) if form == "addmm" else (0, 1)
    x0 = lw.shape_of(refs[factors[0]])
    rows = x0[-2] if form != "linear" and len(x0) >= 2 else (
        numel(x0[:-1]) if len(x0) > 1 else 1)
    if type(rows) is int and rows <= 4 and _blas_small_path():
        return "small"
    codes = {}
    for j in factors:
        src = _cast_source(lw, refs[j], out_dt)
        if src is not None:
            codes[j] = _CAST_CODE[out_dt.np.name]
            lw.uses[refs[j]] = [c for c in lw.uses.get(refs[j], ()) if c != i]
            refs = refs[:j] + [src] + refs[j + 1:]
        else:
            codes[j] = _HALF_CODE[out_dt.np.name]
    mats = [lw.in_memory(r) for r in refs]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    half = (codes[factors[0]], codes[factors[1]])
    return _rounded_once(lw, i, out_dt, lambda: _lower_product(lw, i, n, form, mats,
                                                               dtypes.float32, half=half))


def _blas_small_path() -> bool:
    """Whether half products of a few static rows take the widening + BLAS path (BLAS's gemv
    reads the widened weight once): only where there is a BLAS.  Without one (an AOT
    package) they are half template GEMMs too, whose constant weight is packed once per load
    instead of widened into a float32 copy on every call."""
    from ember.compiler.c.build.runtime import load_blas
    return load_blas() is not None


def _lower_half_conv(lw: LoweringContext, i: int, n: Any, form: str, refs: list,
                     out_dt: Any) -> str | None:
    """A float16/bfloat16 convolution, its backward products or a transposed convolution
    (``conv_input_grad``): the GEMMs are template GEMMs over the half operands, converting
    as they pack (``GemmKernel.half``; bfloat16 on AMX tiles where the CPU has them), with
    float32 accumulation; no widened copy of an operand.  The forward and ``conv_weight_grad``
    im2col the half input into half columns (half the bytes of float32 ones);
    ``conv_weight_grad`` sums its per-sample float32 products in float32 and
    ``conv_input_grad`` scatters its float32 columns (col2im) in float32: one rounding to
    the dtype at the end, as ``_lower_half``'s products."""
    if any(r in lw.cast_sources for r in refs):
        _materialize_casts(lw, n)
    mats = [lw.in_memory(r) for r in refs]
    if any(m is None for m in mats):
        return "an operand is not in memory"
    code = _HALF_CODE[out_dt.np.name]
    if form == "conv_input_grad":
        return _rounded_once(lw, i, out_dt, lambda: _conv_input_grad(
            lw, i, n, mats, dtypes.float32, half=(code, code)))
    return _rounded_once(lw, i, out_dt, lambda: _conv(
        lw, i, n, mats, dtypes.float32, grad=form == "conv_weight_grad", half=(code, code)))


def _cast_source(lw: LoweringContext, r: tuple, dt: Any) -> tuple | None:
    """The float32 tensor that value ``r`` is a cast of (to half dtype ``dt``), when that
    tensor is in memory (an input, a parameter, a stored value), else None."""
    if r in lw.cast_sources:
        return lw.cast_sources[r]
    if r[0] != "n":
        return None
    node = lw.graph.nodes[r[1]]
    if node.op is not OPS.convert_element_type or node.params.get("dtype") != dt:
        return None
    src = node.args[0]
    if not is_ref(src) or src not in lw.vals or lw.dtype_of(src) != dtypes.float32:
        return None
    return src if isinstance(lw.vals[src], MemoryValue) else None


# the products whose factors a cast may be packed into: op -> positions of the factors
_PRODUCT_FACTORS = {OPS.matmul: (0, 1), OPS.linear: (0, 1), OPS.addmm: (1, 2)}


@lowering(OPS.convert_element_type)
def lower_cast(lw: LoweringContext, i: int, n: Any) -> str | None:
    """A cast of a float32 tensor in memory to float16/bfloat16 that only half products read
    as a factor (autocast's cast of a weight): no kernel; each product packs from the float32
    tensor and rounds as it packs (``_lower_half``).  Any other cast is a pointwise op."""
    from ember.compiler.c.lower.pointwise import lower_pointwise
    ref, src = ("n", i, 0), n.args[0] if n.args else None
    dt = n.params.get("dtype")
    if (getattr(dt, "np", None) is None or dt.np.name not in _HALVES or not is_ref(src)
            or src not in lw.vals or lw.dtype_of(src) != dtypes.float32
            or not isinstance(lw.vals[src], MemoryValue) or ref in lw.outputs
            or not lw.uses.get(ref) or len(n.specs) != 1):
        return lower_pointwise(lw, i, n)
    for c in lw.uses[ref]:
        use = lw.graph.nodes[c]
        factors = _PRODUCT_FACTORS.get(use.op)
        if factors is None or any(a == ref for j, a in enumerate(use.args)
                                  if j not in factors):
            return lower_pointwise(lw, i, n)
        x0 = tuple(use.specs[0][0])
        rows = numel(x0[:-1]) if use.op is OPS.linear else (x0[-2] if len(x0) >= 2 else 1)
        if type(rows) is int and rows <= 4 and _blas_small_path():
            return lower_pointwise(lw, i, n)
    v = lw.vals[src]
    lw.vals[ref] = MemoryValue(v.buf, v.geom, dt)   # read only through cast_sources
    lw.cast_sources[ref] = src
    log("fusion", f"node {i}: cast to {dt.np.name} packed by its products", 3)
    return None


def _lower_product(lw: LoweringContext, i: int, n: Any, form: str, mats: list,
                   out_dt: Any, half: tuple = ()) -> str | None:
    """The product of ``mats`` (all of ``out_dt``: float32/float64 or an integer type; or,
    with ``half``, float16/bfloat16 factors (GemmKernel.half) into a float32 result)."""
    name = n.op.name
    if form in ("convolution", "conv_weight_grad"):
        return _conv(lw, i, n, mats, out_dt, grad=form == "conv_weight_grad")
    if form == "conv_input_grad":
        return _conv_input_grad(lw, i, n, mats, out_dt)
    if form == "linear":
        x, w = mats[0], mats[1]
        a, batch, m = _rows_operand(x)
        wg = w.geom
        b = MatOperand(w.buf, wg.offset, (0,) * len(batch), wg.strides[1], wg.strides[0])
        k, nn = x.geom.shape[-1], wg.shape[0]
        out_shape = tuple(x.geom.shape[:-1]) + (nn,)
    else:
        x, y = (mats[1], mats[2]) if form == "addmm" else (mats[0], mats[1])
        xg, yg = x.geom, y.geom
        batch = tuple(xg.shape[:-2])
        m, k, nn = xg.shape[-2], xg.shape[-1], yg.shape[-1]
        a = MatOperand(x.buf, xg.offset, tuple(xg.strides[:-2]), xg.strides[-2], xg.strides[-1])
        b = MatOperand(y.buf, yg.offset, tuple(yg.strides[:-2]), yg.strides[-2], yg.strides[-1])
        out_shape = batch + (m, nn)
    lw.close_group()  # operands stored by the segment's earlier kernels
    out = lw.buffer(out_dt, out_shape, "temp")
    lw.open_segment()
    kname = lw.kernel_name()
    gk = GemmKernel(kname, a, b, out, tuple(batch), m, nn, k, [name], half=half)
    _bias_epilogue(gk, n, mats, out_shape, form)
    lw.add_kernel(gk)
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), out_dt)
    log("fusion", f"{kname}: {name} as a GEMM, batch {list(gk.batch)}, m={gk.m} n={nn} "
           f"k={k}", 3)
    return None


def _conv(lw: LoweringContext, i: int, n: Any, mats: list, dt: Any, grad: bool,
          half: tuple = ()) -> str | None:
    """convolution as eager computes it: im2col into ``(N, G, Cg*K, P)``, then one GEMM per
    (sample, group) of ``w`` as ``(G, Og, Cg*K)`` with the columns, into ``(N, O, *out)``.
    With ``half``: the columns in the input's half dtype, a half GEMM into a float32 ``dt``
    result (conv_weight_grad: per-sample float32 products, summed in float32)."""
    x, w = mats  # conv_weight_grad: x and the output's gradient (N, O, *out)
    p = n.params
    dyn = not _static_geom(x.geom)  # runtime batch/spatial sizes (the input's, the gradient's)
    wshape = tuple(p["weight_shape"]) if grad else tuple(w.geom.shape)
    if (not _static_geom(w.geom) and not grad) or has_sym(p) \
            or any(type(v) is not int for v in wshape):
        return f"{n.op.name} with dynamic sizes or parameters"
    ws, wsh = w.geom.strides, w.geom.shape
    if grad and any(ws[d] != s_mul(ws[d + 1], wsh[d + 1]) for d in range(2, len(wsh) - 1)):
        return "conv_weight_grad: the gradient's spatial dims do not fold into one"
    if not grad and tuple(ws[1:]) != contiguous_strides(tuple(wsh[1:])):
        return "convolution weight not contiguous per output channel"
    # the channels are the weight's (a runtime channel size equals it: meta checked it)
    nb, c = x.geom.shape[0], wshape[1] * p["groups"]
    o, g = wshape[0], p["groups"]
    kern = wshape[2:]
    if grad:
        out_shape = wshape
    elif dyn:
        out_shape = (nb, o) + tuple(_conv_size(x.geom.shape[2 + d], kern[d], p, d)
                                    for d in range(len(kern)))
    else:
        out_shape = tuple(size_of(v) for v in n.specs[0][0])  # (specs hold one call's sizes)
    spatial = tuple(w.geom.shape[2:]) if grad else out_shape[2:]
    if grad and nb == 0:
        return "conv_weight_grad of an empty batch"
    kk = 1
    for v in kern:
        kk *= v
    pp = numel(spatial)
    cgk = (c // g) * kk
    lw.close_group()
    seg = lw.open_segment()
    cols = lw.buffer(x.dtype if half else dt, (nb, c, kk, pp), "temp")
    name = lw.kernel_name()
    seg.kernels.append(Im2colKernel(name, x.buf, x.geom, cols, tuple(kern), tuple(p["stride"]),
                                    tuple(lo for lo, _ in p["padding"]), tuple(p["dilation"]),
                                    tuple(spatial), ["im2col"]))
    kname = lw.kernel_name()
    if grad:
        # eager: per (sample, group) g[n, g] (Og x P) @ cols[n, g]^T, then a sum over samples
        prod = lw.buffer(dt, (nb, o * cgk), "temp")
        a = MatOperand(w.buf, w.geom.offset, (ws[0], s_mul(o // g, ws[1])), ws[1], ws[-1])
        b = MatOperand(cols, 0, (s_mul(c * kk, pp), s_mul(cgk, pp)), 1, pp)
        seg.kernels.append(GemmKernel(kname, a, b, prod, (nb, g), o // g, cgk, pp,
                                      ["conv_weight_grad"], half=half))
        out = lw.buffer(dt, out_shape, "temp")
        sname = f"kernel{int(kname[6:]) + 1}"
        seg.kernels.append(_batch_sum(sname, prod, out, nb, o * cgk) if type(nb) is int
                           else _runtime_batch_sum(sname, prod, out, nb, o * cgk))
        lw.stats.kernels += 3
    else:
        out = lw.buffer(dt, out_shape, "temp")
        a = MatOperand(w.buf, w.geom.offset, (0, (o // g) * w.geom.strides[0]),
                       w.geom.strides[0], 1)
        b = MatOperand(cols, 0, (s_mul(c * kk, pp), s_mul(cgk, pp)), pp, 1)
        seg.kernels.append(GemmKernel(kname, a, b, out, (nb, g), o // g, pp, cgk,
                                      ["convolution"], half=half))
        lw.stats.kernels += 2
    lw.bind(i, 0, out, Geometry.contiguous(out_shape), dt)
    log("fusion", f"{name}, {kname}: convolution as im2col + GEMM ({nb}x{g} products of "
           f"{o // g}x{cgk} by {cgk}x{pp})", 3)
    return None


def _static_geom(g: Geometry) -> bool:
    return all(type(v) is int for v in (*g.shape, *g.strides, g.offset))


def _conv_size(size: Any, k: int, p: dict, d: int) -> Any:
    """Convolution's output size along spatial dim ``d`` for input size ``size`` (a runtime
    size: C text, whose ``/`` of non-negative ints is floor division)."""
    lo, hi = p["padding"][d]
    span = lo + hi - p["dilation"][d] * (k - 1) - 1
    if type(size) is int:
        return (size + span) // p["stride"][d] + 1
    inner = size if span == 0 else f"({size} + {span})" if span > 0 else f"({size} - {-span})"
    if p["stride"][d] == 1:
        return s_add(inner, 1)
    return f"({inner} / {p['stride'][d]} + 1)"


def _conv_input_grad(lw: LoweringContext, i: int, n: Any, mats: list, dt: Any,
                     half: tuple = ()) -> str | None:
    """conv_input_grad as eager computes it: per (sample, group) ``w[g]^T (Cg*K x Og)`` times
    the output gradient ``(Og x P)`` into columns, then col2im into the input's shape.  With
    ``half``: a half GEMM of the half weight and gradient into float32 ``dt`` columns."""
    gy, w = mats
    p = n.params
    q = {k: v for k, v in p.items() if k != "input_shape"}
    ishape = tuple(p["input_shape"])
    if not _static_geom(w.geom) or has_sym(q):
        return "conv_input_grad with dynamic sizes or parameters"
    gs, gsh = gy.geom.strides, gy.geom.shape
    ws, wsh = w.geom.strides, tuple(w.geom.shape)
    if any(gs[d] != s_mul(gs[d + 1], gsh[d + 1]) for d in range(2, len(gsh) - 1)):
        return "conv_input_grad: the gradient's spatial dims do not fold into one"
    if tuple(ws[1:]) != contiguous_strides(wsh[1:]):
        return "conv_input_grad: weight not contiguous per output channel"
    # runtime sizes (dynamic=True): the batch from the gradient, the input's spatial sizes
    # from the lifted parameter (specs hold one call's sizes)
    in_shape = (gsh[0], wsh[1] * p["groups"]) + tuple(size_of(v) for v in ishape[2:]) \
        if has_sym(ishape) or not _static_geom(gy.geom) \
        else tuple(size_of(v) for v in n.specs[0][0])
    nb, c = in_shape[:2]
    o, g = wsh[0], p["groups"]
    kern, spatial = wsh[2:], tuple(gsh[2:])
    kk, pp = 1, numel(spatial)
    for v in kern:
        kk *= v
    cgk = (c // g) * kk
    lw.close_group()
    seg = lw.open_segment()
    cols = lw.buffer(dt, (nb, c, kk, pp), "temp")
    kname = lw.kernel_name()
    a = MatOperand(w.buf, w.geom.offset, (0, (o // g) * ws[0]), 1, ws[0])
    b = MatOperand(gy.buf, gy.geom.offset, (gs[0], s_mul(o // g, gs[1])), gs[1], gs[-1])
    seg.kernels.append(GemmKernel(kname, a, b, cols, (nb, g), cgk, pp, o // g,
                                  ["conv_input_grad"], half=half))
    out = lw.buffer(dt, in_shape, "temp")
    name = f"kernel{int(kname[6:]) + 1}"
    seg.kernels.append(Im2colKernel(name, cols, Geometry.contiguous(in_shape), out, tuple(kern),
                                    tuple(p["stride"]), tuple(lo for lo, _ in p["padding"]),
                                    tuple(p["dilation"]), spatial, ["col2im"], col2im=True))
    lw.stats.kernels += 2
    lw.bind(i, 0, out, Geometry.contiguous(in_shape), dt)
    log("fusion", f"{kname}, {name}: conv_input_grad as GEMM + col2im", 3)
    return None


def _to_float32(lw: LoweringContext, v: MemoryValue) -> MemoryValue:
    """A float32 copy of half operand ``v`` (one pointwise kernel, exact widening): the view's
    elements in C order, a broadcast dim (stride 0) kept as one element with stride 0."""
    g = v.geom
    shape = tuple(1 if type(st) is int and st == 0 else d for d, st in zip(g.shape, g.strides))
    src = Geometry(shape, tuple(g.strides), g.offset)
    dst = lw.buffer(dtypes.float32, shape, "temp")
    flat = src.is_contiguous()
    evars = ["i"] if flat else [f"i{d}" for d in range(len(shape))]
    body: list = [Let("t0", "float", Load(v.buf, loop_index(src, evars, flat))),
                  Store(dst, loop_index(Geometry.contiguous(shape), evars, flat), Local("t0"))]
    lw.add_kernel(Kernel(lw.kernel_name(), shape, body, flat, ["to_float32"]))
    strides = tuple(0 if d != e else st for d, e, st in
                    zip(g.shape, shape, contiguous_strides(shape)))
    return MemoryValue(dst, Geometry(tuple(g.shape), strides, 0), dtypes.float32)


def _batch_sum(name: str, src: Buffer, dst: Buffer, nb: int, size: int) -> Kernel:
    """``dst = src[0] + src[1] + ...`` in that order (NumPy's ``sum(axis=0)`` of a C-order
    array adds whole rows one after another)."""
    ct = CTYPES[dst.dtype.np.name]
    here = Index(0, (("i", 1),))
    body: list = [Let("t0", ct, Load(src, here))]
    acc = "t0"
    for j in range(1, nb):
        body.append(Let(f"l{j}", ct, Load(src, Index(j * size, (("i", 1),)))))
        body.append(Let(f"t{j}", ct, Op("add", "({0} + {1})", (Local(acc), Local(f"l{j}")))))
        acc = f"t{j}"
    body.append(Store(dst, here, Local(acc)))
    return Kernel(name, tuple(dst.shape), body, True, ["sum"])


def _runtime_batch_sum(name: str, src: Buffer, dst: Buffer, nb: Any, size: int) -> ReduceKernel:
    """``dst = sum(src[0:nb])`` over a runtime batch ``nb`` (a reduction kernel: double lanes,
    rounded once; eager's row-by-row float sum differs from it in the last bit at most)."""
    ct = CTYPES[dst.dtype.np.name]
    k = ReduceKernel(name, (size,), (nb,), ops=["sum"], kept_inner=True)
    k.passes.append(ReducePass([Let("x0", ct, Load(src, Index(0, (("o0", 1), ("r0", size)))))],
                               [Accum("a0", "sum", "double", "0",
                                      Op("reduce", "((double)({0}))", (Local("x0"),)))],
                               [Let("f0", ct, Op("reduce", f"(({ct})({{0}}))",
                                                 (Local("a0"),)))]))
    k.stores.append(Store(dst, Index(0, (("o0", 1),)), Local("f0")))
    return k


def _rows_operand(x: Any) -> tuple:
    """(MatOperand, batch, m) of linear's ``x`` (..., in): leading dims fold into the rows when
    their strides allow (eager reshapes to one 2-D product), else they are batch loops."""
    g = x.geom
    shape, st = tuple(g.shape), tuple(g.strides)
    lead = len(shape) - 1
    if lead == 0:  # a vector: one row
        return MatOperand(x.buf, g.offset, (), 0, st[0]), (), 1
    cut = lead - 1  # dims [cut, lead) fold into m
    while cut > 0 and st[cut - 1] == s_mul(st[cut], shape[cut]):
        cut -= 1
    m = 1
    for d in range(cut, lead):
        m = s_mul(m, shape[d])
    return (MatOperand(x.buf, g.offset, st[:cut], st[lead - 1], st[lead]), shape[:cut], m)


def _bias_epilogue(gk: GemmKernel, n: Any, mats: list, out_shape: tuple, form: str) -> None:
    """linear's ``+ b`` and addmm's ``* alpha + c * beta``, in eager's order of operations."""
    if form == "matmul" or (form == "linear" and len(mats) < 3):
        return
    ct = CTYPES[gk.out.dtype.np.name]
    evars = [f"i{d}" for d in range(len(out_shape))]
    here = loop_index(Geometry.contiguous(out_shape), evars, False)
    body: list = [Let("g0", ct, Load(gk.out, here))]
    val = "g0"
    if form == "linear":
        bg = mats[2].geom
        bias = Geometry(out_shape, (0,) * (len(out_shape) - 1) + (bg.strides[0],), bg.offset)
        body.append(Let("g1", ct, Load(mats[2].buf, loop_index(bias, evars, False))))
        body.append(Let("g2", ct, Op("add", "({0} + {1})", (Local("g0"), Local("g1")))))
        val = "g2"
    else:
        alpha, beta = n.params["alpha"], n.params["beta"]
        if not (type(alpha) in (int, float, bool) and alpha == 1):
            body.append(Let("g1", ct, Op("mul", "({0} * {1})",
                                         (Local(val), Const(c_scalar(alpha, ct))))))
            val = "g1"
        if not (type(beta) in (int, float, bool) and beta == 0):
            cg = mats[0].geom
            body.append(Let("g2", ct, Load(mats[0].buf, loop_index(cg, evars, False))))
            bt = Const(c_scalar(beta, ct))
            if type(beta) in (int, float, bool) and beta == 1:
                body.append(Let("g3", ct, Op("add", "({0} + {1})", (Local(val), Local("g2")))))
            else:  # beta == 0 ignores c (NaNs included): a lifted beta decides at run time
                body.append(Let("g3", ct, Op("addmm_beta", "({2} == 0 ? {0} : {0} + {1} * {2})",
                                             (Local(val), Local("g2"), bt))))
            val = "g3"
    body.append(Store(gk.out, here, Local(val)))
    gk.epilogue = body
    gk.epi_flat = False


__all__ = ["lower_gemm"]
