"""softmax's exp pass (``ember/compiler/c/codegen/csrc/row_exp.h``, ``codegen/row_exp.py``).

The helper is built for each path whatever the host (AVX-512 = x86-64-v4 with ``vscalefps``,
AVX2/FMA = x86-64-v3, and the scalar fallback for x86-64 without FMA), its assembly checked,
and run where the host can: exp(x - m) within 2 ulp of float64's exp rounded to float (0 below
FLT_MIN, NaN kept), the row sum within a few float ulps of the float64 sum of the exact
values, every tail length, in place and sum-only calls, and the same bits on the AVX2 and
AVX-512 paths.  Compiled float32 softmax/log_softmax rows then match torch within float32
ulps (``test_act_eager_c.py`` checks eager against torch and eager against compiled).
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest

import ember
from ember.compiler.c.build.toolchain import host_can_run
from ember.compiler.c.codegen import csrc, row_exp
from ember.compiler.c.codegen.prelude import build_test_lib

torch = pytest.importorskip("torch")

# -march level the host must run, flags, an instruction of the exp loop (None: scalar code)
PATHS = {
    "x86-64-v4": ("x86-64-v4", ("-march=x86-64-v4", "-mprefer-vector-width=512"),
                  r"vscalefps [^\n]*%zmm"),
    "x86-64-v3": ("x86-64-v3", ("-march=x86-64-v3", "-mno-avx512f"), r"vfmadd\w+ps [^\n]*%ymm"),
    "x86-64": ("x86-64", ("-march=x86-64",), None),
}
_SRC = "#include <stdint.h>\n" + row_exp.HEADER + r"""
float expsum(float *y, const float *x, float m, int64_t C) {
    return ember_row_expsum(y, x, m, C, 0, 4);
}
float expsum_pf(float *y, const float *x, float m, int64_t C) {
    return ember_row_expsum(y, x, m, C, (const char *)(x + C), 4);
}
float rowmax(const float *x, int64_t C) { return ember_row_max(x, C); }
"""
_P, _F, _I = ctypes.c_void_p, ctypes.c_float, ctypes.c_int64
_LIBS: dict = {}


def _lib(path: str, load: bool = True):
    key = (path, load)
    if key not in _LIBS:
        _LIBS[key] = build_test_lib(_SRC, target=PATHS[path][1], load=load)
        if load:
            for name in ("expsum", "expsum_pf"):
                fn = getattr(_LIBS[key], name)
                fn.argtypes, fn.restype = [_P, _P, _F, _I], _F
            _LIBS[key].rowmax.argtypes, _LIBS[key].rowmax.restype = [_P, _I], _F
    return _LIBS[key]


def _runnable(path: str):
    if not host_can_run(PATHS[path][0]):
        pytest.skip(f"the host cannot run {path} code")
    return _lib(path)


def _expsum(lib, x: np.ndarray, m: float, y: np.ndarray | None = None, pf: bool = False):
    x = np.ascontiguousarray(x, np.float32)
    fn = lib.expsum_pf if pf else lib.expsum
    s = fn(None if y is None else y.ctypes.data, x.ctypes.data, m, x.size)
    return s


def _args() -> np.ndarray:
    """x - m values: a dense log-spaced sweep of [-104, 0], the thresholds' neighbours, specials."""
    rng = np.random.default_rng(0)
    a = -np.exp(rng.uniform(np.log(1e-8), np.log(104.0), 1 << 20)).astype(np.float32)
    under = np.float32(-87.33654)
    near = np.nextafter(np.full(64, under), np.float32(0)).astype(np.float32)
    extra = [0.0, -0.0, -1e-30, -np.inf, np.nan, under, near[0], -87.3, -88.0, -103.0,
             -0.34657359, -0.34657362, -0.6931472, -1e30]
    return np.concatenate([a, np.array(extra, np.float32)])


@pytest.mark.parametrize("path", list(PATHS))
def test_exp_within_two_ulp(path: str) -> None:
    lib = _runnable(path)
    x = _args()
    y = np.empty_like(x)
    _expsum(lib, x, 0.0, y)
    want = np.exp(x.astype(np.float64))
    nan = np.isnan(x)
    assert np.isnan(y[nan]).all()
    tiny = want < np.finfo(np.float32).tiny
    assert (y[tiny & ~nan] == 0).all()          # below FLT_MIN: 0 (-inf included)
    w32 = want[~tiny & ~nan].astype(np.float32)
    ulp = np.spacing(w32).astype(np.float64)
    err = np.abs(y[~tiny & ~nan] - want[~tiny & ~nan]) / ulp
    assert err.max() <= 2.0, (path, err.max(), x[~tiny & ~nan][err.argmax()])
    assert y[x == 0].tolist() == [1.0, 1.0]      # exp(0) and exp(-0) exactly


@pytest.mark.parametrize("path", list(PATHS))
def test_sum_tails_in_place_and_sum_only(path: str) -> None:
    lib = _runnable(path)
    rng = np.random.default_rng(1)
    for C in [*range(1, 40), 255, 256, 257, 511, 1000, 1024, 4099]:
        x = (rng.standard_normal(C) * 4).astype(np.float32)
        m = float(x.max())
        pad = np.full(C + 16, -7.0, np.float32)   # columns past C must stay untouched
        s = _expsum(lib, x, m, pad, pf=C % 2 == 0)
        e = np.exp((x - np.float32(m)).astype(np.float64))   # of the float argument x - m
        ulp = np.spacing(e.astype(np.float32)).astype(np.float64)
        assert (np.abs(pad[:C] - e) <= 2 * ulp).all()
        assert (pad[C:] == -7.0).all()
        assert abs(s - e.sum()) <= 4 * np.spacing(np.float32(e.sum())), (C, s, e.sum())
        assert _expsum(lib, x, m) == s              # sum only: the same sum
        inplace = x.copy()
        assert _expsum(lib, inplace, m, inplace) == s
        np.testing.assert_array_equal(inplace, pad[:C])


@pytest.mark.parametrize("path", list(PATHS))
def test_row_max(path: str) -> None:
    """The max of every row length (the vector blocks' tails), -inf rows; a NaN row may give
    any m (its outputs are NaN through the sum), the others torch's max exactly."""
    lib = _runnable(path)
    rng = np.random.default_rng(4)
    for C in [*range(1, 70), 127, 1024, 1031]:
        x = (rng.standard_normal(C) * 100).astype(np.float32)
        pad = np.concatenate([x, np.full(16, 1e30, np.float32)])   # past C: never read
        assert lib.rowmax(pad.ctypes.data, C) == torch.from_numpy(x).max().item()
    x = np.full(37, -np.inf, np.float32)
    assert lib.rowmax(x.ctypes.data, 37) == -np.inf
    x[36] = np.inf
    assert lib.rowmax(x.ctypes.data, 37) == np.inf


def test_avx2_and_avx512_agree() -> None:
    """The vector paths run the same operations per lane and sum in the same order."""
    if not host_can_run("x86-64-v4"):
        pytest.skip("needs a host that runs x86-64-v4")
    rng = np.random.default_rng(2)
    for C in (7, 16, 300, 1024, 2053):
        x = (rng.standard_normal(C) * 30).astype(np.float32)
        x[::17] = -np.inf
        outs = []
        for path in ("x86-64-v3", "x86-64-v4"):
            y = np.empty_like(x)
            outs.append((_expsum(_lib(path), x, float(x.max()), y), y.view(np.uint32)))
        assert outs[0][0] == outs[1][0]
        np.testing.assert_array_equal(outs[0][1], outs[1][1])


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump")
@pytest.mark.parametrize("path", list(PATHS))
def test_exp_loop_instructions(path: str) -> None:
    """AVX-512 scales with vscalefps on zmm, AVX2 runs fma on ymm (no zmm, no AVX-512 mask
    registers), the fallback calls no libm; no path calls exp."""
    so = _lib(path, load=False)
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so], capture_output=True,
                         text=True, check=True).stdout
    want = PATHS[path][2]
    assert "exp" not in re.sub(r"<(expsum|expsum_pf)[^>]*>", "", asm)
    if want is not None:
        assert re.search(want, asm)
    if path == "x86-64-v3":
        assert "%zmm" not in asm and "vscalefps" not in asm
    if path == "x86-64":
        assert "%ymm" not in asm and "vfmadd" not in asm


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("cols", [1, 13, 1024, 1037])
def test_compiled_float32_rows_match_torch(op: str, cols: int) -> None:
    """The compiled row kernels on this host (ragged tails, -inf columns, a NaN row, an all
    -inf row) against torch in float64: exp(x - m) is conditioned by d = |x - m| (the float
    argument's rounding moves the value by up to d ulps, in torch's float32 kernel as in
    ember's), plus a few ulps for exp, the sum and the reciprocal."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((37, cols)) * 6).astype(np.float32)
    x[3, ::3] = -np.inf
    x[5, 0] = np.nan
    x[7] = -np.inf                      # an all -inf row: NaN, as torch
    fn = ember.compile(lambda v: getattr(ember, op)(v, -1), backend="c")
    got = fn(ember.tensor(x)).numpy()
    t64 = getattr(torch, op)(torch.from_numpy(x).double(), -1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(t64))
    ok = np.isfinite(t64) & (np.abs(t64) >= np.finfo(np.float32).tiny)
    np.testing.assert_array_equal(got[np.isinf(t64)], t64[np.isinf(t64)])
    m = np.where(np.isnan(x), -np.inf, x).max(axis=-1, keepdims=True)
    d = np.abs(x - m).astype(np.float64)[ok]
    ulp = np.spacing(np.abs(t64[ok]).astype(np.float32)).astype(np.float64)
    if op == "softmax":
        tol = (5 + d) * ulp
    else:                               # (x - m) - log(sum): ulps of the terms
        tol = 4 * ulp + np.spacing(np.float32(d + np.log(cols) + 1))
    assert (np.abs(got[ok] - t64[ok]) <= tol).all()
    if op == "softmax":                 # below FLT_MIN: 0 or torch's subnormal
        tiny = np.isfinite(t64) & ~ok
        assert (np.abs(got[tiny]) < np.finfo(np.float32).tiny).all()


# ------------------------------------------- half rows: scale and round in one pass
_HALF_SRC = ('#include "ember_prelude.h"\n' + csrc("half_block.h") + row_exp.HEADER + r"""
void scale_f16(uint16_t *d, float *s_, float s, int64_t C) { ember_row_scale_f16(d, s_, s, C); }
void scale_bf16(uint16_t *d, float *s_, float s, int64_t C) { ember_row_scale_bf16(d, s_, s, C); }
""")
_HALF_PATHS = {**{k: v[:2] for k, v in PATHS.items()},
               "avx512bf16": ("x86-64-v4", ("-march=x86-64-v4", "-mavx512bf16",
                                            "-mprefer-vector-width=512"))}


def _host_has(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(flag in line.split() for line in f if line.startswith("flags"))
    except OSError:
        return False


@pytest.mark.parametrize("path", list(_HALF_PATHS))
def test_half_row_scale_rounds_once(path: str) -> None:
    """softmax's last pass for half rows: round(src * (1 / s)) as NumPy's casts round (the
    AVX512-BF16 instruction's flushed subnormals take the exact rounding), every tail length,
    the canonical NaN row for a NaN sum."""
    import ml_dtypes

    march, flags = _HALF_PATHS[path]
    if not host_can_run(march) or (path == "avx512bf16" and not _host_has("avx512_bf16")):
        pytest.skip(f"the host cannot run {path} code")
    lib = build_test_lib(_HALF_SRC, target=flags)
    rng = np.random.default_rng(6)
    for dtype, fn in (("float16", lib.scale_f16), ("bfloat16", lib.scale_bf16)):
        np_dt = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
        for C in (1, 15, 16, 33, 1024, 1037):
            src = np.exp(rng.uniform(-100, 0, C)).astype(np.float32)   # subnormal products too
            src[::7] = 0.0
            s = np.float32(3.7)
            want = (src * (np.float32(1) / s)).astype(np_dt).view(np.uint16)
            d, w = np.zeros(C, np.uint16), src.copy()    # (w: the float row, scratch)
            fn(_P(d.ctypes.data), _P(w.ctypes.data), _F(s), _I(C))
            np.testing.assert_array_equal(d, want, err_msg=f"{dtype} C={C}")
            w = src.copy()
            fn(_P(d.ctypes.data), _P(w.ctypes.data), _F(np.nan), _I(C))
            assert (d == (0x7E00 if dtype == "float16" else 0x7FC0)).all()
