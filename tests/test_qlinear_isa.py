"""The int8 kernel (ember/ops/csrc/qlinear_eager.c) compiled for each x86-64 level explicitly
(scalar, AVX2, AVX2 + AVX-VNNI, AVX-512BW, AVX-512 + VNNI), not only the host's -march=native:
exact int32 sums and the fused input quantization against NumPy."""

import ctypes
import platform
import shutil
import subprocess

import numpy as np
import pytest

from ember.ao.quantization.qtensor import quantize_array
from ember.ops import _native, _qlinear_c

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64")
                                or shutil.which("gcc") is None, reason="needs gcc on x86-64")

# -march flags -> the CPU flags the code needs; each level must select its own code path
_LEVELS = {
    ("-march=x86-64",): (),
    ("-march=x86-64-v3",): ("avx2", "fma"),
    ("-march=x86-64-v3", "-mavxvnni"): ("avx2", "fma", "avx_vnni"),
    ("-march=x86-64-v4",): ("avx512bw",),
    ("-march=x86-64-v4", "-mavx512vnni"): ("avx512bw", "avx512_vnni"),
}
_MARKER = {(): "scalar", ("avx2", "fma"): "vpmaddubsw", ("avx2", "fma", "avx_vnni"): "vpdpbusd",
           ("avx512bw",): "vpmaddubsw", ("avx512bw", "avx512_vnni"): "vpdpbusd"}


def _build(flags: tuple, tmp_path) -> ctypes.CDLL:  # noqa: ANN001
    src = tmp_path / "q.c"
    src.write_text(_native.csrc("qlinear_eager.c"))
    cmd = ["gcc", "-O3", *flags, "-ffp-contract=off", "-fno-math-errno", "-fPIC"]
    asm = subprocess.run([*cmd, "-S", str(src), "-o", "-"], check=True, capture_output=True,
                         text=True).stdout
    want = _MARKER[_LEVELS[flags]]
    if want == "scalar":
        assert "vpmaddubsw" not in asm and "vpdpbusd" not in asm
    else:
        assert want in asm, f"{flags} did not select its {want} path"
    lib_path = tmp_path / "q.so"
    subprocess.run([*cmd, "-shared", str(src), "-o", str(lib_path), "-lm"], check=True,
                   capture_output=True)
    lib = ctypes.CDLL(str(lib_path))
    lib.ember_eager_qlinear_packed.restype = ctypes.c_int
    lib.ember_eager_qlinear_packed.argtypes = \
        _qlinear_c._NATIVE.symbols["ember_eager_qlinear_packed"][1]
    return lib


@pytest.mark.parametrize("flags", list(_LEVELS), ids=lambda f: "+".join(f))
def test_qlinear_kernel_per_isa(flags: tuple, tmp_path) -> None:  # noqa: ANN001
    host = _native._cpu_flags().split()
    if any(f not in host for f in _LEVELS[flags]):
        pytest.skip(f"this CPU cannot run {' '.join(flags)}")
    lib = _build(flags, tmp_path)
    rng = np.random.default_rng(0)
    for n, k, m in [(7, 200, 9), (1, 31, 1), (70, 1100, 130), (19, 4, 50), (33, 384, 96)]:
        w = rng.integers(-128, 128, (m, k), dtype=np.int8)
        w[0, :] = -128                                 # the extreme products
        x = (rng.standard_normal((n, k)) * 2).astype(np.float32)
        x[0, :] = 100.0                                # clamps to qmax
        for per_row, qmax in ((False, 127), (True, 127), (True, 255)):  # 255: the split path
            scale = rng.uniform(0.01, 0.05, n if per_row else 1).astype(np.float32)
            zx = rng.integers(0, qmax + 1, n if per_row else 1)
            scale, zx = np.broadcast_to(scale, (n,)).copy(), np.broadcast_to(zx, (n,)).copy()
            _check(lib, x, w, scale, zx, qmax, rng)


def _check(lib: ctypes.CDLL, x: np.ndarray, w: np.ndarray, scale: np.ndarray, zx: np.ndarray,
           qmax: int, rng: np.random.Generator) -> None:
    n, k = x.shape
    m = w.shape[0]
    xq = quantize_array(x, scale[:, None], zx[:, None], 0, qmax, np.int64)
    packed = _qlinear_c.pack_weight(w)
    mp = packed.data.shape[0] * _qlinear_c.BLOCK
    wscale = np.zeros(mp, np.float32)
    wscale[:m] = rng.uniform(0.5, 2, m)
    bias = np.zeros(mp, np.float32)
    bias[:m] = rng.standard_normal(m)
    raw = (xq @ w.T.astype(np.int64) - zx[:, None] * w.sum(1, dtype=np.int64)).astype(np.float32)
    mult = scale[:, None] * wscale[None, :m]           # float32 product, as the kernel's
    inv = np.float32(1) / scale
    zpf = zx.astype(np.float32)
    for b in (bias, None):
        out = np.full((n, m + 3), -7.0, np.float32)    # ldo > m: nothing written past m
        rc = lib.ember_eager_qlinear_packed(
            x.ctypes.data, k, 0, n, k, inv.ctypes.data, zpf.ctypes.data, scale.ctypes.data,
            float(qmax), packed.data.ctypes.data, packed.kp, packed.colsum.ctypes.data,
            wscale.ctypes.data, None if b is None else b.ctypes.data, out.ctypes.data, m + 3,
            0, m)
        assert rc == 0
        # the epilogue is one fma: float64 product plus bias, rounded once to float32
        want = (raw.astype(np.float64) * mult
                + (0 if b is None else b[:m].astype(np.float64))).astype(np.float32)
        np.testing.assert_array_equal(out[:, :m], want)
        assert (out[:, m:] == -7.0).all()
