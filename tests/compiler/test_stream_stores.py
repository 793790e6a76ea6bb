"""Non-temporal stores of large outputs (ember/compiler/c/codegen/stream.py).

The helper is built per ISA (AVX2 = x86-64-v3, AVX-512 = x86-64-v4) and run where the host
can: every (destination misalignment, length) copies exactly; its assembly holds streaming
stores.  Compiled graphs with the threshold lowered so that small outputs stream (odd sizes:
rows that start off a 64-byte boundary, tiles with tails) match torch, and give the same bits
as the same graphs built with plain stores, at 1 and 2 threads.
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build.toolchain import host_can_run
from ember.compiler.c.codegen import stream
from ember.compiler.c.codegen.prelude import build_test_lib

torch = pytest.importorskip("torch")

_ISAS = {"x86-64-v3": ("-march=x86-64-v3", "-mno-avx512f"),
         "x86-64-v4": ("-march=x86-64-v4", "-mprefer-vector-width=512")}
_COPY = "#include <stdint.h>\n#include <stddef.h>\n" + stream.HELPERS + r"""
void copy(void *dst, const void *src, size_t n) { ember_stream_store(dst, src, n);
                                                  ember_stream_fence(); }
"""


@pytest.mark.parametrize("march", sorted(_ISAS))
def test_stream_store_heads_and_tails(march: str) -> None:
    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    lib = build_test_lib(_COPY, target=_ISAS[march])
    lib.copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, 4096, dtype=np.uint8)
    for off in (0, 1, 4, 17, 32, 63):
        for n in (0, 1, 31, 32, 63, 64, 65, 127, 128, 200, 1000):
            raw = np.zeros(1200, np.uint8)
            base = -raw.ctypes.data % 64 + off        # dst misaligned by ``off``
            lib.copy(raw.ctypes.data + base, src.ctypes.data + 3, n)
            want = np.zeros(1200, np.uint8)
            want[base:base + n] = src[3:3 + n]
            assert np.array_equal(raw, want), (march, off, n)


@pytest.mark.parametrize("march", sorted(_ISAS))
def test_stream_store_assembly(march: str) -> None:
    from ember.compiler.c.codegen.prelude import CFLAGS, _compiler
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    flags = [f for f in CFLAGS if f not in ("-march=native", "-shared", "-fPIC")]
    asm = subprocess.run([cc, *flags, *_ISAS[march], "-S", "-o", "-", "-x", "c", "-"],
                         input=_COPY, capture_output=True, text=True, check=True).stdout
    reg = "zmm" if march == "x86-64-v4" else "ymm"
    assert any(w in asm for w in ("vmovntdq", "vmovntps")) and reg in asm, march
    assert "sfence" in asm


def _graphs() -> dict:
    F = ember.nn.functional
    return {
        "gelu chain": (lambda x, w, b: F.gelu(x * w + b) * ember.sigmoid(x), (40009,)),
        "softmax": (lambda x, w, b: ember.softmax(x, -1), (333, 100)),
        "log_softmax": (lambda x, w, b: ember.log_softmax(x, -1), (333, 100)),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, (100,), w[:100], b[:100]), (333, 100)),
        "softmax then pointwise": (lambda x, w, b: ember.softmax(x, -1) * 2 + 1, (130, 260)),
    }


def _torch(name: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
    TF = torch.nn.functional
    out = {"gelu chain": lambda: TF.gelu(tx * tw + tb) * torch.sigmoid(tx),
           "softmax": lambda: torch.softmax(tx, -1),
           "log_softmax": lambda: torch.log_softmax(tx, -1),
           "layer_norm": lambda: TF.layer_norm(tx, (100,), tw[:100], tb[:100]),
           "softmax then pointwise": lambda: torch.softmax(tx, -1) * 2 + 1}[name]()
    return out.numpy()


def _run(fn, args: tuple, threads: int) -> np.ndarray:
    ember.compiler.reset()
    ember.set_num_threads(threads)
    try:
        return ember.compile(fn, backend="c")(*args).numpy()
    finally:
        ember.set_num_threads(1)


@pytest.mark.parametrize("march", [None, *sorted(_ISAS)])
@pytest.mark.parametrize("name", sorted(_graphs()))
def test_streamed_graphs(name: str, march: str | None, monkeypatch) -> None:
    if march is not None:
        if not host_can_run(march):
            pytest.skip(f"the host cannot run {march} code")
        monkeypatch.setattr(cbackend, "EXTRA_FLAGS", cbackend.EXTRA_FLAGS + _ISAS[march])
    fn, shape = _graphs()[name]
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    n = shape[-1]
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    args = tuple(ember.tensor(a) for a in (x, w, b))
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 0)
    plain = _run(fn, args, 1)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 1)     # every output streams
    src = ember.compiler.codegen(fn, *args)
    assert "ember_stream_store(" in src and "ember_stream_fence()" in src
    for threads in (1, 2):
        got = _run(fn, args, threads)
        np.testing.assert_allclose(got, _torch(name, x, w, b), rtol=2e-5, atol=2e-6)
        assert np.array_equal(got, plain), threads   # streaming changes no bits


def test_threshold() -> None:
    assert stream.streams(stream.STREAM_MIN_BYTES) == (stream.STREAM_MIN_BYTES > 0)
    assert not stream.streams(None) and not stream.streams(1024)
