"""The int8 kernel (ember/ops/csrc/qlinear_eager.c) compiled for each x86-64 level explicitly
(scalar, AVX2, AVX-512BW), not only the host's -march=native: exact int32 sums against NumPy."""

import ctypes
import platform
import shutil
import subprocess

import numpy as np
import pytest

from ember.ops import _native

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64")
                                or shutil.which("gcc") is None, reason="needs gcc on x86-64")

_LEVELS = {"x86-64": None, "x86-64-v3": "avx2", "x86-64-v4": "avx512bw"}


def _host_has(flag: str | None) -> bool:
    return flag is None or flag in _native._cpu_flags().split()


@pytest.mark.parametrize("march", list(_LEVELS))
def test_qlinear_kernel_per_isa(march: str, tmp_path) -> None:  # noqa: ANN001
    if not _host_has(_LEVELS[march]):
        pytest.skip(f"this CPU cannot run {march}")
    src = tmp_path / "q.c"
    src.write_text(_native.csrc("qlinear_eager.c"))
    lib_path = tmp_path / "q.so"
    subprocess.run(["gcc", "-O3", f"-march={march}", "-ffp-contract=off", "-fPIC", "-shared",
                    str(src), "-o", str(lib_path), "-lm"], check=True, capture_output=True)
    lib = ctypes.CDLL(str(lib_path))
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.ember_eager_qlinear.argtypes = [p, p, p, p, p, ctypes.c_int32, p, p, i64, i64, i64, i64,
                                        i64]
    rng = np.random.default_rng(0)
    for n, k, m in [(7, 200, 9), (1, 31, 1), (70, 1100, 130)]:
        x = rng.integers(0, 128, (n, k), dtype=np.uint8)
        w = rng.integers(-128, 128, (m, k), dtype=np.int8)
        w[0, :] = -128                                 # the extreme products
        x[0, :] = 127
        colsum = w.sum(axis=1, dtype=np.int64).astype(np.int32)
        mult = np.ones(m, np.float32)
        out = np.empty((n, m), np.float32)
        acc = np.empty((n, m), np.int32)
        lib.ember_eager_qlinear(x.ctypes.data, w.ctypes.data, colsum.ctypes.data,
                                mult.ctypes.data, None, 3, acc.ctypes.data, out.ctypes.data,
                                n, k, m, 0, m)
        want = x.astype(np.int64) @ w.T.astype(np.int64) - 3 * colsum.astype(np.int64)
        np.testing.assert_array_equal(out, want.astype(np.float32))
