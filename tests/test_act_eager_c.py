"""One-pass eager C kernels (``ember/ops/_act_c.py``, ``csrc/act_eager.c``): exact GELU, last-dim
softmax and float16/bfloat16 add/sub/mul/div, against torch 2.13.

Each ISA path is built explicitly whatever the host is (AVX-512 = x86-64-v4, AVX2/F16C =
x86-64-v3 without AVX-512, and baseline x86-64 without F16C), checked for its instructions and
run where the host can; the library ember loads (``-march=native``) is tested through the API.
Tolerances: half results within one ulp of the dtype (both sides compute in float32 and round
once; the float32 values differ in their last bits), float32 within a few float32 ulps plus
torch's own erf error (its vectorized erf is accurate to ~1.5e-7 absolute)."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.compiler.c.build.toolchain import host_can_run
from ember.ops import _act_c

torch = pytest.importorskip("torch")

F = ember.nn.functional
HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# target flags, and an instruction of the GELU loop that must appear (None: no F16C at all)
TARGETS = {
    "x86-64": (("-march=x86-64",), None),
    "x86-64-v3": (("-march=x86-64-v3", "-mno-avx512f"), r"vcvtph2ps [^\n]*,%ymm"),
    "x86-64-v4": (("-march=x86-64-v4", "-mprefer-vector-width=512"), r"vcvtph2ps [^\n]*,%zmm"),
}
_P = ctypes.c_void_p


def _softmax_ulps(rows: np.ndarray, dtype: str) -> Any:
    """Softmax tolerance in ulps: one of a half dtype (float32 values rounded once); in float32
    exp(x - m) is conditioned by |x - m| (torch's vectorized exp and ember's differ by up to
    ~|x - m| / 2 ulp there, each within a few ulp of exact for its rounded argument), and the
    row sum is float32 in torch (C terms: errors of ~sqrt(C) ulps), double in ember."""
    if dtype != "float32":
        return 1.0
    r = rows.astype(np.float32)
    return 2.0 * (1.0 + np.abs(r - np.nanmax(r, axis=-1, keepdims=True))) + np.sqrt(r.shape[-1])


def _vals(n: int, scale: float = 4.0) -> np.ndarray:
    x = (np.random.default_rng(1).standard_normal(n) * scale).astype(np.float32)
    x[:10] = [0.0, -0.0, np.inf, -np.inf, np.nan, -5.6, -13.0, -20.0, 3e-8, 9.0]
    return x


def _ulp_close(got: np.ndarray, want: np.ndarray, dtype: str, ulps: Any = 1.0) -> None:
    """``got`` within ``ulps`` (a number or an array) of the dtype's spacing at ``want`` (NaN
    where ``want`` is)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    fin = np.isfinite(w)
    np.testing.assert_array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)])
    ulps = np.broadcast_to(ulps, w.shape)[fin]
    # spacing at |want|, at least that of the dtype's smallest normal (subnormals have fewer bits)
    t = HALF.get(dtype, np.float32)
    sp = np.spacing(np.maximum(np.abs(w[fin]), float(ml_dtypes.finfo(t).tiny)).astype(t))
    sp = sp.astype(np.float64)
    assert np.all(np.abs(g[fin] - w[fin]) <= ulps * sp), np.max(np.abs(g[fin] - w[fin]) / sp)


def _gelu_close(got: np.ndarray, x: np.ndarray, dtype: str) -> None:
    """GELU against torch: torch's 1 + erf(x / sqrt 2) has an absolute error up to ~3.6e-7
    |x| against the exact value (measured: its vectorized erf is good to 1.5e-7, and the sum
    rounds; it cancels to -0 below about -5.5), ember's Phi is within 6 float32 ulps of exact
    (docs/compiler.md): the tolerance is the sum, 4e-7 |x| + 6 float32 ulps, or one ulp of a
    half dtype (the float32 values then round once)."""
    tx = torch.from_numpy(x).to(getattr(torch, dtype))
    want = torch.nn.functional.gelu(tx).float().numpy()
    xf = tx.float().numpy()
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    fin = np.isfinite(w)
    sp = np.spacing(np.abs(w[fin]).astype(HALF.get(dtype, np.float32))).astype(np.float64)
    tol = sp * (6 if dtype == "float32" else 1) + 4e-7 * np.abs(xf[fin]) + 1e-30
    assert np.all(np.abs(g[fin] - w[fin]) <= tol)
    np.testing.assert_array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)])
    deep = (xf < -12.9) & np.isfinite(xf)   # -0 there, as torch (no subnormal work)
    assert np.all(got[deep] == 0) and np.all(np.signbit(got[deep]))


# ---------------------------------------------------------------- the library ember loads
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_eager_gelu_and_softmax_match_torch(dtype, threads):
    if _act_c._NATIVE.lib() is None:
        pytest.skip("no eager C kernels")
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        x = _vals(3 * 40_000 + 17)
        x[20:2000] = np.linspace(-16, -3, 1980)                 # the lower tail
        ex = ember.tensor(x).to(getattr(ember, dtype))
        y = F.gelu(ex)
        assert y.dtype == ex.dtype
        _gelu_close(y.float().numpy(), x, dtype)
        rows = x[:3 * 40_000].reshape(-1, 1000)
        rows[5, 3] = np.nan                                      # a NaN row stays NaN
        er = ember.tensor(rows).to(getattr(ember, dtype))
        s = F.softmax(er, -1)
        tr = torch.from_numpy(rows).to(getattr(torch, dtype))
        want = torch.softmax(tr.float(), -1).to(tr.dtype).float().numpy()
        _ulp_close(s.float().numpy(), want, dtype,
                   _softmax_ulps(tr.float().numpy(), dtype))
        assert np.isnan(s.float().numpy()[5]).all()
    finally:
        ember.set_num_threads(old)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_eager_equals_compiled(dtype):
    """eager's C kernels run the compiled kernels' math: the same bits (GELU and softmax)."""
    if _act_c._NATIVE.lib() is None:
        pytest.skip("no eager C kernels")
    x = ember.tensor(_vals(64 * 513)).to(getattr(ember, dtype))
    fc = ember.compile(lambda v: (F.gelu(v), F.softmax(v.view(64, 513), -1)), backend="c")
    cg, cs = fc(x)
    eg, es = F.gelu(x), F.softmax(x.view(64, 513), -1)
    for a, b in ((eg, cg), (es, cs)):
        bits = np.uint32 if dtype == "float32" else np.uint16
        np.testing.assert_array_equal(a.numpy().view(bits), b.numpy().view(bits))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_eager_half_arithmetic_is_torchs(dtype, threads):
    """add/sub/mul/div of half tensors (and with a Python number): one float32 operation and
    one rounding, torch's bits."""
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        a, b = _vals(200_003, 30.0), _vals(200_003)[::-1].copy()
        ed, td = getattr(ember, dtype), getattr(torch, dtype)
        ea, eb = ember.tensor(a).to(ed), ember.tensor(b).to(ed)
        ta, tb = torch.from_numpy(a).to(td), torch.from_numpy(b).to(td)
        cases = [(ea + eb, ta + tb), (ea - eb, ta - tb), (ea * eb, ta * tb), (ea / eb, ta / tb),
                 (ea + ea, ta + ta), (ea * 0.1, ta * 0.1), (2 - ea, 2 - ta), (1.5 / ea, 1.5 / ta)]
        for got, want in cases:
            assert got.dtype == ed
            g = got.numpy().view(np.uint16)
            w = want.view(torch.int16).numpy().view(np.uint16)
            nan = np.isnan(want.float().numpy())
            np.testing.assert_array_equal(np.isnan(got.float().numpy()), nan)
            np.testing.assert_array_equal(g[~nan], w[~nan])
    finally:
        ember.set_num_threads(old)


def test_numpy_path_flushes_the_gelu_tail_too():
    """Without the C kernels (EMBER_EAGER_C=0 or no compiler) GELU gives -0 below -12.9 too."""
    old = _act_c.set_enabled(False)
    try:
        x = np.linspace(-16, 3, 4001).astype(np.float32)
        y = F.gelu(ember.tensor(x)).numpy()
        _gelu_close(y, x, "float32")
    finally:
        _act_c.set_enabled(old)


# ---------------------------------------------------------------- each ISA, built explicitly
def _lib(march: str) -> str:
    from ember.compiler.c.codegen.prelude import build_test_lib
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    return build_test_lib(_act_c.SOURCE, target=TARGETS[march][0], load=False)


def _run_isa(lib, dtype: str, x: np.ndarray) -> tuple:
    sfx = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[dtype]
    xs = x.astype(HALF.get(dtype, np.float32))
    g = np.empty_like(xs)
    getattr(lib, f"ember_eager_gelu_{sfx}")(_P(g.ctypes.data), _P(xs.ctypes.data),
                                           ctypes.c_int64(xs.size))
    rows = xs[:(xs.size // 501) * 501].reshape(-1, 501)
    s = np.empty_like(rows)
    scratch = np.empty(2 * 501, np.float32)          # kept alive across the call
    extra = [_P(scratch.ctypes.data), ctypes.c_int(1)]   # streamed rows (large outputs)
    getattr(lib, f"ember_eager_softmax_{sfx}")(_P(s.ctypes.data), _P(rows.ctypes.data),
                                              ctypes.c_int64(rows.shape[0]),
                                              ctypes.c_int64(501), *extra)
    return g.astype(np.float32), s.astype(np.float32), rows


@pytest.mark.parametrize("march", list(TARGETS))
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_each_isa_matches_torch(march, dtype):
    path = _lib(march)
    if shutil.which("objdump"):
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path],
                             capture_output=True, text=True).stdout
        want = TARGETS[march][1]
        if want is None:
            assert "vcvtph2ps" not in asm
        else:
            assert re.search(want, asm)
    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    lib = ctypes.CDLL(path)
    x = _vals(501 * 37 + 5)
    g, s, rows = _run_isa(lib, dtype, x)
    _gelu_close(g, x, dtype)
    tr = torch.from_numpy(rows.astype(np.float32)).to(getattr(torch, dtype))
    want = torch.softmax(tr.float(), -1).to(tr.dtype).float().numpy()
    _ulp_close(s, want, dtype, _softmax_ulps(tr.float().numpy(), dtype))
    a, b = x.astype(HALF.get(dtype, np.float32)), x[::-1].astype(HALF.get(dtype, np.float32))
    if dtype != "float32":
        y = np.empty_like(a)
        getattr(lib, f"ember_eager_binary_{'f16' if dtype == 'float16' else 'bf16'}")(
            _P(y.ctypes.data), _P(a.ctypes.data), _P(b.ctypes.data), ctypes.c_float(0),
            ctypes.c_float(0), ctypes.c_int64(a.size), ctypes.c_int(2))
        w = (torch.from_numpy(a.astype(np.float32)).to(getattr(torch, dtype))
             * torch.from_numpy(b.astype(np.float32)).to(getattr(torch, dtype)))
        nan = np.isnan(w.float().numpy())
        np.testing.assert_array_equal(y.view(np.uint16)[~nan],
                                      w.view(torch.int16).numpy().view(np.uint16)[~nan])


def test_fma_isas_agree():
    """x86-64-v3 (8 lanes) and x86-64-v4 (16 lanes) run the same float operations per lane: the
    same bits on a host that runs both."""
    if not (host_can_run("x86-64-v3") and host_can_run("x86-64-v4")):
        pytest.skip("needs a host that runs x86-64-v4")
    x = _vals(501 * 11 + 3)
    r3 = _run_isa(ctypes.CDLL(_lib("x86-64-v3")), "float32", x)
    r4 = _run_isa(ctypes.CDLL(_lib("x86-64-v4")), "float32", x)
    for a, b in zip(r3[:2], r4[:2]):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


# ---------------------------------------------------------------- compiled: streamed half
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_streamed_half_pointwise_converts_in_blocks(monkeypatch, dtype):
    """A large float16/bfloat16 pointwise output streams (codegen/stream.py) and still converts
    in vector blocks (codegen/half.py), with torch's bits."""
    from ember.compiler.c import backend as cbackend
    from ember.compiler.c.codegen import stream
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 1)
    ember.compiler.reset()
    ed, td = getattr(ember, dtype), getattr(torch, dtype)
    a, b = _vals(3 * 4099, 30.0), _vals(3 * 4099)[::-1].copy()
    f = ember.compile(lambda x, y: x + y, backend="c", fullgraph=True)
    got = f(ember.tensor(a).to(ed), ember.tensor(b).to(ed))
    src = cbackend.last_compiled().source
    sfx = "f16" if dtype == "float16" else "bf16"
    assert "ember_stream_store(" in src and f"ember_{sfx}_load_n(" in src
    want = torch.from_numpy(a).to(td) + torch.from_numpy(b).to(td)
    nan = np.isnan(want.float().numpy())
    np.testing.assert_array_equal(got.numpy().view(np.uint16)[~nan],
                                  want.view(torch.int16).numpy().view(np.uint16)[~nan])


def test_gelu_core_is_x_times_phi():
    """The prelude's ember_gelu_erff (GELU's lean copy of Phi) gives x * ember_normal_cdff(x)
    bit for bit above the flush point, -0 below it, NaN for NaN and +-inf."""
    from ember.compiler.c.codegen.prelude import PRELUDE, build_test_lib
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    lib = build_test_lib(PRELUDE + r"""
void both(const float *x, float *g, float *ref, long n) {
    for (long i = 0; i < n; i++) { g[i] = ember_gelu_erff(x[i]);
                                   ref[i] = x[i] * ember_normal_cdff(x[i]); } }""")
    x = np.concatenate([np.linspace(-14, 14, 400_001, dtype=np.float32),
                        _vals(100_000, 5.0), np.float32([-12.9, 13.0, 1e30, -1e30])])
    g, ref = np.empty_like(x), np.empty_like(x)
    lib.both(_P(x.ctypes.data), _P(g.ctypes.data), _P(ref.ctypes.data), ctypes.c_long(x.size))
    live = (x >= np.float32(-12.9)) & np.isfinite(x)
    np.testing.assert_array_equal(g[live].view(np.uint32), ref[live].view(np.uint32))
    deep = (x < np.float32(-12.9)) & np.isfinite(x)
    assert np.all(g[deep] == 0) and np.all(np.signbit(g[deep]))
    assert np.isnan(g[~np.isfinite(x)]).all()


@pytest.mark.parametrize("n,grain", [(1, 4), (5, 4), (100, 7), (32768 * 9 + 3, 32768), (1000, 1)])
def test_split_covers_the_range_once_in_multiples_of_the_grain(n: int, grain: int) -> None:
    from ember.ops import _act_c
    old = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        seen: list = []
        _act_c._split(n, lambda lo, hi: seen.append((lo, hi)), grain)
    finally:
        ember.set_num_threads(old)
    seen.sort()
    assert seen[0][0] == 0 and seen[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(seen, seen[1:]))       # no gap, no overlap
    assert all(lo % grain == 0 for lo, _ in seen)                    # task starts keep the grain
    assert len(seen) <= max(1, 4 * 2) + 1                            # ~4 tasks per thread
