"""C for ``GemmKernel``s (loop_ir.py): BLAS calls and the generated GEMM template.

``gemm_prelude(program)`` is added once to a translation unit with products: the BLAS
prototypes of ``blas.c_declarations()`` and, per dtype, ``ember_gemm_<s>`` (``s`` = ``f`` or
``d``), which maps each operand's (row, col) strides to BLAS's row-major trans flag and leading
dim (a transposed view is ``TRANS``, a sliced one a larger leading dim; a layout BLAS cannot
take, such as a broadcast or a doubly strided view, is packed into a temporary first) and calls
sgemm/dgemm, or a plain loop when the process has no BLAS.

``gemm_kernel(k, program, openmp)`` is the kernel: a loop over the batch around the product,
then the epilogue in one pass over the output (``impl="blas"``), or the template
(``impl="tmpl_<mr>x<nr>"``): B packed once per product into k-major slivers, A per block, an
``mr x nr`` register-blocked FMA micro-kernel as wide as the build's vector registers, blocks
of rows claimed by OpenMP threads, and the epilogue applied to each finished block while it is
in cache (docs/compiler.md, "The packed GEMM template").  The template accumulates in its own
order, so it equals BLAS within rounding, not bit for bit.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ember.compiler.c.build import blas, toolchain
from ember.compiler.c.codegen import awake, csrc
from ember.compiler.c.codegen.omp import omp_loops
from ember.compiler.c.ir.kernels import (
    GemmKernel,
    Im2colKernel,
)
from ember.compiler.c.ir.loop_ir import (
    Program,
    numel,
    s_mul,
)
from ember.ops import _parallel

# template variants (micro-tile rows x cols) per dtype and vector ISA, the default first:
# autotuning candidates.  A tile is whole 64-byte rows (so it builds for every ISA); its
# accumulators (rows x vectors) fit the ISA's registers: 32 zmm with AVX-512, 16 ymm with AVX2.
_TILES = {"avx512": {"float32": ("tmpl_14x32", "tmpl_12x32", "tmpl_8x48"),
                     "float64": ("tmpl_14x16", "tmpl_12x16", "tmpl_8x24")},
          "avx2": {"float32": ("tmpl_6x16", "tmpl_4x16", "tmpl_3x32"),
                   "float64": ("tmpl_6x8", "tmpl_4x8", "tmpl_3x16")}}


def templates_for(march: str = "native") -> dict:
    """The template variants per dtype for code built with ``-march=<march>`` ("native": the
    build's target, this machine or EMBER_C_MARCH's): AVX-512 tiles for x86-64-v4 (or an
    AVX-512 target), else AVX2-sized ones.

    >>> templates_for("x86-64-v3")["float32"][0]
    'tmpl_6x16'
    """
    if march == "native":
        return _TILES["avx512" if "avx512f" in toolchain.target_features() else "avx2"]
    return _TILES["avx512" if march in ("x86-64-v4", "sapphirerapids", "icelake-server",
                                        "skylake-avx512", "znver4", "znver5") else "avx2"]


TEMPLATES = templates_for()


def template_wins(k: GemmKernel) -> bool:
    """The measured rule (benchmarks/RESULTS.md, "The float32 GEMM template against MKL"):
    whether the template beats BLAS pieces on product ``k``.  With the AVX-512 14x32 tile it
    takes 0.85-1.05x OpenBLAS's time on the char GPT's, MiniLM's and the MLP's float32
    products (M of 256-2944, k and n of 256-2048): the template takes 2-D float32 products of
    more than SMALL_M rows and at least 96 columns (narrower ones, the 10- and 65-wide output
    layers, are half empty tiles: BLAS), whatever their k.  Small k is no exception since the
    template's fused epilogue vectorizes (``_tile_epilogue``): the MLP step's weight gradients
    (m=512, n=784 or 512, k=256, AdamW's update as the epilogue) take 0.9x BLAS's time as
    templates (1.4-1.5x before), and k of 4-128 0.75-0.96x (one thread, thread CPU time;
    RESULTS.md, "The template's fused epilogue, vectorized").  AVX2 builds keep BLAS (0.7x on
    the AVX-512 host; not measured on an AVX2 CPU), batched products too (not measured)."""
    sizes = (k.m, k.n, k.k)
    if k.half or k.dtype.np.name != "float32" or k.batch or k.impl.startswith("htmpl"):
        return False
    if not all(type(x) is int for x in sizes) or TEMPLATES is not _TILES["avx512"]:
        return False
    return k.m > SMALL_M and k.n >= 96



def default_tile(k: GemmKernel) -> str:
    """The template tile a product takes outside max-autotune: the ISA's first, except a
    product of at most EXACT_TILE_ROWS rows (split by columns over the threads,
    gemm_tmpl_body.c.in) that a later tile covers exactly while the first does not: the char
    GPT's 256-row products take 8x48 there, no edge tiles (14x32 pads 256 rows to 266),
    3-10% faster at two threads and 0-4% at one (RESULTS.md, "The template's two-thread
    split by columns").  Every tile sums each element in the same order: the same bits.

    >>> from types import SimpleNamespace as N
    >>> k = N(m=256, n=1152, dtype=N(np=N(name="float32")))
    >>> default_tile(k) in ("tmpl_8x48", "tmpl_4x16")   # AVX-512 or AVX2 tiles
    True
    """
    tiles = TEMPLATES.get(k.dtype.np.name, ())
    if not tiles:
        return "blas"

    def exact(impl: str) -> bool:
        mr, nr = _tile(impl)
        return k.m % mr == 0 and k.n % nr == 0

    if type(k.m) is int and type(k.n) is int and k.m <= EXACT_TILE_ROWS and not exact(tiles[0]):
        return next((t for t in tiles[1:] if exact(t)), tiles[0])
    return tiles[0]

_KC = 384   # k per packed block: a 14x32 float tile's B sliver is 48 KiB
SMALL_M = 4     # products of at most this many rows skip packing (gemm_small.h.in)
MC_ROWS = 120   # rows of A per packed block (a multiple of the tile's rows)
EXACT_TILE_ROWS = 1024   # default_tile: products this short may take an exact later tile
MIN_FLOPS = _parallel.MATMUL_MIN_FLOPS

# the C helpers per dtype, a str.format template ({T}: the C type, {s}: f or d, ...)
_HELPERS = csrc("gemm_blas.h.in")

# the template pieces, str.format templates like _HELPERS ({mr} x {nr}: the micro-tile)
_COMMON = "\n" + csrc("gemm_common.h.in")   # threads and EMBER_GEMM_MIN_FLOPS, once per unit
_PACK_A = "\n" + csrc("gemm_pack_a.h.in")
_PACK_B = "\n" + csrc("gemm_pack_b.h.in")
_MICRO = "\n" + csrc("gemm_micro.h.in")
_SMALL = "\n" + csrc("gemm_small.h.in")
# B operands packed once per load (AOT packages): the slots, and the getter per tile width
_PREPACK = "\n" + csrc("gemm_prepack.h.in")
_PREPACK_GET = "\n" + csrc("gemm_prepack_get.h.in")
_PREPACK_HALF = "\n" + csrc("gemm_prepack_half.h.in")   # the half products' getters
# kernel bodies (lines, with /*@name@*/ lines standing for the blocks that ``_fill`` inserts)
_TMPL_BODY = csrc("gemm_tmpl_body.c.in")     # the blocked loops around the micro-kernel
_OMP_PIECES = csrc("gemm_omp_pieces.c.in")   # _pieces_with_epilogue
_SLOT = re.compile(r"^( *)/\*@(\w+)@\*/$")
# float16/bfloat16 operands converted while packed (gemm_half*.h.in; @NAME@ placeholders)
_HALF = "\n" + csrc("gemm_half.h.in")
_HALF_PACK = "\n" + csrc("gemm_half_pack.h.in")
_HALF_DP = "\n" + csrc("gemm_half_dp.h.in")
_HALF_AMX = "\n" + csrc("gemm_half_amx.h.in")
_SRC_CTYPE = {"h": "uint16_t", "b": "uint16_t", "r": "float", "q": "float"}


def _fill(text: str, blocks: dict) -> list:
    """The lines of ``text`` with each ``/*@name@*/`` line replaced by ``blocks[name]``'s
    lines at that line's indentation (nothing when the block is empty)."""
    out = []
    for line in text.splitlines():
        m = _SLOT.match(line)
        out += [m.group(1) + x for x in blocks[m.group(2)]] if m else [line]
    return out


# the helpers' name suffix per dtype; integer products have no BLAS (gemm_int.h.in)
_SUFFIX = {"float32": "f", "float64": "d", "int64": "i64", "int32": "i32", "int16": "i16",
           "int8": "i8", "uint8": "u8"}
_INT_HELPERS = csrc("gemm_int.h.in")


def _suffix(k: GemmKernel) -> str:
    return _SUFFIX[k.dtype.np.name]


def is_int(k: GemmKernel) -> bool:
    """An integer product: the plain loop of gemm_int.h.in (no BLAS, no template)."""
    return _suffix(k) not in ("f", "d")


def gemm_prelude(program: Program) -> str:
    """The GEMM helpers the program's GemmKernels call ("" when it has none)."""
    kernels = [k for k in program.kernels() if isinstance(k, GemmKernel)]
    if not kernels:
        return ""
    lib = blas.load_blas()
    setter = None if lib is None else lib.set_num_threads
    parts = [blas.c_declarations(lib)]
    if setter is not None:
        parts.append(f"extern void {setter}(int);")
    parts.append(awake.prelude(program))   # before _COMMON: EMBER_POOL_TAKES_
    parts.append(_COMMON.format(min_flops=MIN_FLOPS, set_threads=f"{setter}(n);" if setter
                                else "(void)n;"))
    done: set = set()
    for k in kernels:
        t, s = k.out.ctype, _suffix(k)
        if k.half:
            parts += _half_prelude(k, done, 1 + max(x.prepack for x in kernels))
            continue
        if is_int(k):
            if s not in done:
                done.add(s)
                parts.append(_INT_HELPERS.format(T=t, s=s))
            continue
        if s not in done:
            done.add(s)
            fn = None if lib is None else (lib.sgemm if s == "f" else lib.dgemm)
            gemv = _gemv_symbol(lib, fn)
            if fn is not None:
                parts.append(f"#define EMBER_BLAS_{s.upper()} 1")
            if gemv is not None:
                # one row times a matrix (a decode step's linear layers): BLAS gemv reads the
                # matrix once, about 2x faster than gemm with M = 1 (OpenBLAS 0.3.31)
                it = "int64_t" if lib.int64 else "int"
                parts.append(f"#define EMBER_BLAS_GEMV_{s.upper()} {gemv}\n"
                             f"extern void {gemv}(int order, int trans, {it} m, {it} n, {t} "
                             f"alpha, const {t} *a, {it} lda, const {t} *x, {it} incx, {t} beta,"
                             f" {t} *y, {it} incy);")
            parts.append(_HELPERS.format(T=t, s=s, S=s.upper(), blasfn=fn or "ember_no_blas"))
        if k.impl.startswith("tmpl_"):
            mr, nr = _tile(k.impl)
            assert nr * k.out.dtype.np.itemsize % 64 == 0, (k.impl, k.dtype)  # whole vectors
            for piece, tag in ((_PACK_A, ("a", mr)), (_PACK_B, ("b", nr)),
                               (_MICRO, ("micro", mr, nr)), (_SMALL, ("small",))):
                if (tag, s) not in done:
                    done.add((tag, s))
                    parts.append(piece.format(T=t, s=s, S=s.upper(), mr=mr, nr=nr))
            if k.prepack >= 0:
                if "prepack" not in done:
                    done.add("prepack")
                    nslots = 1 + max(x.prepack for x in kernels)
                    parts.append(_PREPACK.format(nslots=nslots))
                if ("pp", nr, s) not in done:
                    done.add(("pp", nr, s))
                    parts.append(_PREPACK_GET.format(T=t, s=s, nr=nr))
    return "\n".join(parts)


# the vdpbf16ps pair kernel for bfloat16 products where the build has AVX512-BF16: off by
# default, since on the Sapphire Rapids machine measured vdpbf16ps (zmm) issues one per two
# cycles, half the multiply-adds per cycle of two FMA pipes (benchmarks/RESULTS.md, "Half
# products in the GEMM template"); EMBER_C_BF16_DOT=1 turns it on (for CPUs where it is fast)
BF16_DOT = os.environ.get("EMBER_C_BF16_DOT", "0") == "1"


def half_impl(march: str = "native") -> str:
    """The impl of a float16/bfloat16 product: the float32 template tile of the ISA,
    "htmpl_<mr>x<nr>" (its only candidate: BLAS cannot read half operands)."""
    tiles = TEMPLATES if march == "native" else templates_for(march)
    return "h" + tiles["float32"][0]


def _half_tile(k: GemmKernel) -> tuple[int, int]:
    """The tile of half product ``k`` (a program lowered again for inspection after a warm
    start has no impl chosen: the ISA's)."""
    return _tile(k.impl if k.impl.startswith("htmpl_") else half_impl())


def dp_capable(k: GemmKernel) -> bool:
    """Both operands are bfloat16 values (stored, or float32 rounded as packed): the
    ``vdpbf16ps`` pair kernel serves the product where the build has AVX512-BF16."""
    return bool(k.half) and all(c in "br" for c in k.half) and _half_tile(k)[1] % 16 == 0


def _half_pack_b(kind: str, mr: int, nr: int, sb: str) -> str:
    """The name of a half product's B packing function (without the ``ember_`` prefix)."""
    return {"amx": f"amxpack_b_32_{sb}", "dp": f"dpack_b_{nr}_{sb}",
            "cvt": f"hpack_b_{nr}_{sb}"}[kind]


def _half_prepack_getters(k: GemmKernel, done: set, nslots: int) -> list:
    """The slots (once) and, per packing variant of ``k``, the getter of its B operand's
    panels packed once per load (AOT packages, gemm_prepack_half.h.in)."""
    parts = []
    if "prepack" not in done:
        done.add("prepack")
        parts.append(_PREPACK.format(nslots=nslots))
    mr, nr = _half_tile(k)
    sb = k.half[1]
    kinds = [("cvt", "1", "float")]
    if dp_capable(k):
        kinds += [("dp", "defined(__AVX512BF16__)", "uint16_t"),
                  ("amx", "defined(__AMX_BF16__) && defined(__AMX_TILE__)", "uint16_t")]
    for kind, guard, pt in kinds:
        name = _half_pack_b(kind, mr, nr, sb)
        if ("pph", name) not in done:
            done.add(("pph", name))
            parts.append(_PREPACK_HALF.replace("@PACK@", name).replace("@GUARD@", guard)
                         .replace("@PT@", pt).replace("@TS@", _SRC_CTYPE[sb])
                         .replace("@NR@", "32" if kind == "amx" else str(nr))
                         .replace("@PACKFN@", "ember_" + name))
    return parts


def _half_prelude(k: GemmKernel, done: set, nslots: int = 0) -> list:
    """The C a half product's template needs: the conversions, the float micro-kernel, each
    operand's packing functions (float panels, and bfloat16 pairs for AVX512-BF16), and the
    getters of packed-once B panels where ``k.prepack`` (AOT)."""
    mr, nr = _half_tile(k)
    parts = []
    if "half" not in done:
        done.add("half")
        from ember.compiler.c.codegen import half as half_codegen
        parts += [half_codegen.HEADER, _HALF]
        if BF16_DOT:
            parts.append("#define EMBER_GEMM_BF16_DOT 1")
    # the float micro-kernel, and the float32 B packing (B^T widened into float blocks is
    # packed by it: gemm_half_pack.h.in); the float32 template's keys, each piece once a unit
    for piece, tag in ((_MICRO, ("micro", mr, nr)), (_PACK_B, ("b", nr))):
        if (tag, "f") not in done:
            done.add((tag, "f"))
            parts.append(piece.format(T="float", s="f", S="F", mr=mr, nr=nr))
    for src in sorted(set(k.half)):
        for piece in (_HALF_PACK, _HALF_DP, _HALF_AMX) if dp_capable(k) else (_HALF_PACK,):
            key = (id(piece), mr, nr, src)
            if key not in done:
                done.add(key)
                parts.append(piece.replace("@MR@", str(mr)).replace("@NR@", str(nr))
                             .replace("@SRC@", src).replace("@TS@", _SRC_CTYPE[src]))
    if k.prepack >= 0:
        parts += _half_prepack_getters(k, done, nslots)
    return parts


def _gemv_symbol(lib: Any, gemm: str | None) -> str | None:
    """The CBLAS gemv exported next to ``gemm`` (``scipy_cblas_sgemv64_``), or None."""
    if lib is None or gemm is None or "gemm" not in gemm:
        return None
    name = gemm.replace("gemm", "gemv")
    try:
        getattr(lib.dll, name)
    except AttributeError:
        return None
    return name


def _tile(impl: str) -> tuple[int, int]:
    mr, nr = impl[impl.index("tmpl_") + len("tmpl_"):].split("x")
    return int(mr), int(nr)


def gemm_kernel(k: GemmKernel, program: Program, openmp: bool) -> str:
    """The C function of one GemmKernel (same parameter conventions as other kernels)."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [f"/* {' '.join(k.ops)} (GEMM, {k.impl}) */",
             f"static void {k.name}({', '.join(params)}) {{"]
    ints_at = len(lines)   # the runtime integers the body uses are declared here at the end
    lines.append("  (void)ints; (void)floats;")
    lines.append(f"  const int64_t M_ = {k.m}, N_ = {k.n}, K_ = {k.k};")
    if is_int(k):
        lines += _batch_loops(k, [f"ember_gemm_{_suffix(k)}(M_, N_, K_, A_, {k.a.rs}, {k.a.cs}, "
                                  f"B_, {k.b.rs}, {k.b.cs}, C_, N_);"])
        lines += _epilogue_pass(k, openmp)
    elif k.half:
        lines += _half_template_body(k)
    elif k.impl == "blas" and k.batch:
        nd = len(k.batch)
        lines.append(f"  const int64_t bshape_[{nd}] = {{{', '.join(str(x) for x in k.batch)}}};")
        lines.append(f"  const int64_t as_[{nd}] = "
                     f"{{{', '.join(str(x) for x in k.a.batch_strides)}}};")
        lines.append(f"  const int64_t bs_[{nd}] = "
                     f"{{{', '.join(str(x) for x in k.b.batch_strides)}}};")
        lines.append(f"  ember_gemm_batched_{_suffix(k)}({nd}, bshape_, as_, bs_, M_, N_, K_, "
                     f"{k.a.buf.name} + {k.a.offset}, {k.a.rs}, {k.a.cs}, "
                     f"{k.b.buf.name} + {k.b.offset}, {k.b.rs}, {k.b.cs}, {k.out.name});")
        lines += _epilogue_pass(k, openmp)
    elif k.impl == "blas" and openmp and k.epilogue:
        lines += _batch_loops(k, _pieces_with_epilogue(k))
    elif k.impl == "blas":
        lines += _batch_loops(k, [f"ember_gemm_{_suffix(k)}(M_, N_, K_, A_, {k.a.rs}, {k.a.cs}, "
                                  f"B_, {k.b.rs}, {k.b.cs}, C_, N_);"])
        lines += _epilogue_pass(k, openmp)
    else:
        lines += _template_body(k)
    lines.append("}")
    # only the integers used: a graph with many lifted scalars would otherwise declare (and
    # pass) all of them in every GEMM, and make kernels that differ only there look distinct
    used = set(_INT_USE.findall("\n".join(lines[ints_at:])))
    lines[ints_at:ints_at] = [f"  const int64_t {name} = ints[{j}];"
                              for j, name in enumerate(program.int_names) if name in used]
    return "\n".join(lines) + "\n"


_INT_USE = re.compile(r"\b(?:s\d+|e\d+_\d+_\d+)\b")   # as unit._INT_NAME


def _batch_loops(k: GemmKernel, body: list) -> list:
    """Loops over the batch setting A_, B_, C_ (and bflat_, the flat batch index)."""
    t = k.out.ctype
    out = []
    ind = "  "
    flat = "0"
    aoff, boff = [str(k.a.offset)], [str(k.b.offset)]
    for d, n in enumerate(k.batch):
        out.append(f"{ind}for (int64_t b{d} = 0; b{d} < ({n}); b{d}++) {{")
        ind += "  "
        flat = f"({flat}) * ({n}) + b{d}"
        if k.a.batch_strides[d] != 0:
            aoff.append(f"({k.a.batch_strides[d]}) * b{d}")
        if k.b.batch_strides[d] != 0:
            boff.append(f"({k.b.batch_strides[d]}) * b{d}")
    out.append(f"{ind}const int64_t bflat_ = {flat}; (void)bflat_;")
    out.append(f"{ind}const {k.a.buf.ctype} *A_ = {k.a.buf.name} + {' + '.join(aoff)};")
    out.append(f"{ind}const {k.b.buf.ctype} *B_ = {k.b.buf.name} + {' + '.join(boff)};")
    out.append(f"{ind}{t} *C_ = {k.out.name} + bflat_ * M_ * N_;")
    out += [ind + b for b in body]
    for _ in k.batch:
        ind = ind[:-2]
        out.append(f"{ind}}}")
    return out


def _pieces_with_epilogue(k: GemmKernel) -> list:
    """A 2-D product with an epilogue, built with OpenMP: the threads of one parallel region
    claim blocks of rows (or columns, when n > m; as many as ``ember_gemm_<s>`` makes) and run
    each block's BLAS call and then the epilogue over that block while it is in the thread's
    cache (one region instead of two, no pass over the
    whole output from cold; the MLP's AdamW updates are such epilogues).  The epilogue is
    elementwise in the output's index space (``fuse_epilogues``), so blocks are independent.
    A small product, or one thread, takes the plain path: one call, then the epilogue pass."""
    s = _suffix(k)
    call = (f"ember_gemm1_{s}(r1_ - r0_, ncols, K_, A_ + r0_ * ({k.a.rs}), {k.a.rs}, {k.a.cs}, "
            f"B_ + col0 * ({k.b.cs}), {k.b.rs}, {k.b.cs}, C_ + r0_ * N_ + col0, N_);")
    epi = _tile_epilogue(k)
    plain = [f"ember_gemm_{s}(M_, N_, K_, A_, {k.a.rs}, {k.a.cs}, B_, {k.b.rs}, {k.b.cs}, C_, "
             f"N_);"]
    plain += [x[2:] for x in _epilogue_pass(k, True)]
    text = _OMP_PIECES.format(call=call)
    return _fill(text, {"epilogue": epi, "plain": plain})


def _epilogue_pass(k: GemmKernel, openmp: bool) -> list:
    if not k.epilogue:
        return []
    ranges = [numel(k.epi_ranges())] if k.epi_flat else list(k.epi_ranges())
    out, ind = omp_loops(list(zip(k.epi_vars(), ranges)), "  ", openmp)
    out += [f"{ind}{st}" for st in k.epilogue]
    for _ in ranges:
        ind = ind[:-2]
        out.append(f"{ind}}}")
    return out


def _template_body(k: GemmKernel) -> list:
    if k.half:
        return _half_template_body(k)
    mr, nr = _tile(k.impl)
    t, s = k.out.ctype, _suffix(k)
    mc = mr * max(1, MC_ROWS // mr)
    npad = f"((N_ + {nr - 1}) / {nr} * {nr})"
    if k.prepack >= 0:   # B is a package constant: its panels packed once (gemm_prepack.h.in)
        # (not for M <= SMALL_M: that path reads B in place, and a packed copy costs memory)
        pre = [f"  const {t} *pbpre_ = M_ <= {SMALL_M} ? NULL : ember_pp_get_{nr}_{s}("
               f"{k.prepack}, {k.b.buf.name} + {k.b.offset}, {k.b.rs}, {k.b.cs}, K_, N_, {_KC}, "
               f"{npad});"]
        done = ["  ember_pp_done(pbpre_);"]
    else:
        pre, done = [f"  const {t} *pbpre_ = NULL;"], []
    pre += ["  const int64_t nth_ = ember_num_threads > 1 ? ember_num_threads : 1;",
            f"  {t} *pas_ = ({t} *)ember_gemm_alloc_(0, sizeof({t}) * {mc * _KC} * nth_);",
            f"  {t} *pb_ = pbpre_ ? NULL : ({t} *)ember_gemm_alloc_(1, sizeof({t}) * "
            f"(size_t)(K_ > 0 ? K_ : 1) * {npad});",
            f"  int *rdy_ = (int *)malloc(sizeof(int) * ((N_ + {nr - 1}) / {nr} + 1));",
            "  if (pas_ == NULL || (pb_ == NULL && pbpre_ == NULL) || rdy_ == NULL) {",
            "    ember_gemm_release_(0, pas_); ember_gemm_release_(1, pb_); free(rdy_);", *done,
            "    return;",
            "  }"]
    small = [f"ember_gemm_small_{s}(M_, N_, K_, A_, {k.a.rs}, {k.a.cs}, B_, {k.b.rs}, "
             f"{k.b.cs}, C_, N_);"]
    body = _fill(_TMPL_BODY.format(mc=mc, kc=_KC, mr=mr, nr=nr, T=t, PT=t, a_ready="",
                                   small_cond=f"M_ <= {SMALL_M}", kcp="kc_",
                                   pack_a=f"ember_pack_a_{mr}_{s}",
                                   sliver=f"ember_gemm_sliver_{nr}_{s}",
                                   micro=f"ember_micro_{mr}x{nr}_{s}",
                                   ars=k.a.rs, acs=k.a.cs, brs=k.b.rs, bcs=k.b.cs),
                 {"epilogue": _tile_epilogue(k) or ["(void)row; (void)col0; (void)ncols;"],
                  "small": small})
    return pre + _batch_loops(k, body) + ["  ember_gemm_release_(0, pas_);",
                                          "  ember_gemm_release_(1, pb_);", "  free(rdy_);",
                                          *done]


def _half_template_body(k: GemmKernel) -> list:
    """The template over half operands: each operand converted while packed (float panels and
    the float32 FMA micro-kernel), or, where the build has AVX512-BF16 and both operands are
    bfloat16 values, packed as bfloat16 pairs for the ``vdpbf16ps`` micro-kernel (chosen by
    the preprocessor, so one source serves every ``-march``).  No small-M path.  In an AOT
    package a B that is a package constant is packed once per load (``k.prepack``: the
    getters of gemm_prepack_half.h.in), else every product packs its operands."""
    sa, sb = k.half
    epi = _tile_epilogue(k) or ["(void)row; (void)col0; (void)ncols;"]

    def variant(kind: str) -> list:
        mr, nr = (32, 32) if kind == "amx" else _half_tile(k)
        mc = mr * max(1, MC_ROWS // mr)
        dp = kind != "cvt"
        pt = "uint16_t" if dp else "float"
        kcp = {"cvt": "kc_", "dp": "((kc_ + 1) & ~(int64_t)1)",
               "amx": "((kc_ + 31) & ~(int64_t)31)"}[kind]
        npad = f"((N_ + {nr - 1}) / {nr} * {nr})"
        if k.prepack >= 0:
            pre = [f"  const {pt} *pbpre_ = ember_ppget_{_half_pack_b(kind, mr, nr, sb)}("
                   f"{k.prepack}, {k.b.buf.name} + {k.b.offset}, {k.b.rs}, {k.b.cs}, K_, N_, "
                   f"{_KC}, {npad});"]
            done = ["  ember_pp_done(pbpre_);"]
        else:
            pre, done = [f"  const {pt} *pbpre_ = NULL;"], []
        pre += ["  const int64_t nth_ = ember_num_threads > 1 ? ember_num_threads : 1;",
                # the float32 template's kept 64-byte-aligned panels (gemm_common.h.in)
                f"  {pt} *pas_ = ({pt} *)ember_gemm_alloc_(0, sizeof({pt}) * "
                f"{mc * (_KC + 1)} * nth_);",
                f"  {pt} *pb_ = pbpre_ ? NULL : ({pt} *)ember_gemm_alloc_(1, sizeof({pt}) * "
                f"(size_t)(K_ + 32) * {npad});",
                f"  int *rdy_ = (int *)malloc(sizeof(int) * ((N_ + {nr - 1}) / {nr} + 1));",
                "  if (pas_ == NULL || (pb_ == NULL && pbpre_ == NULL) || rdy_ == NULL) {",
                "    ember_gemm_release_(0, pas_); ember_gemm_release_(1, pb_); free(rdy_);",
                *done, "    return;", "  }"]
        if kind == "amx":
            names = (f"ember_amxpack_a_32_{sa}", f"ember_amxsliver_32_{sb}",
                     "ember_amxmicro_32x32")
        elif kind == "dp":
            names = (f"ember_dpack_a_{mr}_{sa}", f"ember_dsliver_{nr}_{sb}",
                     f"ember_dpmicro_{mr}x{nr}")
        else:
            names = (f"ember_hpack_a_{mr}_{sa}", f"ember_hsliver_{nr}_{sb}",
                     f"ember_micro_{mr}x{nr}_f")
        ready = "ember_amx_config();" if kind == "amx" else ""
        body = _fill(_TMPL_BODY.format(mc=mc, kc=_KC, mr=mr, nr=nr, T="float", PT=pt,
                                       a_ready=ready,
                                       small_cond="0", kcp=kcp, pack_a=names[0],
                                       sliver=names[1], micro=names[2], ars=k.a.rs,
                                       acs=k.a.cs, brs=k.b.rs, bcs=k.b.cs),
                     {"epilogue": epi, "small": []})
        return pre + _batch_loops(k, body) + ["  ember_gemm_release_(0, pas_);",
                                              "  ember_gemm_release_(1, pb_);",
                                              "  free(rdy_);", *done]

    if not dp_capable(k):
        return variant("cvt")
    return ["#if defined(__AMX_BF16__) && defined(__AMX_TILE__)",
            "  if (ember_amx_ok()) {", *variant("amx"), "  } else",
            "#endif", "  {",
            "#if defined(__AVX512BF16__) && defined(EMBER_GEMM_BF16_DOT)",
            *variant("dp"), "#else", *variant("cvt"), "#endif", "  }"]


def _tile_epilogue(k: GemmKernel) -> list:
    """The epilogue over one finished row piece (``row``, columns ``col0 .. col0+ncols``) of
    batch entry ``bflat_``: the output's loop variables are rebuilt from the flat position.

    The column loop is marked ``omp simd``: it mostly runs inside an OpenMP parallel region
    (the templates', even on one thread, and the BLAS pieces'), which gcc outlines into a
    function that sees the buffers through a struct, without the kernel's ``restrict``; the
    loop then vectorizes only behind run-time alias checks, which gcc gives up on beyond ~10
    pairs of buffers.  AdamW's update (4 reads, 3 writes) ran scalar there, and a product with
    it as the template took 1.5x its time with BLAS (docs/compiler.md, "The template's fused
    epilogue, vectorized").  Each iteration touches only its own output element
    (``fuse_epilogues``), so ``simd`` changes no result: vector instructions round as the
    scalar ones do."""
    if not k.epilogue:
        return []
    shape = k.epi_ranges()
    out = []
    if k.epi_flat:
        out.append("for (int64_t c_ = col0; c_ < col0 + ncols; c_++) {")
        out.append("  const int64_t i = (bflat_ * M_ + row) * N_ + c_;")
    elif str(shape[-1]) != str(k.n):  # conv: n spans several output dims
        r = len(shape)
        out.append("for (int64_t c_ = col0; c_ < col0 + ncols; c_++) {")
        out.append("  int64_t rest_ = (bflat_ * M_ + row) * N_ + c_;")
        for dd in range(r - 1, -1, -1):
            if dd:
                out.append(f"  const int64_t i{dd} = rest_ % ({shape[dd]}); "
                           f"rest_ /= ({shape[dd]});")
            else:
                out.append("  const int64_t i0 = rest_;")
    else:
        r = len(shape)
        out.append("int64_t rest_ = bflat_ * M_ + row; (void)rest_;")
        for d in range(r - 2, -1, -1):
            if d:
                out.append(f"const int64_t i{d} = rest_ % ({shape[d]}); rest_ /= ({shape[d]});")
            else:
                out.append("const int64_t i0 = rest_;")
        out.append(f"for (int64_t i{r - 1} = col0; i{r - 1} < col0 + ncols; i{r - 1}++) {{")
    from ember.compiler.c.codegen import half as half_codegen
    # a half output cast from the float32 result: rounded once by its store
    out += [f"  {st}" for st in half_codegen.drop_store_rounding(k.epilogue)]
    out.append("}")
    j = next(i for i, x in enumerate(out) if x.startswith("for "))
    return out[:j] + ["#ifdef _OPENMP", "#pragma omp simd", "#endif"] + out[j:]


def im2col_kernel(k: Im2colKernel, ints: str = "") -> str:
    """The C of an Im2colKernel: loops in ``dst``'s memory order, one store each; ``ints``:
    the line where the runtime-integer declarations go (the unit fills it)."""
    if k.col2im:
        return _col2im_kernel(k, ints)
    t = k.dst.ctype
    g = k.geom
    d = len(k.kernel)
    lines = [f"/* {' '.join(k.ops)}: im2col */",
             f"static void {k.name}({t} *restrict {k.dst.name}, const {t} *restrict "
             f"{k.src.name}, const int64_t *restrict ints, const double *restrict floats) {{",
             *([ints] if ints else []), "  (void)ints; (void)floats;",
             f"  {t} *restrict d_ = {k.dst.name};"]
    ind = "  "
    lines.append(f"{ind}for (int64_t n = 0; n < {g.shape[0]}; n++)")
    lines.append(f"{ind}for (int64_t c = 0; c < {g.shape[1]}; c++) {{")
    ind += "  "
    lines.append(f"{ind}const {t} *restrict x_ = {k.src.name} + {g.offset} + n * "
                 f"({g.strides[0]}) + c * ({g.strides[1]});")
    for j in range(d):
        lines.append(f"{ind}for (int64_t k{j} = 0; k{j} < {k.kernel[j]}; k{j}++)")
    for j in range(d):
        lines.append(f"{ind}for (int64_t o{j} = 0; o{j} < {k.out[j]}; o{j}++) {{")
        ind += "  "
        lines.append(f"{ind}const int64_t p{j} = o{j} * {k.stride[j]} - {k.pad_lo[j]} + k{j} * "
                     f"{k.dilation[j]};")
    inside = " && ".join(f"p{j} >= 0 && p{j} < {g.shape[2 + j]}" for j in range(d))
    at = " + ".join(f"p{j} * ({g.strides[2 + j]})" for j in range(d))
    lines.append(f"{ind}*d_++ = ({inside}) ? x_[{at}] : ({t})0;")
    for _ in range(d):
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _col2im_kernel(k: Im2colKernel, ints: str = "") -> str:
    t = k.dst.ctype
    g = k.geom
    d = len(k.kernel)
    size: Any = 1
    for v in g.shape[2:]:
        size = s_mul(size, v)
    lines = [f"/* {' '.join(k.ops)}: col2im */",
             f"static void {k.name}({t} *restrict {k.dst.name}, const {t} *restrict "
             f"{k.src.name}, const int64_t *restrict ints, const double *restrict floats) {{",
             *([ints] if ints else []), "  (void)ints; (void)floats;",
             f"  const {t} *restrict s_ = {k.src.name};",
             f"  for (int64_t nc = 0; nc < (int64_t){g.shape[0]} * {g.shape[1]}; nc++) {{",
             f"    {t} *restrict y_ = {k.dst.name} + nc * {size};",
             f"    for (int64_t q = 0; q < {size}; q++) y_[q] = 0;"]
    ind = "    "
    for j in range(d):
        lines.append(f"{ind}for (int64_t k{j} = 0; k{j} < {k.kernel[j]}; k{j}++)")
    for j in range(d):
        lines.append(f"{ind}for (int64_t o{j} = 0; o{j} < {k.out[j]}; o{j}++) {{")
        ind += "  "
        lines.append(f"{ind}const int64_t p{j} = o{j} * {k.stride[j]} - {k.pad_lo[j]} + k{j} * "
                     f"{k.dilation[j]};")
    inside = " && ".join(f"p{j} >= 0 && p{j} < {g.shape[2 + j]}" for j in range(d))
    strides: list = [1] * d
    for j in range(d - 2, -1, -1):
        strides[j] = s_mul(strides[j + 1], g.shape[3 + j])
    at = " + ".join(f"p{j} * ({strides[j]})" for j in range(d))
    lines.append(f"{ind}if ({inside}) y_[{at}] += *s_;")
    lines.append(f"{ind}s_++;")
    for _ in range(d):
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def canonical_source(k: GemmKernel, program: Program) -> str:
    """The kernel's C with its name and buffer names replaced by position (an autotuning key:
    same shape, dtype, layout and epilogue give the same text)."""
    import re
    text = gemm_kernel(k, program, False).replace(k.name, "K")
    text = re.sub(r"\n  const int64_t \w+ = ints\[\d+\];", "", text)
    loads, stores = k.buffers()
    for j, b in enumerate(stores + loads):
        text = re.sub(rf"\b{b.name}\b", f"B{j}", text)
    return re.sub(r"\(GEMM, [\w]+\)", "", text)


__all__ = ["TEMPLATES", "canonical_source", "default_tile", "gemm_kernel", "gemm_prelude",
           "im2col_kernel", "is_int"]
