"""Eager float16/bfloat16 products through the half GEMM kernels (``ember/ops/_hgemm_c.py``,
``csrc/hgemm_eager.c``): matmul, bmm, linear with bias, transposed and batched operands,
forward and backward, against torch 2.13 and against the previous widen + float32 BLAS path.

Each ISA's build is made explicitly, whatever the host (baseline x86-64 without F16C,
x86-64-v3 = AVX2/F16C, x86-64-v4 = AVX-512 without AMX, x86-64-v4 + AMX-BF16), checked for its
instructions, and run where the host can; the library ember loads (``-march=native``) is what
the other tests exercise.

Tolerances: both sides accumulate exact products in float32 (in different orders) and round
once, so each is within ``u (|s| + e) + e`` of the exact value ``s`` (u: the half dtype's unit
roundoff, e = k * eps32 * (|a| @ |b|), float32's summation bound): two results differ by at
most twice that.  The exact value is computed in float64 from the half operands.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.compiler.c.build.toolchain import cpu_features, host_can_run
from ember.config import config
from ember.ops import _hgemm_c, _hsmall_c, _native

torch = pytest.importorskip("torch")
F = ember.nn.functional
HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
EPS32 = float(np.finfo(np.float32).eps)

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

# build: (flags after -march=native, host features needed, instructions the code must hold)
BUILDS = {
    "x86-64": (("-march=x86-64",), (), {"float16": (), "bfloat16": ()}),
    "x86-64-v3": (("-march=x86-64-v3", "-mno-avx512f"), ("avx2", "fma", "f16c"),
                  {"float16": ("vcvtph2ps", "vfmadd231ps", "ymm"),
                   "bfloat16": ("vfmadd231ps", "ymm")}),
    "x86-64-v4": (("-march=x86-64-v4", "-mprefer-vector-width=512"), ("avx512f", "avx512bw"),
                  {"float16": ("vcvtph2ps", "zmm"), "bfloat16": ("vfmadd231ps", "zmm")}),
    "x86-64-v4-amx": (("-march=x86-64-v4", "-mamx-tile", "-mamx-bf16"),
                      ("avx512f", "amx_tile", "amx_bf16"), {"bfloat16": ("tdpbf16ps",)}),
}
_MARCH = {"x86-64": "x86-64", "x86-64-v3": "x86-64-v3", "x86-64-v4": "x86-64-v4",
          "x86-64-v4-amx": "x86-64-v4"}


def _native_for(build: str, cache: str) -> _native.Native:
    flags = ("-fopenmp-simd",) + BUILDS[build][0]
    old = config.cache_dir
    config.cache_dir = cache
    try:
        nat = _native.Native(f"hgemm-{build}", _hgemm_c.SOURCE, _hgemm_c._SYMBOLS, flags=flags)
        nat.state["path"] = nat.path()
    finally:
        config.cache_dir = old
    return nat


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """Every build compiled once (whatever the host), each with the path of its library."""
    cache = str(tmp_path_factory.mktemp("hgemm"))
    out = {}
    for build in BUILDS:
        nat = _native_for(build, cache)
        old = config.cache_dir
        config.cache_dir = cache
        try:
            _native._build(nat.state["path"], nat.source, nat.flags)
        finally:
            config.cache_dir = old
        out[build] = nat
    return out


def _can_run(build: str) -> bool:
    feats = set(cpu_features().partition(":")[2].split(","))
    return host_can_run(_MARCH[build]) and set(BUILDS[build][1]) <= feats


@pytest.fixture(params=list(BUILDS))
def isa(request, built, monkeypatch):
    """ember's eager half products run on one build's kernels."""
    if not _can_run(request.param):
        pytest.skip(f"the host cannot run {request.param} code")
    nat = built[request.param]
    nat.state.update(lib=None, tried=False, enabled=True)
    monkeypatch.setattr(config, "cache_dir", os.path.dirname(os.path.dirname(nat.state["path"])))
    monkeypatch.setattr(_hgemm_c, "_NATIVE", nat)
    assert nat.lib() is not None
    return request.param


@pytest.mark.parametrize("build", list(BUILDS))
@pytest.mark.parametrize("dt", list(HALF))
def test_each_build_holds_its_instructions(built, build, dt):
    if shutil.which("objdump") is None:
        pytest.skip("no objdump")
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", built[build].state["path"]],
                         capture_output=True, text=True, check=True).stdout
    for ins in BUILDS[build][2].get(dt, ()):
        assert ins in asm, (build, dt, ins)
    if build != "x86-64-v4-amx":
        assert "tdpbf16ps" not in asm
    if build == "x86-64":
        assert "vcvtph2ps" not in asm and "zmm" not in asm


def _bound(a64: np.ndarray, b64: np.ndarray, dt: str, extra: np.ndarray | float = 0.0):
    """(exact, tolerance of one correct result) for half operands a, b (float64)."""
    exact = a64 @ b64 + extra
    k = a64.shape[-1]
    err = (k + 1) * EPS32 * (np.abs(a64) @ np.abs(b64) + np.abs(extra))
    u = float(ml_dtypes.finfo(HALF[dt]).eps) / 2
    tiny = float(ml_dtypes.finfo(HALF[dt]).smallest_subnormal)
    return exact, u * (np.abs(exact) + err) + err + tiny


def _close(got, exact, tol, factor=1.0):
    g = got.astype(np.float64)
    assert np.all(np.abs(g - exact) <= factor * tol), np.max(np.abs(g - exact) / tol)


def _vals(shape, seed, dt, scale=1.0):
    x = np.random.default_rng(seed).standard_normal(shape) * scale
    return x.astype(HALF[dt])


SHAPES = [((5, 3), (3, 7)), ((37, 801), (801, 1103)), ((130, 65), (65, 33)),
          ((257, 384), (384, 96)), ((2, 3, 29, 40), (2, 3, 40, 18)), ((6, 71, 16), (6, 16, 71))]


@pytest.mark.parametrize("dt", list(HALF))
@pytest.mark.parametrize("sa,sb", SHAPES)
@pytest.mark.parametrize("layout", ["plain", "a_t", "b_t", "both_t"])
def test_matmul_matches_torch_and_exact(isa, dt, sa, sb, layout):
    a, b = _vals(sa, 1, dt), _vals(sb, 2, dt)
    if layout in ("a_t", "both_t"):   # a transposed view: the same values, columns contiguous
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
    if layout in ("b_t", "both_t"):   # b seen as a linear layer's weight (B^T row by row)
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2)).swapaxes(-1, -2)
    ea, eb = ember.from_numpy(a), ember.from_numpy(b)
    got = (ea @ eb).numpy()
    assert got.dtype == HALF[dt] and got.shape == sa[:-1] + sb[-1:]
    exact, tol = _bound(a.astype(np.float64), b.astype(np.float64), dt)
    _close(got, exact, tol)
    ta = torch.from_numpy(a.astype(np.float32)).to(getattr(torch, dt))
    tb = torch.from_numpy(b.astype(np.float32)).to(getattr(torch, dt))
    _close(got, (ta @ tb).double().numpy(), tol, 2.0)


@pytest.mark.parametrize("dt", list(HALF))
@pytest.mark.parametrize("rows", [7, 300])
def test_linear_bias_and_bmm_match_torch(isa, dt, rows):
    x, w, bias = _vals((2, rows, 200), 3, dt), _vals((150, 200), 4, dt, 0.1), _vals(150, 5, dt)
    got = F.linear(ember.from_numpy(x), ember.from_numpy(w), ember.from_numpy(bias)).numpy()
    exact, tol = _bound(x.astype(np.float64), w.astype(np.float64).T, dt,
                        bias.astype(np.float64))
    _close(got, exact, tol)
    tt = [torch.from_numpy(v.astype(np.float32)).to(getattr(torch, dt)) for v in (x, w, bias)]
    _close(got, torch.nn.functional.linear(*tt).double().numpy(), tol, 2.0)
    q, k = _vals((12, rows, 32), 6, dt), _vals((12, rows, 32), 7, dt)
    s = ember.bmm(ember.from_numpy(q), ember.from_numpy(k).transpose(1, 2)).numpy()
    exact, tol = _bound(q.astype(np.float64), np.swapaxes(k.astype(np.float64), 1, 2), dt)
    _close(s, exact, tol)


@pytest.mark.parametrize("dt", list(HALF))
def test_grads_match_torch(isa, dt):
    """The vjps are the same products (g @ b^T, a^T @ g): gradients within the bound."""
    x, w, bias = _vals((3, 40, 96), 8, dt), _vals((72, 96), 9, dt, 0.1), _vals(72, 10, dt)
    g = _vals((3, 40, 72), 11, dt)
    ex, ew, eb = (ember.from_numpy(v).requires_grad_() for v in (x, w, bias))
    F.linear(ex, ew, eb).backward(ember.from_numpy(g))
    tx, tw, tb = (torch.from_numpy(v.astype(np.float32)).to(getattr(torch, dt))
                  .requires_grad_() for v in (x, w, bias))
    torch.nn.functional.linear(tx, tw, tb).backward(
        torch.from_numpy(g.astype(np.float32)).to(getattr(torch, dt)))
    g64, w64, x64 = (v.astype(np.float64) for v in (g, w, x))
    exact, tol = _bound(g64, w64, dt)
    _close(ex.grad.numpy(), exact, tol)
    _close(ex.grad.numpy(), tx.grad.double().numpy(), tol, 2.0)
    exact, tol = _bound(g64.reshape(-1, 72).T, x64.reshape(-1, 96), dt)
    _close(ew.grad.numpy(), exact, tol)
    _close(ew.grad.numpy(), tw.grad.double().numpy(), tol, 2.0)
    a, b = _vals((4, 33, 50), 12, dt), _vals((4, 50, 21), 13, dt)
    ea, eb = (ember.from_numpy(v).requires_grad_() for v in (a, b))
    gm = _vals((4, 33, 21), 14, dt)
    (ea @ eb).backward(ember.from_numpy(gm))
    ta, tb2 = (torch.from_numpy(v.astype(np.float32)).to(getattr(torch, dt)).requires_grad_()
               for v in (a, b))
    (ta @ tb2).backward(torch.from_numpy(gm.astype(np.float32)).to(getattr(torch, dt)))
    exact, tol = _bound(gm.astype(np.float64), np.swapaxes(b.astype(np.float64), 1, 2), dt)
    _close(ea.grad.numpy(), exact, tol)
    _close(ea.grad.numpy(), ta.grad.double().numpy(), tol, 2.0)
    exact, tol = _bound(np.swapaxes(a.astype(np.float64), 1, 2), gm.astype(np.float64), dt)
    _close(eb.grad.numpy(), exact, tol)
    _close(eb.grad.numpy(), tb2.grad.double().numpy(), tol, 2.0)


@pytest.mark.parametrize("dt", list(HALF))
def test_threads_and_batch_split_give_the_same_bits(isa, dt):
    """Threads split rows and columns, never k: every element sums in one order."""
    a, b = _vals((300, 1000), 15, dt), _vals((1000, 700), 16, dt)
    a3, b3 = _vals((5, 90, 200), 17, dt), _vals((5, 200, 60), 18, dt)
    old = ember.get_num_threads()
    try:
        res = []
        for n in (1, 2, 3):
            ember.set_num_threads(n)
            res.append([_hgemm_c.matmul(a, b), _hgemm_c.matmul(a3, b3)])
    finally:
        ember.set_num_threads(old)
    for r in res[1:]:
        for x, y in zip(r, res[0]):
            np.testing.assert_array_equal(x.view(np.uint16), y.view(np.uint16))
    # each batch entry alone gives the bits of the batched call
    one = np.stack([_hgemm_c.matmul(a3[i], b3[i]) for i in range(5)])
    np.testing.assert_array_equal(one.view(np.uint16), res[0][1].view(np.uint16))


@pytest.mark.parametrize("dt", list(HALF))
def test_close_to_the_widen_and_blas_path(isa, dt):
    """Within twice the bound of the previous path (float32 BLAS on widened copies): at most
    an ulp apart, for the values of a normal product."""
    a, b = _vals((200, 512), 19, dt), _vals((512, 300), 20, dt)
    new = ember.from_numpy(a) @ ember.from_numpy(b)
    old = _hgemm_c.set_enabled(False)
    try:
        ref = ember.from_numpy(a) @ ember.from_numpy(b)
    finally:
        _hgemm_c.set_enabled(old)
    exact, tol = _bound(a.astype(np.float64), b.astype(np.float64), dt)
    _close(new.numpy(), ref.numpy().astype(np.float64), tol, 2.0)
    spacing = np.spacing(np.abs(ref.numpy()).astype(HALF[dt])).astype(np.float64)
    assert np.all(np.abs(new.numpy().astype(np.float64) - ref.numpy()) <= spacing)


def test_amx_is_used_where_built_and_granted(isa):
    assert _hgemm_c.uses_amx() == (isa == "x86-64-v4-amx")


def test_small_rows_and_fallback_keep_the_float32_blas_path():
    """At most SMALL_M rows are not this kernel's (``_hsmall_c``'s, tests/test_hconv_eager_c.py);
    without C kernels products widen and call BLAS: the float32 product of the widened
    operands rounded once, bit for bit."""
    for rows, enabled in ((_hgemm_c.SMALL_M, True), (64, False)):
        a, b = _vals((rows, 300), 21, "bfloat16"), _vals((300, 77), 22, "bfloat16")
        assert (_hgemm_c.matmul(a, b) is None) == (rows <= _hgemm_c.SMALL_M)
        old, old_small = _hgemm_c.set_enabled(enabled), _hsmall_c.set_enabled(False)
        try:
            got = (ember.from_numpy(a) @ ember.from_numpy(b)).numpy()
        finally:
            _hgemm_c.set_enabled(old)
            _hsmall_c.set_enabled(old_small)
        want = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_empty_and_zero_k():
    for sa, sb in (((0, 4), (4, 5)), ((9, 0), (0, 6)), ((2, 0, 3), (2, 3, 4))):
        a, b = np.ones(sa, np.float16), np.ones(sb, np.float16)
        got = (ember.from_numpy(a) @ ember.from_numpy(b)).numpy()
        assert got.shape == sa[:-1] + sb[-1:] and not got.any()


@pytest.mark.parametrize("threads", [1, 2])
def test_panels_larger_than_the_kept_buffers(threads):
    """B panels over the 16 MiB kept per thread are allocated for the call and freed."""
    a, b = _vals((9, 1100), 23, "float16"), _vals((1100, 4100), 24, "float16")
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        for _ in range(2):
            got = _hgemm_c.matmul(a, b)
            exact, tol = _bound(a.astype(np.float64), b.astype(np.float64), "float16")
            _close(got, exact, tol)
    finally:
        ember.set_num_threads(old)
