"""EMBER_C_MARCH (``config.c_march``): every C build (compiled graphs, eager C kernels) targets
the named ISA instead of ``-march=native``, and the target is part of the cache keys.

The half GEMM template chooses its path with the preprocessor (``codegen/gemm.py``): built
for x86-64-v3 (AVX2 + F16C: the widen-in-pack path on ymm), x86-64-v4 without AVX512-BF16
(the same path on zmm), AVX512-BF16 without AMX (the ``vdpbf16ps`` pair kernel, with
EMBER_C_BF16_DOT), and AMX-BF16 (``tdpbf16ps`` tiles).  Each level is built on every host
(and its instructions checked in the library); it runs, against torch 2.13's half products,
where the host's /proc/cpuinfo says it can.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import autotune, toolchain
from ember.compiler.c.codegen import gemm as gemm_codegen
from ember.config import config
from ember.errors import EmberValueError
from ember.ops import _native

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")
OBJDUMP = shutil.which("objdump")

# level -> (EMBER_C_MARCH, EMBER_C_BF16_DOT, /proc/cpuinfo flags it needs,
#           {dtype: (instructions the product's library must have, ... must not have)})
LEVELS = {
    "x86-64-v3": ("x86-64-v3", False, ("avx2", "fma", "f16c"),
                  {"bfloat16": (("ymm",), ("zmm", "vdpbf16ps", "tdpbf16ps")),
                   "float16": (("vcvtph2ps", "ymm"), ("zmm", "tdpbf16ps"))}),
    "x86-64-v4": ("x86-64-v4", False, ("avx512f", "avx512bw", "avx512vl", "avx512dq"),
                  {"bfloat16": (("zmm",), ("vdpbf16ps", "tdpbf16ps")),
                   "float16": (("vcvtph2ps", "zmm"), ("tdpbf16ps",))}),
    "avx512bf16-no-amx": ("x86-64-v4 -mavx512bf16", True,
                          ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"),
                          {"bfloat16": (("vdpbf16ps",), ("tdpbf16ps",)),
                           "float16": (("vcvtph2ps", "zmm"), ("vdpbf16ps", "tdpbf16ps"))}),
    "spr-no-amx": ("sapphirerapids -mno-amx-tile -mno-amx-bf16 -mno-amx-int8", False,
                   ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16",
                    "avx512_fp16"),
                   {"bfloat16": (("zmm",), ("vdpbf16ps", "tdpbf16ps")),
                    "float16": (("zmm",), ("tdpbf16ps",))}),
    "amx": ("x86-64-v4 -mavx512bf16 -mamx-tile -mamx-bf16", False,
            ("avx512f", "avx512bw", "avx512vl", "avx512dq", "amx_tile", "amx_bf16"),
            {"bfloat16": (("tdpbf16ps",), ()),
             "float16": (("vcvtph2ps", "zmm"), ())}),
}
TORCH = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def _host_flags() -> set:
    return set(toolchain.cpu_features().partition(":")[2].split(","))


@pytest.fixture
def level(request, monkeypatch, tmp_path):
    """config.c_march set to one level (and the template tiles it implies), fresh caches."""
    spec, dot, _, _ = LEVELS[request.param]
    monkeypatch.setattr(config, "c_march", spec)
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(cbackend, "_load_plan", lambda key: None)
    monkeypatch.setattr(gemm_codegen, "TEMPLATES", gemm_codegen.templates_for("native"))
    monkeypatch.setattr(gemm_codegen, "BF16_DOT", dot)
    autotune.CHOICES.clear()
    yield request.param
    autotune.CHOICES.clear()


def _operands(dt: str, m: int, k: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    tx, tw = torch.tensor(x).to(TORCH[dt]), torch.tensor(w).to(TORCH[dt])
    ex = ember.tensor(x).to(getattr(ember, dt))
    ew = ember.tensor(w).to(getattr(ember, dt))
    return ex, ew, tx, tw


def _matmul(x, w):
    return x @ w


# -- the override itself -------------------------------------------------------------------

def test_march_flags_parse_and_reject():
    assert _native.march_flags("") == ("-march=native",)
    assert _native.march_flags("x86-64-v3") == ("-march=x86-64-v3",)
    assert _native.march_flags("-march=x86-64-v4 -mavx512bf16") == ("-march=x86-64-v4",
                                                                     "-mavx512bf16")
    for bad in ("x86-64-v3 -ffast-math", "x86-64-v3 -O0", "v3;rm -rf /", "-mavx2",
                "x86-64-v3 -mfpmath=387"):
        with pytest.raises(EmberValueError, match=r"^\[EMBER_C_MARCH\]"):
            _native.march_flags(bad)


def test_compiler_rejects_unknown_target(monkeypatch):
    monkeypatch.setattr(config, "c_march", "no-such-cpu")
    with pytest.raises(EmberValueError, match="EMBER_C_MARCH"):
        _native.target_features()


def test_target_features_per_level():
    v3 = _native.target_features(_native.march_flags("x86-64-v3"))
    assert {"avx2", "fma", "f16c"} <= v3 and "avx512f" not in v3
    v4 = _native.target_features(_native.march_flags("x86-64-v4"))
    assert "avx512f" in v4 and "avx512_bf16" not in v4 and "amx_tile" not in v4
    spr = _native.target_features(_native.march_flags(LEVELS["spr-no-amx"][0]))
    assert {"avx512_bf16", "avx512_fp16"} <= spr and not {"amx_tile", "amx_bf16"} & spr


def test_override_reaches_flags_tiles_and_cache_keys(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    src = "int ember_t(int a) { return a + 1; }\n"
    native_path = toolchain.compile_library(src, name="t")
    native_eager = _native.Native("t", src, {}).path()
    monkeypatch.setattr(config, "c_march", "x86-64-v3")
    assert "-march=x86-64-v3" in toolchain.base_flags()
    assert "-march=native" not in toolchain.base_flags()
    assert "-march=x86-64-v3" in _native.build_flags()
    assert toolchain.machine_flags() == ()           # no 512-bit preference without AVX-512
    assert gemm_codegen.templates_for("native")["float32"][0] == "tmpl_6x16"
    v3_path = toolchain.compile_library(src, name="t")
    assert v3_path != native_path                    # its own cache entry
    manifest = json.loads(v3_path.with_suffix(".json").read_text())
    assert "-march=x86-64-v3" in manifest["flags"]
    assert _native.Native("t", src, {}).path() != native_eager


@pytest.mark.skipif(OBJDUMP is None, reason="needs objdump")
def test_eager_kernel_built_for_the_target(monkeypatch, tmp_path):
    """An eager C kernel built under EMBER_C_MARCH=x86-64-v3 has no AVX-512 instructions,
    whatever the host, and runs where the host has AVX2."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(config, "c_march", "x86-64-v3")
    src = ("void ember_t_scale(float *x, long n) "
           "{ for (long i = 0; i < n; i++) x[i] = x[i] * 3.0f + 1.0f; }\n")
    k = _native.Native("t", src, {})
    path = k.path()
    _native._build(path, src, _native.wide_vectors())
    dis = subprocess.run([OBJDUMP, "-d", path], capture_output=True, text=True).stdout
    assert "ymm" in dis and "zmm" not in dis


# -- the half GEMM template, one path per level --------------------------------------------

@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("level", list(LEVELS), indirect=True)
def test_half_gemm_builds_each_path(level, dt):
    """Built on every host: the unit of a half product, compiled for the level by the
    toolchain (the same flags ``ember.compile`` would use), holds that level's instructions."""
    ex, ew, _, _ = _operands(dt, 37, 53, 71)
    src = cbackend.codegen(_matmul, ex, ew)
    assert "ember_hpack_a_" in src or "ember_amxpack_a_" in src
    opts = cbackend.build_options()
    path = toolchain.compile_library(src, name="march_test", extra_flags=opts["extra_flags"],
                                     openmp=opts["openmp"])
    flags = json.loads(path.with_suffix(".json").read_text())["flags"]
    assert f"-march={config.c_march.split()[0]}" in flags
    if OBJDUMP is None:
        pytest.skip("needs objdump to check the instructions")
    dis = subprocess.run([OBJDUMP, "-d", str(path)], capture_output=True, text=True).stdout
    want, unwanted = LEVELS[level][3][dt]
    for w in want:
        assert w in dis, f"{level} {dt}: no {w}"
    for u in unwanted:
        assert u not in dis, f"{level} {dt}: {u} present"


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("mkn", [(37, 53, 71), (130, 400, 96), (150, 64, 1100)])
@pytest.mark.parametrize("level", list(LEVELS), indirect=True)
def test_half_gemm_runs_each_path(level, dt, mkn):
    """Runs where the host can (/proc/cpuinfo): ember's compiled half product equals torch's
    within one rounding of the dtype plus float32's bound for a K-term dot product."""
    needs = set(LEVELS[level][2])
    if not needs <= _host_flags():
        pytest.skip(f"this CPU lacks {sorted(needs - _host_flags())} to run {level} code")
    m, k, n = mkn
    ex, ew, tx, tw = _operands(dt, m, k, n, seed=m + k)
    got = ember.compile(_matmul, backend="c", fullgraph=True, dynamic=False)(ex, ew)
    cg = cbackend.last_compiled()
    gemms = [g for g in cg.program.kernels() if type(g).__name__ == "GemmKernel"]
    assert [g.impl for g in gemms] == [gemm_codegen.half_impl()]
    assert got.dtype == getattr(ember, dt)
    want = (tx @ tw).double().numpy()
    g = got.float().numpy().astype(np.float64)
    a, b = tx.double().numpy(), tw.double().numpy()
    eps_dt = float(torch.finfo(TORCH[dt]).eps)
    eps32 = float(np.finfo(np.float32).eps)
    bound = eps_dt * np.abs(want) + 2 * (k + 2) * eps32 * (np.abs(a) @ np.abs(b)) + 1e-30
    assert np.all(np.abs(g - want) <= bound), float(np.max(np.abs(g - want) - bound))
