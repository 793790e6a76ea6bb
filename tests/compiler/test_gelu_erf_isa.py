"""The prelude's exact GELU (``ember_gelu_erff``) per ISA level, whatever the host.

Built for AVX2 (x86-64-v3) and AVX-512 (x86-64-v4, 512-bit vectors) and run where the host can:
over a strided sample of all float32 bit patterns (normals, subnormals, +-0, +-inf, NaNs of
both signs) it gives ``x * ember_normal_cdff(x)`` bit for bit at and above the flush point
-12.9, -0 below it, NaN for NaN and +-inf; it matches torch's GELU within torch's own erf error
plus Phi's 6 ulp; and its loop vectorizes (the ISA's vector division and FMAs).
"""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest

from ember.compiler.c.build.toolchain import host_can_run

torch = pytest.importorskip("torch")

_ISAS = {"x86-64-v3": (("-march=x86-64-v3", "-mno-avx512f"), "ymm"),
         "x86-64-v4": (("-march=x86-64-v4", "-mprefer-vector-width=512"), "zmm")}
_SRC = r"""
void gelu(const float *restrict x, float *restrict g, long n) {
    for (long i = 0; i < n; i++) g[i] = ember_gelu_erff(x[i]); }
void ref(const float *restrict x, float *restrict r, long n) {
    for (long i = 0; i < n; i++) r[i] = x[i] * ember_normal_cdff(x[i]); }
"""


def _patterns() -> np.ndarray:
    """Every 4093rd float32 bit pattern (about a million, both signs, every exponent) plus
    the edges: +-0, the smallest subnormals, +-inf, the flush point and its neighbours."""
    u = np.arange(0, 1 << 32, 4093, dtype=np.uint64).astype(np.uint32)
    x = u.view(np.float32)
    edges = np.float32([0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, np.inf, -np.inf, np.nan,
                        -12.9, 12.9, 13.0, -13.0, 3.4e38, -3.4e38])
    flush = np.float32(-12.9)
    near = np.array([np.nextafter(flush, np.float32(-20)), np.nextafter(flush, np.float32(0))],
                    np.float32)
    return np.concatenate([x, edges, near])


@pytest.mark.parametrize("march", sorted(_ISAS))
def test_gelu_erf_per_isa(march: str) -> None:
    from ember.compiler.c.codegen.prelude import (
        CFLAGS,
        PRELUDE,
        _compiler,
        build_test_lib,
        include_dir,
    )
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    flags, reg = _ISAS[march]
    cflags = [f for f in CFLAGS if f not in ("-march=native", "-shared", "-fPIC")]
    asm = subprocess.run([cc, *cflags, *flags, "-I", include_dir(), "-S", "-o", "-", "-x", "c",
                          "-"], input=PRELUDE + _SRC, capture_output=True, text=True,
                         check=True).stdout
    body = asm[asm.index("gelu:"):asm.index("ref:")]
    assert re.search(rf"vdivps\s[^\n]*%{reg}", body), march          # vectorized
    assert re.search(rf"vfmadd\d+ps\s[^\n]*%{reg}", body), march
    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    lib = build_test_lib(PRELUDE + _SRC, target=flags)
    x = _patterns()
    g, r = np.empty_like(x), np.empty_like(x)
    P = ctypes.c_void_p
    lib.gelu(P(x.ctypes.data), P(g.ctypes.data), ctypes.c_long(x.size))
    lib.ref(P(x.ctypes.data), P(r.ctypes.data), ctypes.c_long(x.size))
    live = (x >= np.float32(-12.9)) & np.isfinite(x)
    np.testing.assert_array_equal(g[live].view(np.uint32), r[live].view(np.uint32))
    deep = (x < np.float32(-12.9)) & np.isfinite(x)
    assert deep.any() and np.all(g[deep] == 0) and np.all(np.signbit(g[deep]))
    assert np.isnan(g[~np.isfinite(x)]).all()
    # against torch: its 1 + erf(x / sqrt 2) is good to ~3.6e-7 |x| (and -0 below ~-5.5);
    # Phi is within 6 ulp of exact
    want = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    fin = np.isfinite(want) & live
    sp = np.spacing(np.abs(want[fin])).astype(np.float64)
    err = np.abs(g[fin].astype(np.float64) - want[fin])
    assert np.all(err <= 6 * sp + 4e-7 * np.abs(x[fin]) + 1e-37)
    tiny = fin & (np.abs(x) < 1e-30)           # subnormal and tiny inputs: x / 2, as torch
    np.testing.assert_array_equal(g[tiny], want[tiny])
