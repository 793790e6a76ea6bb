"""Streamed pointwise kernels prefetch their inputs a page ahead (codegen/prefetch.py
``stream_prefetch``, codegen/stream.py).

The prefetches change no value: compiled graphs whose outputs stream (the threshold lowered so
small, odd sizes stream: tiles and prefetch blocks with tails) give the same bits with and
without streaming, at 1 and 2 threads, in float32, float16 and bfloat16 (GELU, and the float32
chain, match torch).  The kernel's loop still vectorizes with the prefetches in it: its
assembly, built for AVX2 (x86-64-v3) and AVX-512 (x86-64-v4) whatever the host, holds
``prefetcht0`` and the ISA's vector FMAs and division.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import ember
from ember.compiler.c.codegen import prefetch, stream

torch = pytest.importorskip("torch")

F = ember.nn.functional
_ISAS = {"x86-64-v3": (("-march=x86-64-v3", "-mno-avx512f"), "ymm"),
         "x86-64-v4": (("-march=x86-64-v4", "-mprefer-vector-width=512"), "zmm")}


def _chain(x, w, b):
    return F.gelu(x * w + b) * ember.sigmoid(x)


def _args(n: int, dtype: str) -> tuple:
    rng = np.random.default_rng(3)
    arrays = [(rng.standard_normal(n) * 3).astype(np.float32) for _ in range(3)]
    arrays[0][:6] = [np.inf, -np.inf, np.nan, -13.5, 0.0, -0.0]
    return tuple(ember.tensor(a).to(getattr(ember, dtype)) for a in arrays)


def _run(fn, args: tuple, threads: int) -> np.ndarray:
    ember.compiler.reset()
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        return ember.compile(fn, backend="c")(*args).float().numpy()
    finally:
        ember.set_num_threads(old)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["gelu", "chain"])
def test_prefetched_kernels_change_no_bits(name, dtype, monkeypatch) -> None:
    fn = (lambda x, w, b: F.gelu(x)) if name == "gelu" else _chain
    args = _args(3 * 2048 + 77, dtype)           # 3 tiles and a tail; blocks with a tail
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 0)
    plain = _run(fn, args, 1)
    assert "__builtin_prefetch(" not in ember.compiler.codegen(fn, *args)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 1)
    src = ember.compiler.codegen(fn, *args)
    assert "ember_stream_store(" in src
    # one line per input read at unit stride (x once for the chain, though read twice), per
    # cache line of a block
    lines = re.findall(r"__builtin_prefetch\((in\d+) \+ [^;]*\);", src)
    itemsize = np.dtype(np.float32 if dtype == "float32" else np.float16).itemsize
    block = 128 if dtype != "float32" else prefetch.STREAM_BLOCK_ELEMS
    inputs = 1 if name == "gelu" else 3
    assert len(lines) == inputs * block * itemsize // 64, lines
    assert len(set(lines)) == inputs
    tx, tw, tb = (torch.from_numpy(a.float().numpy()).to(getattr(torch, dtype)) for a in args)
    want = (torch.nn.functional.gelu(tx) if name == "gelu" else
            torch.nn.functional.gelu(tx * tw + tb) * torch.sigmoid(tx)).float().numpy()
    for threads in (1, 2):
        got = _run(fn, args, threads)
        np.testing.assert_array_equal(got.view(np.uint32), plain.view(np.uint32))
        if name == "chain" and dtype != "float32":
            continue      # the fused chain rounds once, torch per op: the bits above suffice
        fin = np.isfinite(want)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        tol = {"float32": (2e-5, 2e-6), "float16": (2e-3, 1e-5), "bfloat16": (1.6e-2, 1e-4)}
        np.testing.assert_allclose(got[fin], want[fin], rtol=tol[dtype][0], atol=tol[dtype][1])


@pytest.mark.parametrize("march", sorted(_ISAS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_prefetched_loop_vectorizes(march, dtype, monkeypatch) -> None:
    from ember.compiler.c.codegen.prelude import CFLAGS, _compiler, include_dir
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    flags, reg = _ISAS[march]
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 1)
    args = _args(5000, dtype)
    src = ember.compiler.codegen(lambda x, w, b: F.gelu(x), *args)
    cflags = [f for f in CFLAGS if f not in ("-march=native", "-shared", "-fPIC")]
    asm = subprocess.run([cc, *cflags, *flags, "-fopenmp", "-I", include_dir(), "-S", "-o", "-",
                          "-x", "c", "-"], input=src, capture_output=True, text=True,
                         check=True).stdout
    kernel = asm[asm.index("kernel0"):]
    assert "prefetcht0" in kernel
    assert re.search(rf"vfmadd\d+ps\s[^\n]*%{reg}", kernel), march   # the vector loop
    assert re.search(rf"vdivps\s[^\n]*%{reg}", kernel)     # GELU's division, vectorized too


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_unstreamed_large_inputs_prefetch_too(dtype, monkeypatch) -> None:
    """Kernels whose output does not stream prefetch inputs of FLAT_PREFETCH_MIN_BYTES or more
    (here lowered), with the same bits as without."""
    fn = _chain
    args = _args(4 * 64 + 13, dtype)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 0)
    plain = _run(fn, args, 1)
    assert "__builtin_prefetch(" not in ember.compiler.codegen(fn, *args)
    monkeypatch.setattr(prefetch, "FLAT_PREFETCH_MIN_BYTES", 1)
    src = ember.compiler.codegen(fn, *args)
    assert "__builtin_prefetch(" in src and "ember_stream_store(" not in src
    for threads in (1, 2):
        np.testing.assert_array_equal(_run(fn, args, threads).view(np.uint32),
                                      plain.view(np.uint32))
