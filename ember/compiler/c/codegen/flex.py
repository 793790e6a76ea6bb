"""C of ``FlexAttentionKernel`` (``ir/kernels.py``): the template ``csrc/flex_attention.c.in``
filled in with the kernel's sizes, strides and its traced ``score_mod``/``mask_mod`` rendered as
C statements (``render_mod``).  The lowering: ``lower/flex.py``."""

from __future__ import annotations

from typing import Any

from ember import dtypes as dt
from ember.compiler.c.build import blas
from ember.compiler.c.codegen import csrc
from ember.compiler.c.ir.kernels import FlexAttentionKernel
from ember.compiler.c.ir.loop_ir import COMPUTE_CTYPES, CTYPES
from ember.compiler.c.lower.context import c_scalar
from ember.config import config
from ember.ops.registry import REGISTRY

_TEMPLATE = csrc("flex_attention.c.in")
_TEMPLATE_T = csrc("flex_mm.h.in") + csrc("flex_attention_t.c.in")
_IND = " " * 12


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
            # constants take the type of the value operands (where's cond is bool, its x/y
            # are not), as the pointwise lowering does
            in_dt = next((d for _, d in refs if d is not None and d == out_dt),
                         next((d for _, d in refs if d is not None), out_dt))
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
    if k.backward:
        return backward_source(k, openmp)
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
    fmt.update(_products(k))
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
    return (_TEMPLATE_T if transposed_tiles(k) else _TEMPLATE).format(**fmt)


def transposed_tiles(k: FlexAttentionKernel) -> bool:
    """Whether the forward uses ``csrc/flex_attention_t.c.in`` (S^T tiles, in-place K/V rows,
    register-blocked products): float/double blocks of at least 16 query rows without a kv
    split.  Decoding shapes (few query rows, kv partitions) keep the row-major template."""
    return k.splits == 1 and k.out.ctype in ("float", "double") and min(k.L, k.QB) >= 16


def _products(k: FlexAttentionKernel) -> dict:
    """The template's tile products: BLAS (one thread per call, as SDPA's kernel) on packed or
    in-place K/V rows when NumPy's OpenBLAS is there, else the C register tiles."""
    lib = blas.load_blas()
    t = k.out.ctype
    s = "f" if t == "float" else "d"
    ks2, ks3, vs2, vs3 = k.k.strides[2], k.k.strides[3], k.v.strides[2], k.v.strides[3]
    if min(k.L, k.QB) < 16 and ks3 == 1 and vs3 == 1:  # decoding: memory-bound rows
        return dict(pack_qk=f"      {k.name}_qk_rows(qt, kp + c0 * {ks2}, {ks2}, st, nr, nc, "
                            f"E, KB);",
                    pv=f"      {k.name}_pv_rows(st, vp + c0 * {vs2}, {vs2}, acc, nr, nc, EV, "
                       f"KB);",
                    blas_one="", blas_back="")
    if lib is None:
        pack = _PACK_NOBLAS.format(t=t, ks2=ks2, vs2=vs2, ks3=ks3, vs3=vs3, name=k.name)
        return dict(pack_qk=pack, pv=f"      {k.name}_pv(st, vt, acc, nr, nc, EV, KB);",
                    blas_one="", blas_back="")
    kin = (f"kp + c0 * {ks2}", str(ks2)) if ks3 == 1 else ("kt", "E")
    vin = (f"vp + c0 * {vs2}", str(vs2)) if vs3 == 1 else ("vt", "EV")
    lines = []
    if ks3 != 1 or vs3 != 1:
        lines.append("      for (int64_t c = 0; c < nc; c++) {")
        if ks3 != 1:
            lines.append(f"        for (int64_t e = 0; e < E; e++) kt[c * E + e] = "
                         f"kp[(c0 + c) * {ks2} + e * {ks3}];")
        if vs3 != 1:
            lines.append(f"        for (int64_t e = 0; e < EV; e++) vt[c * EV + e] = "
                         f"vp[(c0 + c) * {vs2} + e * {vs3}];")
        lines.append("      }")
    lines.append(f"      ember_attn_mm_{s}(0, 1, nr, nc, E, ({t})1, qt, E, {kin[0]}, {kin[1]}, "
                 f"({t})0, st, KB);")
    setter = lib.set_num_threads
    return dict(pack_qk="\n".join(lines),
                pv=f"      ember_attn_mm_{s}(0, 0, nr, EV, nc, ({t})1, st, KB, {vin[0]}, "
                   f"{vin[1]}, ({t})1, acc, EV);",
                blas_one=f"{setter}(1);" if setter else "",
                blas_back=f"{setter}(ember_num_threads);" if setter else "")


def _omp(openmp: bool, iterations: int, dynamic: bool = False) -> str:
    if not openmp or iterations < 2:
        return ""
    sched = " schedule(dynamic, 1)" if dynamic else ""
    return (f"#pragma omp parallel for num_threads(ember_num_threads){sched} "
            f"if(ember_num_threads > 1)")




# ------------------------------------------------------------------------------- backward
_BWD_TEMPLATE = csrc("flex_attention_bwd.c.in")
_BWD_TEMPLATE_T = csrc("flex_mm.h.in") + csrc("flex_attention_bwd_t.c.in")
_BWD_TEMPLATE_1P = csrc("flex_attention_bwd_1p.c.in")
# the transposed backward in one pass (per-thread dQ buffers) unless EMBER_FLEX_BWD=two_pass
SINGLE_PASS = config.flex_backward != "two_pass"  # EMBER_FLEX_BWD=two_pass: the older kernel
# the single pass's per-thread dQ buffers together may take this many bytes, else two passes
DQ_CAP = 256 << 20


def variant() -> tuple:
    """The backward's module settings, part of the compiled-plan cache key (backend.py)."""
    return (SINGLE_PASS, DQ_CAP)


# the tile packing and Q·K^T product without BLAS (C register tiles)
_PACK_NOBLAS = csrc("flex_pack_noblas.c.in").rstrip("\n")


class CText(str):
    """C text that composes with arithmetic operators (for ``ember.ops.flex.reverse``)."""

    def _bin(self, o: Any, op: str, rev: bool = False) -> CText:
        a, b = (o, self) if rev else (self, o)
        return CText(f"({_lit(a)} {op} {_lit(b)})")

    def __add__(self, o: Any) -> CText:  # type: ignore[override]
        return self._bin(o, "+")

    def __radd__(self, o: Any) -> CText:
        return self._bin(o, "+", True)

    def __sub__(self, o: Any) -> CText:
        return self._bin(o, "-")

    def __rsub__(self, o: Any) -> CText:
        return self._bin(o, "-", True)

    def __mul__(self, o: Any) -> CText:  # type: ignore[override]
        return self._bin(o, "*")

    def __rmul__(self, o: Any) -> CText:  # type: ignore[override]
        return self._bin(o, "*", True)

    def __truediv__(self, o: Any) -> CText:
        return self._bin(o, "/")

    def __rtruediv__(self, o: Any) -> CText:
        return self._bin(o, "/", True)

    def __neg__(self) -> CText:
        return CText(f"(-{self})")


def _lit(x: Any) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return str(int(x))
    return repr(x) if isinstance(x, int) else repr(float(x))


def _grad_source(k: FlexAttentionKernel, atomics: bool, partial: bool, at: str = "c") -> str:
    """The backward's per-element body (no branches, so gcc vectorizes it): p, ds and ``gs``
    (ds through score_mod); with ``atomics`` also the captured tensors' gradients; ``partial``
    applies mask_mod.  ``at``: the loop variable indexing the tile row ``s``/``dp``."""
    t = k.out.ctype
    ins = (k.q.buf.dtype, dt.int32, dt.int32, dt.int32, dt.int32)
    lines = []
    if partial and k.mask is not None:
        lines.append(render_mod(k.mask, ins, k.captured, "keep", "int"))
    else:
        lines.append(f"{_IND}const int keep = 1;")
    lines.append(f"{_IND}const {t} x0 = s[{at}] * scale;")
    lines.append(f"{_IND}const {t} res = x0;" if k.score is None else
                 render_mod(k.score, ins, k.captured, "res", t))
    lines += [f"{_IND}const int live = keep && lse_r != -INFINITY;",
              f"{_IND}const {t} p = live ? ember_exp(live ? res - lse_r : ({t})0) : ({t})0;",
              f"{_IND}const {t} ds = p * (dp[{at}] - delta + glse_r);"]
    if k.score is None:
        lines.append(f"{_IND}const {t} gs = ds;")
    else:
        lines += _reverse_lines(k, t, atomics)
    return "\n".join(lines)


def _reverse_lines(k: FlexAttentionKernel, t: str, atomics: bool) -> list:
    from ember.ops.flex import reverse

    out: list = []
    n = [0]

    def let(x: Any) -> CText:
        name = f"adj{n[0]}"
        n[0] += 1
        out.append(f"{_IND}const {t} {name} = ({t})({_lit(x)});")
        return CText(name)

    def get(a: Any) -> Any:
        if type(a) is tuple and len(a) == 2 and a[0] == "x":
            return CText(f"x{a[1]}")
        if type(a) is tuple and len(a) == 2 and a[0] == "v":
            return CText(f"res_v{a[1]}")
        return a

    def sel(c: Any, x: Any, y: Any) -> CText:
        return CText(f"(({_lit(c)}) ? ({t})({_lit(x)}) : ({t})({_lit(y)}))")

    vals = [CText(f"res_v{j}") for j in range(len(k.score.nodes))]
    d_score, loads = reverse(k.score, CText("ds"), vals, get, k.grad_caps, sel, 0, let)
    out.append(f"{_IND}const {t} gs = live ? ({t})({_lit(d_score)}) : ({t})0;")
    if atomics:
        outs = dict(zip(k.grad_caps, k.outs[3:]))
        for c, iargs, adj in loads:
            cap = k.captured[c]
            terms, stride = [], 1
            for d in range(len(cap.shape) - 1, -1, -1):
                text = _lit(get(iargs[d]))
                terms.append(f"(((int64_t)({text}) + ({text} < 0 ? {cap.shape[d]} : 0)) * "
                             f"{stride})")
                stride *= cap.shape[d]
            out.append(f"{_IND}if (live) {{")
            out.append("#pragma omp atomic")
            out.append(f"{_IND}  {outs[c].name}[{' + '.join(terms)}] += ({t})({_lit(adj)});")
            out.append(f"{_IND}}}")
    return out


def _rows_source(k: FlexAttentionKernel) -> tuple[str, str, str]:
    """(pass-1 row loads with dq zeroed, pass-2 row loads, K/V tile packing)."""
    o, lse, go, gl = k.grads

    def at(x: Any, idx: list) -> str:
        return f"{x.buf.name}[{x.offset}" + "".join(
            f" + ({i}) * {s}" for i, s in zip(idx, x.strides)) + "]"

    glse = "0" if gl is None else at(gl, ["b", "h", "r0 + r"])

    def rows(zero_dq: bool, ind: str) -> str:
        dq = " dq[r * E + e] = 0;" if zero_dq else ""
        return f"\n{ind}".join([
            "for (int64_t r = 0; r < nr; r++) {",
            "  double d_ = 0;",
            f"  for (int64_t e = 0; e < E; e++) {{ qt[r * E + e] = "
            f"{at(k.q, ['b', 'h', 'r0 + r', 'e'])};{dq} }}",
            "  for (int64_t e = 0; e < EV; e++) {",
            f"    dot[r * EV + e] = {at(go, ['b', 'h', 'r0 + r', 'e'])};",
            f"    d_ += (double)dot[r * EV + e] * (double){at(o, ['b', 'h', 'r0 + r', 'e'])};",
            "  }",
            f"  dl[r] = d_; ls[r] = {at(lse, ['b', 'h', 'r0 + r'])}; gl[r] = {glse};",
            "}"])

    pack = "\n      ".join([
        "for (int64_t c = 0; c < nc; c++) {",
        f"  for (int64_t e = 0; e < E; e++) kr[c * E + e] = "
        f"kp[(c0 + c) * {k.k.strides[2]} + e * {k.k.strides[3]}];",
        f"  for (int64_t e = 0; e < EV; e++) vr[c * EV + e] = "
        f"vp[(c0 + c) * {k.v.strides[2]} + e * {k.v.strides[3]}];",
        "}"])
    return rows(True, "    "), rows(False, "          "), pack


def _rows_source_t(k: FlexAttentionKernel, ind: str, first: bool) -> str:
    """Row loads of the transposed backward: Q and dO as columns of QT/DOT and as rows of
    QR/DOR, delta = rowsum(dO * O) (computed by pass 1 into ``dall``, read by pass 2), lse and
    the lse gradient per column; padding columns get lse = -inf (nothing live there)."""
    o, lse, go, gl = k.grads

    def at(x: Any, idx: list) -> str:
        return f"{x.buf.name}[{x.offset}" + "".join(
            f" + ({i}) * {s}" for i, s in zip(idx, x.strides)) + "]"

    glse = "0" if gl is None else at(gl, ["b", "h", "r0 + r"])
    t = k.out.ctype
    return f"\n{ind}".join([
        "for (int64_t r = 0; r < nr; r++) {",
        "  double d_;",
        "  for (int64_t e = 0; e < E; e++) {",
        f"    const {t} x_ = {at(k.q, ['b', 'h', 'r0 + r', 'e'])};",
        "    qt[e * QBP + r] = x_; qr[r * EP + e] = x_;",
        "  }",
        "  double d4_[4] = {0, 0, 0, 0};",
        "  for (int64_t e = 0; e < EV; e++) {",
        f"    const {t} g_ = {at(go, ['b', 'h', 'r0 + r', 'e'])};",
        "    dot[e * QBP + r] = g_; dor[r * EVP + e] = g_;",
        f"    d4_[e & 3] += (double)g_ * (double){at(o, ['b', 'h', 'r0 + r', 'e'])};"
        if first else "",
        "  }",
        "  d_ = (d4_[0] + d4_[1]) + (d4_[2] + d4_[3]);" if first else
        "  d_ = dall[(b * HQ + h) * L + r0 + r];",
        "  dall[(b * HQ + h) * L + r0 + r] = d_;" if first else "",
        f"  dl[r] = ({t})d_; ls[r] = {at(lse, ['b', 'h', 'r0 + r'])}; gl[r] = {glse};",
        "}",
        "for (int64_t r = nr; r < nrp; r++) {",
        "  for (int64_t e = 0; e < E; e++) qt[e * QBP + r] = 0;",
        "  for (int64_t e = 0; e < EV; e++) dot[e * QBP + r] = 0;",
        "  dl[r] = 0; ls[r] = -INFINITY; gl[r] = 0;",
        "}"])


def backward_source(k: FlexAttentionKernel, openmp: bool = False) -> str:
    """The C function of a backward FlexAttentionKernel: with transposed tiles (the forward's
    layout) where the forward uses them, in one pass (``csrc/flex_attention_bwd_1p.c.in``)
    that falls back to the two-pass ``csrc/flex_attention_bwd_t.c.in`` when its per-thread dQ
    buffers would pass ``DQ_CAP``; else row-major tiles with BLAS products
    (``csrc/flex_attention_bwd.c.in``)."""
    fmt = _backward_fmt(k, openmp)
    if transposed_tiles(k):
        fmt.update(load_rows_q=_rows_source_t(k, "    ", True),
                   load_rows=_rows_source_t(k, "          ", False),
                   q_partial=_grad_source(k, True, True, "r"),
                   q_full=_grad_source(k, True, False, "r"),
                   kv_partial=_grad_source(k, False, True, "r"),
                   kv_full=_grad_source(k, False, False, "r"), fn=k.name)
        if not SINGLE_PASS:
            return _BWD_TEMPLATE_T.format(**fmt)
        two = _BWD_TEMPLATE_T.format(**{**fmt, "fn": f"{k.name}_2p"})
        return two + _BWD_TEMPLATE_1P.format(**_single_pass_fmt(k, openmp, fmt))
    load_rows_q, load_rows, pack = _rows_source(k)
    setter = None if blas.load_blas() is None else blas.load_blas().set_num_threads
    fmt.update(load_rows_q=load_rows_q, load_rows=load_rows, pack=pack,
               q_partial=_grad_source(k, True, True), q_full=_grad_source(k, True, False),
               kv_partial=_grad_source(k, False, True), kv_full=_grad_source(k, False, False),
               s="f" if k.out.ctype == "float" else "d",
               blas_one=f"{setter}(1);" if setter else "",
               blas_back=f"{setter}(ember_num_threads);" if setter else "")
    return _BWD_TEMPLATE.format(**fmt)


def _single_pass_fmt(k: FlexAttentionKernel, openmp: bool, fmt: dict) -> dict:
    """The one-pass template's extra fields: thread count and id, the two-pass fallback and
    its call, the delta loop's reads of dO and O at row ``l``, the atomic score_mod body."""
    o, _, go, _ = k.grads
    loads, stores = k.buffers()
    threaded = bool(fmt["omp_kv"])

    def at(x: Any, idx: list) -> str:
        return f"{x.buf.name}[{x.offset}" + "".join(
            f" + ({i}) * {s}" for i, s in zip(idx, x.strides)) + "]"

    nq = -(-k.L // k.QB)
    return dict(
        fmt, kv_partial=_grad_source(k, True, True, "r"),
        kv_full=_grad_source(k, True, False, "r"),
        nthreads="ember_num_threads" if threaded else "1",
        tid="omp_get_thread_num()" if threaded else "0", dq_cap=DQ_CAP,
        fn2=f"{k.name}_2p", args=", ".join([b.name for b in stores + loads] + ["ints", "floats"]),
        dO_at=at(go, ["b", "h", "l", "e"]), O_at=at(o, ["b", "h", "l", "e"]),
        omp_rows=_omp(openmp, k.B * k.HQ * k.L), omp_blocks=_omp(openmp, k.B * k.HQ * nq))


def _backward_fmt(k: FlexAttentionKernel, openmp: bool) -> dict:
    """What both backward templates are filled with: sizes, buffers, block tables, strides."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    kvn, kvi, fkn, fki = k.blocks
    nq, nkv = -(-k.L // k.QB), -(-k.S // k.KB)
    full_fill = ""
    if fkn is not None:
        full_fill = (
            f"const int64_t nf_ = (int64_t){fkn.buf.name}[{fkn.offset} + b * {fkn.strides[0]} + "
            f"h * {fkn.strides[1]} + qi * {fkn.strides[2]}];\n        "
            f"const int32_t *fki = {fki.buf.name} + {fki.offset} + b * {fki.strides[0]} + "
            f"h * {fki.strides[1]} + qi * {fki.strides[2]};\n        "
            f"for (int64_t t = 0; t < nf_; t++) {{ const int64_t j = fki[t * {fki.strides[3]}]; "
            f"if (j >= 0 && j < NKV) row[j] = 2; }}")
    zero = "\n".join(f"  for (int64_t x = 0; x < {_numel(b.shape)}; x++) {b.name}[x] = 0;"
                     for b in k.outs[3:])
    fmt: dict = dict(
        name=k.name, ops=" ".join(k.ops), params=", ".join(params), T=k.out.ctype, B=k.B,
        HQ=k.HQ, HKV=k.HKV, BK=k.k.shape[0], L=k.L, S=k.S, E=k.E, EV=k.EV, QB=k.QB, KB=k.KB,
        NQ=nq, NKV=nkv, BM=kvn.shape[0], HM=kvn.shape[1], scale=repr(float(k.scale)),
        KVN=kvn.buf.name, kvn_off=kvn.offset, KVI=kvi.buf.name, kvi_off=kvi.offset,
        full_fill=full_fill, zero_caps=zero,
        DQ=k.outs[0].name, DK=k.outs[1].name, DV=k.outs[2].name, K=k.k.buf.name,
        V=k.v.buf.name, k_off=k.k.offset, v_off=k.v.offset,
        omp_q=_omp(openmp, k.B * k.HQ * nq, dynamic=True),
        omp_kv=_omp(openmp, k.k.shape[0] * k.HKV * nkv, dynamic=True))
    for d, st in enumerate(kvn.strides):
        fmt[f"kvn{d}"] = st
    for d, st in enumerate(kvi.strides):
        fmt[f"kvi{d}"] = st
    for tag, x in (("k", k.k), ("v", k.v)):
        for d in range(4):
            fmt[f"{tag}s{d}"] = x.strides[d]
    return fmt


def _numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


__all__ = ["CText", "backward_source", "kernel_source", "mods_source", "render_mod", "variant"]

