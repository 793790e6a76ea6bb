"""float16/bfloat16 block conversions of the C backend (``codegen/half.py``,
``csrc/half_block.h``), built explicitly for each x86-64 level whatever the host is: AVX-512
(``vcvtph2ps zmm``), F16C (x86-64-v3, ``ymm``) and none (x86-64: the portable helpers).  Each
must convert every float16 value and round floats to nearest even as NumPy and torch do, and
compiled float16/bfloat16 kernels must give torch's CPU results bit for bit."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build.toolchain import host_can_run
from ember.compiler.c.codegen import half as half_codegen
from ember.compiler.c.codegen.prelude import PRELUDE, build_test_lib

torch = pytest.importorskip("torch")

# (target flags, instruction that must appear in the library, or None: none of them may)
TARGETS = {
    "x86-64": (("-march=x86-64",), None),
    "x86-64-v3": (("-march=x86-64-v3", "-mno-avx512f"), r"vcvtph2ps [^\n]*,%ymm"),
    "x86-64-v4": (("-march=x86-64-v4",), r"vcvtph2ps [^\n]*,%zmm"),
}

_SRC = PRELUDE + half_codegen.HEADER + r"""
void t_f16_load(float *d, const uint16_t *s, int64_t n) { ember_f16_load_n(d, s, n); }
void t_f16_store(uint16_t *d, const float *s, int64_t n) { ember_f16_store_n(d, s, n); }
void t_bf16_load(float *d, const uint16_t *s, int64_t n) { ember_bf16_load_n(d, s, n); }
void t_bf16_store(uint16_t *d, const float *s, int64_t n) { ember_bf16_store_n(d, s, n); }
"""


def _lib(march: str):
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    return build_test_lib(_SRC, target=TARGETS[march][0], load=False)


def _call(lib, name, out, src):
    fn = getattr(lib, name)
    fn(out.ctypes.data_as(ctypes.c_void_p), src.ctypes.data_as(ctypes.c_void_p),
       ctypes.c_int64(src.size))
    return out


def _is_snan16(bits):
    return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0) & ((bits & 0x200) == 0)


def _floats_to_round() -> np.ndarray:
    """float32 values around every float16 rounding case: ties (to even, both ways), just
    above/below them, subnormal results, overflow to inf, inf, quiet NaN, signed zeros."""
    h = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h = h[np.isfinite(h)].astype(np.float32)
    nxt = np.nextafter(h.astype(np.float16), np.float16(np.inf)).astype(np.float32)
    mid = (h.astype(np.float64) + nxt.astype(np.float64)) / 2
    mid = mid[np.isfinite(mid)].astype(np.float32)          # exact ties in float32
    vals = [h, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf)),
            np.array([65504, 65519.99, 65520, 1e6, np.inf, -np.inf, np.nan, -0.0, 0.0,
                      1e-8, 2.98e-8, 2.99e-8, 6e-8], np.float32),
            np.random.default_rng(0).standard_normal(10007).astype(np.float32) * 300]
    return np.concatenate(vals)


@pytest.mark.parametrize("march", list(TARGETS))
def test_block_conversions_are_numpys_casts(march):
    path = _lib(march)
    want_insn = TARGETS[march][1]
    if shutil.which("objdump"):
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path],
                             capture_output=True, text=True).stdout
        if want_insn is None:
            assert "vcvtph2ps" not in asm and "vcvtps2ph" not in asm
        else:
            assert re.search(want_insn, asm) and "vcvtps2ph" in asm
    lib = ctypes.CDLL(path)
    bits = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    # float16 -> float: every value (odd count: the scalar tail too); F16C quiets a signalling
    # NaN as torch's vectorized conversion does, NumPy keeps it signalling
    got = _call(lib, "t_f16_load", np.empty(bits.size - 1, np.float32), bits[1:].copy())
    want = bits[1:].view(np.float16).astype(np.float32)
    keep = ~_is_snan16(bits[1:])
    np.testing.assert_array_equal(got.view(np.uint32)[keep], want.view(np.uint32)[keep])
    assert np.isnan(got[~keep]).all()
    # float -> float16: round to nearest even, overflow to inf, subnormals, quiet NaN
    x = _floats_to_round()
    got = _call(lib, "t_f16_store", np.empty(x.size, np.uint16), x)
    np.testing.assert_array_equal(got, x.astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(got, torch.from_numpy(x).half().view(torch.int16).numpy()
                                  .view(np.uint16))
    # bfloat16 both ways (ml_dtypes' casts)
    got = _call(lib, "t_bf16_load", np.empty(bits.size, np.float32), bits)
    want = bits.view(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    got = _call(lib, "t_bf16_store", np.empty(x.size, np.uint16), x)
    np.testing.assert_array_equal(got, x.astype(ml_dtypes.bfloat16).view(np.uint16))


def _torch_vals(n: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 6e-6, 70000.0, -1e-7]
    return x


@pytest.mark.parametrize("march", list(TARGETS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_compiled_half_kernels_match_torch(monkeypatch, march, dtype):
    """add, mul, a fused chain and softmax of float16/bfloat16 compiled for each level: the
    elementwise results are torch's bit for bit (one rounding of a float computation), the
    softmax rows within one ulp (the row sum runs in double in C, in float in torch)."""
    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    flags = TARGETS[march][0] + (() if march == "x86-64-v4" else ("-mno-avx512f",))
    monkeypatch.setattr(cbackend, "EXTRA_FLAGS", cbackend.EXTRA_FLAGS + flags)
    ed, td = getattr(ember, dtype), getattr(torch, dtype)
    n = 3 * 4099                                 # odd: blocks, vectors and scalar tails
    a, b = _torch_vals(n), np.random.default_rng(2).standard_normal(n).astype(np.float32)
    ea, eb = ember.tensor(a).to(ed), ember.tensor(b).to(ed)
    ta, tb = torch.tensor(a).to(td), torch.tensor(b).to(td)
    ember.compiler.reset()
    F = ember.nn.functional
    f = ember.compile(lambda x, y: (x + y, x * y, F.softmax(x.view(3, 4099), -1)),
                      backend="c", fullgraph=True)
    s, p, sm = f(ea, eb)
    cg = cbackend.last_compiled()
    assert cg.stats.fallback_count == 0
    assert f"ember_{'f16' if dtype == 'float16' else 'bf16'}_load_n(" in cg.source
    for got, want in ((s, ta + tb), (p, ta * tb)):   # NaN bits differ between torch's paths
        g, w = got.numpy().view(np.uint16), want.view(torch.int16).numpy().view(np.uint16)
        nan = np.isnan(want.float().numpy())
        np.testing.assert_array_equal(np.isnan(got.float().numpy()), nan)
        np.testing.assert_array_equal(g[~nan], w[~nan])
    want = torch.softmax(ta.view(3, 4099).float(), -1).to(td).float().numpy()
    got = sm.float().numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    fin = ~np.isnan(want)
    ulp = np.spacing(np.abs(want[fin]).astype(np.float16 if dtype == "float16" else
                                                ml_dtypes.bfloat16)).astype(np.float64)
    assert np.all(np.abs(got[fin].astype(np.float64) - want[fin]) <= ulp)


@pytest.mark.parametrize("march", list(TARGETS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_compiled_cast_to_half_rounds_once(monkeypatch, march, dtype):
    """A float32 value cast to float16/bfloat16 and stored (``to_float16``): the block store
    rounds the float32 value itself (no second rounding and widening before it,
    ``half.drop_store_rounding``), to torch's cast bit for bit: ties, overflow to inf,
    subnormals, signed zeros; the rounded value still feeds the ops that read it."""
    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    flags = TARGETS[march][0] + (() if march == "x86-64-v4" else ("-mno-avx512f",))
    monkeypatch.setattr(cbackend, "EXTRA_FLAGS", cbackend.EXTRA_FLAGS + flags)
    ed, td = getattr(ember, dtype), getattr(torch, dtype)
    x = _torch_vals(2 * 4099 + 5)
    ties = np.float32(1.0) + np.float32(2.0 ** -11) * np.arange(1, 9, dtype=np.float32)
    x[8:16] = ties if dtype == "float16" else np.float32(1.0) + np.float32(2.0 ** -8) * \
        np.arange(1, 9, dtype=np.float32)
    x[16:20] = [65519.0, 65520.0, 3e-8, -2.98e-8]
    ember.compiler.reset()
    f = ember.compile(lambda v: ((v * 3.0).to(ed), (v * 3.0).to(ed) * 2),
                      backend="c", fullgraph=True)
    h, h2 = f(ember.tensor(x))
    src = cbackend.last_compiled().source
    tx = torch.tensor(x) * 3.0
    for got, want in ((h, tx.to(td)), (h2, tx.to(td) * 2)):
        g, w = got.numpy().view(np.uint16), want.view(torch.int16).numpy().view(np.uint16)
        nan = np.isnan(want.float().numpy())
        np.testing.assert_array_equal(np.isnan(got.float().numpy()), nan)
        np.testing.assert_array_equal(g[~nan], w[~nan])
    stores = re.findall(r"hs\d+_\[j_\] = (\w+);", src)
    lets = dict(re.findall(r"const float (\w+) = \(float\)\((.*)\);", src))
    rnd = "ember_f16_to_f32(ember_to_f16(" if dtype == "float16" else \
        "ember_bf16_to_f32(ember_to_bf16("
    assert stores and all(not lets.get(s, "").startswith(rnd) for s in stores), stores
