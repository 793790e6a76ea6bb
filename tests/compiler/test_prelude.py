"""The C prelude (compiler/c/codegen/csrc/ember_prelude.h): accuracy of its math against float64
references, vectorization of loops that call it, float16/bfloat16 casts bit for bit against
NumPy/ml_dtypes, and Philox streams bit for bit against the eager random ops.

The math is built for the host (``-march=native``, what the backend uses) and, on x86-64, for
two ISAs named explicitly whatever the host: ``x86-64-v3`` (AVX2 + FMA: AMD EPYC / znver3
machines) and ``skylake-avx512`` (with the backend's ``-mprefer-vector-width=512``).  gcc's
vectorization report and assembly are checked for each (gcc compiles for an ISA the host
lacks); values are checked for each build the host can run (/proc/cpuinfo flags), plus a
no-FMA build (``x86-64-v2``).  Every build is one gcc run (~1 s); every test skips without gcc.
"""

from __future__ import annotations

import ctypes
import platform
import re
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

from ember import dtypes as dt
from ember.compiler.c.codegen import prelude as cprelude
from ember.ops import _special
from ember.ops import random as R
from ember.ops._philox import random_words
from ember.ops.pointwise_math import _sigmoid

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not available")

MATH = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfc", "erfinv"]
# loops that must vectorize (erfinv needs sqrt, which vectorizes only with -fno-math-errno)
VEC = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfc"]
# more loops that must vectorize (float and double; normal_cdf: m_normal_cdff and double):
# helpers and template shapes of the activations
VEC_EXTRA = {
    "normal_cdf": "ember_normal_cdf(x[i])", "gelu_erf": "ember_gelu_erf(x[i])",
    "floor": "ember_floor(x[i])",
    "ceil": "ember_ceil(x[i])", "trunc": "ember_trunc(x[i])", "rint": "ember_rint(x[i])",
    "maximum": "ember_maximum(x[i], x[i] * 0.5f)",
    "clamp": "ember_minimum(ember_maximum(x[i] * 2, -1.0f), 1.0f)",
    "fmax": "ember_fmin(ember_fmax(x[i] * 2, -1.0f), 1.0f)",
    "xlogy": "ember_xlogy(x[i], x[i] + 2)",
    "logaddexp": "ember_logaddexp(x[i], x[i] * 0.5f)", "logit": "ember_logit(x[i], 1e-3)",
    "nan_to_num": "ember_nan_to_num(x[i], 0.0, 7.0, -7.0)",
    "elu": "ember_select(x[i] <= 0, ember_expm1(x[i]) * 1.5f, x[i])",
    "where": "ember_where(x[i] > 0, x[i] * 2, x[i] + 1)",
    "safe_div": "ember_where(x[i] == 0, ember_like(x[i], 0), 1 / x[i])",
    "gelu_tanh": "0.5f * x[i] * (1.0f + ember_tanh(0.79788456f * (x[i] + 0.044715f * x[i] "
                 "* x[i] * x[i])))",
}

HALF = {"m_f16_load": ("uint16_t", "float", "ember_f16_to_f32(x[i])"),
        "m_bf16_load": ("uint16_t", "float", "ember_bf16_to_f32(x[i])"),
        "m_f16_store": ("float", "uint16_t", "ember_to_f16(x[i])"),
        "m_bf16_store": ("float", "uint16_t", "ember_to_bf16(x[i])"),
        "m_f16_store_d": ("double", "uint16_t", "ember_to_f16(x[i])"),
        "m_bf16_store_d": ("double", "uint16_t", "ember_to_bf16(x[i])")}

_P = ctypes.c_void_p
_N = ctypes.c_long

# x86-64 targets checked explicitly whatever the host; the flags replace -march=native and the
# machine flags (toolchain.machine_flags: -mprefer-vector-width=512 where AVX-512F is present)
ISAS = {"x86-64-v3": ("-march=x86-64-v3",),
        "skylake-avx512": ("-march=skylake-avx512", "-mprefer-vector-width=512")}
NO_FMA = ("-march=x86-64-v2",)                       # SSE4.2: EMBER_FMAF is a*b + c there
X86 = platform.machine() in ("x86_64", "AMD64")
# /proc/cpuinfo flags a build needs to run ("abm" is Intel's name for lzcnt)
_V2 = {"sse4_2", "ssse3", "popcnt", "cx16"}
_V3 = _V2 | {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "abm"}
_NEEDS = {"no-fma": _V2, "x86-64-v3": _V3,
          "skylake-avx512": _V3 | {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}}


def _host_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def _can_run(build: str) -> bool:
    """Whether this host executes code built for ``build`` (a key of ISAS, or "no-fma")."""
    return X86 and _NEEDS[build] <= _host_flags()


def _source() -> tuple[str, dict]:
    lines = ['#include "ember_prelude.h"']
    where = {}
    for f in MATH:
        for s, t in (("f", "float"), ("d", "double")):
            if f in VEC:
                where[f + s] = len(lines) + 1
            lines.append(f"void m_{f}{s}(const {t}* restrict x, {t}* restrict y, long n) "
                         f"{{ for (long i = 0; i < n; i++) y[i] = ember_{f}{s}(x[i]); }}")
    where["normal_cdff"] = len(lines) + 1
    lines.append("void m_normal_cdff(const float* restrict x, float* restrict y, long n) "
                 "{ for (long i = 0; i < n; i++) y[i] = ember_normal_cdff(x[i]); }")
    for name, body in VEC_EXTRA.items():
        for s, t in (("f", "float"), ("d", "double")):
            if name + s in where:          # gcc would fold an identical loop into the first
                continue
            where[name + s] = len(lines) + 1
            lines.append(f"void v_{name}{s}(const {t}* restrict x, {t}* restrict y, long n) "
                         f"{{ for (long i = 0; i < n; i++) y[i] = {body}; }}")
    # float16/bfloat16 loads and stores (every low-precision kernel's) and the Philox stream
    for name, (tin, tout, body) in HALF.items():
        where[name] = len(lines) + 1
        lines.append(f"void {name}(const {tin}* restrict x, {tout}* restrict y, long n) "
                     f"{{ for (long i = 0; i < n; i++) y[i] = {body}; }}")
    where["philox"] = len(lines) + 1
    lines.append("void m_philox(uint64_t s, uint32_t* restrict y, long n) "
                 "{ for (long i = 0; i < n; i++) y[i] = ember_philox_word(s, (uint64_t)i); }")
    lines.append("")
    return "\n".join(lines) + "\n", where


def _source_rest() -> str:
    return '#include "ember_prelude.h"\n' + """
void philox_words(uint64_t seed, uint64_t offset, uint32_t* y, long n) {
    for (long i = 0; i < n; i++) y[i] = ember_philox_word(seed, offset + (uint64_t)i);
}
void philox_block(uint32_t* c, uint32_t k0, uint32_t k1) { ember_philox4x32(c, k0, k1); }
/* uniform(low, high) per dtype: 0 float32, 1 float16, 2 bfloat16, 3 float64 (out as bits) */
void rand_uniform(int kind, uint64_t seed, uint64_t offset, double low, double high, void* out, long n) {
    for (long i = 0; i < n; i++) {
        if (kind == 3) { ((double*)out)[i] = ember_rand_uniform_f64(seed, offset, i, low, high); continue; }
        uint32_t w = ember_philox_word(seed, offset + (uint64_t)i);
        double u = kind == 0 ? ember_unit_f32(w) : kind == 1 ? ember_unit_f16(w) : ember_unit_bf16(w);
        double v = low + (high - low) * u;
        if (kind == 0) ((float*)out)[i] = (float)v;
        else if (kind == 1) ((uint16_t*)out)[i] = ember_f64_to_f16(v);
        else ((uint16_t*)out)[i] = ember_f64_to_bf16(v);
    }
}
void rand_normal(int kind, uint64_t seed, uint64_t offset, double mean, double std, void* out, long n) {
    for (long i = 0; i < n; i++) {
        double z = kind == 3 ? ember_randn(seed, offset, i, 2, ember_unit_f32)
                             : ember_randn(seed, offset, i, 1, kind == 0 ? ember_unit_f32
                                                                : kind == 1 ? ember_unit_f16 : ember_unit_bf16);
        double v = mean + std * z;
        if (kind == 0) ((float*)out)[i] = (float)v;
        else if (kind == 1) ((uint16_t*)out)[i] = ember_f64_to_f16(v);
        else if (kind == 2) ((uint16_t*)out)[i] = ember_f64_to_bf16(v);
        else ((double*)out)[i] = v;
    }
}
void bernoulli(uint64_t seed, uint64_t offset, const double* p, bool* out, long n) {
    for (long i = 0; i < n; i++) out[i] = ember_bernoulli(seed, offset, (uint64_t)i, p[i]);
}
/* the dropout kernel the compiler would generate: x * (keep ? scale : 0), scale rounded to
 * the dtype first; float16 multiplies in float */
void dropout_f32(uint64_t seed, uint64_t offset, double p, const float* x, float* y, long n) {
    float scale = p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f;
    for (long i = 0; i < n; i++) y[i] = x[i] * (ember_dropout_keep(seed, offset, (uint64_t)i, p) ? scale : 0.0f);
}
void dropout_f64(uint64_t seed, uint64_t offset, double p, const double* x, double* y, long n) {
    double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
    for (long i = 0; i < n; i++) y[i] = x[i] * (ember_dropout_keep(seed, offset, (uint64_t)i, p) ? scale : 0.0);
}
void dropout_f16(uint64_t seed, uint64_t offset, double p, const uint16_t* x, uint16_t* y, long n) {
    float scale = ember_f16_to_f32(ember_f64_to_f16(p < 1 ? 1.0 / (1.0 - p) : 0.0));
    for (long i = 0; i < n; i++) {
        float k = ember_dropout_keep(seed, offset, (uint64_t)i, p) ? scale : 0.0f;
        y[i] = ember_f32_to_f16(ember_f16_to_f32(x[i]) * k);
    }
}
"""  # noqa: E501


class _Libs:
    """The math library (-O3, with gcc's vectorization report) and the rest, compiled at once
    (two gcc processes) and looked up by symbol name."""

    def __init__(self, math_lib, rest_lib) -> None:
        self._libs = (math_lib, rest_lib)

    def __getattr__(self, name: str):
        lib = self._libs[0] if name.startswith("m_") else self._libs[1]
        return getattr(lib, name)


@pytest.fixture(scope="module")
def built():
    from concurrent.futures import ThreadPoolExecutor
    src, where = _source()
    with ThreadPoolExecutor(2) as pool:
        math_job = pool.submit(cprelude.build_test_lib, src, opt_info=True)
        rest_job = pool.submit(cprelude.build_test_lib, _source_rest())
        (math_lib, info), rest_lib = math_job.result(), rest_job.result()
    return _Libs(math_lib, rest_lib), info, where


@pytest.fixture(scope="module")
def lib(built):
    return built[0]


def _call(lib, name: str, x: np.ndarray, out_dtype=None) -> np.ndarray:
    x = np.ascontiguousarray(x)
    y = np.empty(x.shape, out_dtype or x.dtype)
    getattr(lib, name)(x.ctypes.data_as(_P), y.ctypes.data_as(_P), _N(x.size))
    return y


# ----------------------------------------------------------------------------- accuracy
def ulp_error(y: np.ndarray, ref: np.ndarray, dtype) -> np.ndarray:
    """|y - ref| in ulps of ``dtype`` at the reference (0 where y is ref rounded to dtype or
    both are NaN)."""
    y64 = y.astype(np.float64)
    with np.errstate(all="ignore"):
        rr = ref.astype(dtype)
        tiny = np.finfo(dtype).smallest_subnormal
        sp = np.spacing(np.maximum(np.abs(rr), tiny)).astype(np.float64)
        err = np.abs(y64 - ref) / sp
    ok = (np.isnan(y) & np.isnan(ref)) | (y == rr) | (y64 == ref)
    err = np.where(ok, 0.0, err)
    return np.where(np.isnan(err), np.inf, err)


def _f32_sweep() -> np.ndarray:
    """Every 4093rd float32 bit pattern (1M values, ~2000 per binade over the whole line,
    NaNs included) plus special values and thresholds, at both ends (the vector loop body and
    its scalar remainder both see them)."""
    bits = np.arange(0, 2 ** 32, 4093, dtype=np.uint64).astype(np.uint32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38,
                        1.1754944e-38, 88.72283, 88.72284, -87.33654, -103.97207, -103.97208,
                        -104.0, -104.00001, -200.0, 89.0, 1.0, -1.0, 0.5, -0.5, 0.46875, 4.0,
                        9.0, 10.0, 0.625,
                        1e-8, -1e-8, 0.9999999, -0.9999999], np.float32)
    return np.concatenate([special, bits.view(np.float32), special])


def _f64_sample() -> np.ndarray:
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal(40000) * s for s in (1e-9, 1e-3, 0.3, 1, 3, 10, 100, 700)]
    parts.append(rng.uniform(-1, 1, 40000))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324,
                        2.2250738585072014e-308, 709.78, 709.79, -745.13, -745.14, -745.5,
                        -746.0, -746.1, -1e4, 0.5,
                        0.46875, 4.0, 27.0, 0.999999, -0.999999, 1.0, -1.0])
    return np.concatenate([special, *parts, special])       # in the vector body and remainder


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    """float64 references; erf/erfc/erfinv are the eager kernels (what compiled code must
    match), sigmoid the eager formula on float64."""
    import scipy.special as sp
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        return {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
                "tanh": np.tanh, "sigmoid": sp.expit, "erf": sp.erf, "erfc": sp.erfc,
                "erfinv": _special.erfinv}[name](x)


# max ulp measured (docs/compiler_prelude.md) with a little headroom; float32 vs the float64
# function, float64 vs NumPy/SciPy float64 (themselves within ~1 ulp) or the eager kernel
F32_ULP = {"exp": 1, "expm1": 1.5, "log": 1, "log1p": 1.5, "tanh": 1.5, "sigmoid": 2.5,
           "erf": 1.5, "erfc": 0.5, "erfinv": 0.5}
F64_ULP = {"exp": 1, "expm1": 1, "log": 1, "log1p": 1, "tanh": 2, "sigmoid": 2, "erf": 8,
           "erfc": 8, "erfinv": 8}


@pytest.fixture(scope="module")
def target_builds():
    """The math library per explicit target, built on first use: ``{build: (lib or path,
    gcc's vectorization report)}``; a library the host cannot run is compiled, not loaded."""
    cache: dict = {}

    def get(build: str):
        if build not in cache:
            flags = NO_FMA if build == "no-fma" else ISAS[build]
            cache[build] = cprelude.build_test_lib(_source()[0], opt_info=True, target=flags,
                                                   load=_can_run(build))
        return cache[build]
    return get


# value builds: the host's, the two explicit ISAs, and a target without FMA (x86-64-v2: the
# prelude's EMBER_FMAF falls back to a*b + c there, which must meet the same bounds)
BUILDS = ["native", *ISAS, "no-fma"]


def _math_lib(request, build: str):
    if build == "native":
        return request.getfixturevalue("lib")
    if not X86:
        pytest.skip(f"the {build} build is checked on x86-64")
    if not _can_run(build):
        pytest.skip(f"this CPU cannot run {build} code (needs {sorted(_NEEDS[build])})")
    return request.getfixturevalue("target_builds")(build)[0]


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("name", MATH)
def test_float32_accuracy(request, name, build):
    lib = _math_lib(request, build)
    x = _f32_sweep()
    y = _call(lib, f"m_{name}f", x)
    err = ulp_error(y, _reference(name, x), np.float32)
    worst = int(np.argmax(err))
    assert err.max() <= F32_ULP[name], (name, x[worst], y[worst], err.max())


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("name", MATH)
def test_float64_accuracy(request, name, build):
    lib = _math_lib(request, build)
    x = _f64_sample()
    y = _call(lib, f"m_{name}d", x)
    if name in ("erf", "erfc", "erfinv"):
        ref = getattr(_special, name)(x)       # Cody's algorithm, as the eager op
    elif name == "sigmoid":
        ref = _sigmoid(x)                      # SciPy's expit flushes tiny results to 0
    else:
        ref = _reference(name, x)
    err = ulp_error(y, ref, np.float64)
    worst = int(np.argmax(err))
    assert err.max() <= F64_ULP[name], (name, x[worst], y[worst], ref[worst], err.max())


@pytest.mark.parametrize("build", BUILDS)
def test_special_values_exact(request, build):
    lib = _math_lib(request, build)
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    reps = 13             # 65 values: through the vector loop body (up to 16 lanes) and remainder
    expect = {"exp": [1, 1, np.inf, 0, np.nan], "expm1": [0, -0.0, np.inf, -1, np.nan],
              "log": [-np.inf, -np.inf, np.inf, np.nan, np.nan],
              "log1p": [0, -0.0, np.inf, np.nan, np.nan], "tanh": [0, -0.0, 1, -1, np.nan],
              "sigmoid": [0.5, 0.5, 1, 0, np.nan], "erf": [0, -0.0, 1, -1, np.nan],
              "erfc": [1, 1, 0, 2, np.nan], "erfinv": [0, -0.0, np.nan, np.nan, np.nan]}
    for name, want in expect.items():
        for s, t in (("f", np.float32), ("d", np.float64)):
            got = _call(lib, f"m_{name}{s}", np.tile(x.astype(t), reps))
            w = np.tile(np.array(want, t), reps)
            np.testing.assert_array_equal(got, w, err_msg=name + s)
            # signs of zero results
            z = w == 0
            assert (np.signbit(got[z]) == np.signbit(w[z])).all(), name + s


TARGETS = ["native", *ISAS]


def _skip_unless_x86(target: str) -> None:
    if target != "native" and not X86:
        pytest.skip(f"-march={target} is an x86-64 target")


@pytest.mark.parametrize("target", TARGETS)
def test_vectorized(request, target):
    """gcc -O3 vectorizes loops over the prelude's math, float and double, for the host and for
    AVX2 (x86-64-v3) and AVX-512 explicitly: the math has no control flow (no ?: on floats),
    which gcc if-converts around FP arithmetic only with AVX-512's masked operations."""
    _skip_unless_x86(target)
    _, info, where = request.getfixturevalue("built")
    if target != "native":
        info = request.getfixturevalue("target_builds")(target)[1]
    done = {int(m.group(1)) for m in re.finditer(r"k\.c:(\d+):\d+: optimized: loop vectorized",
                                                  info)}
    missing = [f for f, line in where.items() if line not in done]
    assert not missing, f"not vectorized for {target}: {missing}\n{info[:2000]}"


def _vector_loop_asm(body: str, target: str = "native") -> str:
    """gcc -S (the backend's flags, or ``target``'s instead of -march=native and the machine
    flags) of ``for i: y[i] = body(x[i])``: the loop's assembly."""
    from ember.compiler.c.build.toolchain import machine_flags
    src = ('#include "ember_prelude.h"\nvoid k(const float* restrict x, float* restrict y, '
           f'long n) {{ for (long i = 0; i < n; i++) y[i] = {body}; }}\n')
    flags = [f for f in cprelude.CFLAGS if f != "-shared"]
    if target == "native":
        flags += list(machine_flags())
    else:
        flags = [f for f in flags if f != "-march=native"] + list(ISAS[target])
    out = subprocess.run(["gcc", *flags, "-I", cprelude.include_dir(), "-S", "-o", "-", "-x",
                          "c", "-"], input=src, capture_output=True, text=True, check=True)
    return out.stdout


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["exp", "tanh", "erf", "sigmoid", "normal_cdf"])
def test_vector_fma(name, target):
    """On an FMA target the helpers' polynomials are vector fused multiply-adds (the prelude
    calls __builtin_fmaf; user arithmetic stays unfused under -ffp-contract=off), and the loops
    use 256-bit vectors with AVX2, 512-bit ones with AVX-512 (toolchain.machine_flags)."""
    _skip_unless_x86(target)
    if target == "native" and not (X86 and "fma" in _host_flags()):
        pytest.skip("the native build is checked on x86-64 with FMA")
    asm = _vector_loop_asm(f"ember_{name}f(x[i])", target)
    assert re.search(r"\bvfn?m(add|sub)\d{3}ps\b", asm), asm[-3000:]
    if target == "skylake-avx512" or (target == "native" and "avx512f" in _host_flags()):
        assert "zmm" in asm, asm[-3000:]
    else:
        assert "ymm" in asm and "zmm" not in asm, asm[-3000:]


@pytest.mark.parametrize("target", TARGETS)
def test_fma_not_used_for_user_arithmetic(target):
    """-ffp-contract=off still holds outside the helpers: x * 3 + 1 is a multiply and an add."""
    _skip_unless_x86(target)
    asm = _vector_loop_asm("x[i] * 3.0f + 1.0f", target)
    assert not re.search(r"\bvfn?m(add|sub)", asm) and "vmulps" in asm, asm[-3000:]


@pytest.mark.parametrize("build", BUILDS)
def test_normal_cdf_float32_accuracy(request, build):
    """float Phi (gelu's factor) against SciPy's float64 ndtr: t R(t) exp(-x*x/2) with the exp
    argument carried exactly (x*x = hi + lo), so the lower tail keeps its relative accuracy
    (the former Numerical Recipes form exp(P(t) - z*z) had ~27 ulp at x = -5 from the rounded
    z*z; its bounds were 7 / 17 / 27 ulp above x = -1 / -3 / -5).  And against eager's
    normal_cdf_f32, the same formula: compiled gelu must stay within a few ulp of eager."""
    import scipy.special as sp
    lib = _math_lib(request, build)
    rng = np.random.default_rng(3)
    x = _f32_sweep()
    x = np.concatenate([x[np.isfinite(x) & (x > -12.0) & (x < 12.0)],
                        rng.uniform(-6, 6, 500_000).astype(np.float32)])
    y = _call(lib, "m_normal_cdff", x)
    err = ulp_error(y, sp.ndtr(x.astype(np.float64)), np.float32)
    worst = int(np.argmax(err))
    assert err.max() <= 6.5, (x[worst], y[worst], err.max())
    # relative error anywhere above the float32 normal range
    big = y > 1e-37
    rel = np.abs(y[big] / sp.ndtr(x[big].astype(np.float64)) - 1)
    assert rel.max() < 1e-6, rel.max()
    # eager: the same operations but the exp and (with fma) the Horner steps' roundings
    eager = _special.normal_cdf_f32(x)
    diff = ulp_error(y, eager.astype(np.float64), np.float32)
    assert diff.max() <= (4 if build == "no-fma" else 6), (x[np.argmax(diff)], diff.max())
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 15.0, -15.0, 40.0, -40.0, 1e-45,
                        -1e-45], np.float32)
    got = _call(lib, "m_normal_cdff", np.tile(special, 6))           # vector body too
    want = sp.ndtr(special.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got, np.tile(want, 6))
    np.testing.assert_array_equal(_special.normal_cdf_f32(special), want)


# ----------------------------------------------------------------------------- float16 / bfloat16
@pytest.mark.parametrize("build", BUILDS)
def test_half_loads_all_patterns(request, build):
    lib = _math_lib(request, build)
    h = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16)
    for name, np_t in (("m_f16_load", np.float16), ("m_bf16_load", ml_dtypes.bfloat16)):
        got = _call(lib, name, h, np.float32)
        want = h.view(np_t).astype(np.float32)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=name)


def _store_inputs() -> np.ndarray:
    # every half value, the midpoints between neighbours (ties) and just off them, plus
    # 2M random float32 bit patterns (NaN payloads, subnormals, overflow)
    rng = np.random.default_rng(1)
    parts = []
    for np_t in (np.float16, ml_dtypes.bfloat16):
        v = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(np_t).astype(np.float64)
        v = np.sort(v[np.isfinite(v)])
        mid = (v[:-1] + v[1:]) / 2
        parts += [v, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)]
    f32 = np.concatenate(parts).astype(np.float32)
    rnd = rng.integers(0, 2 ** 32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([f32, rnd])


@pytest.mark.parametrize("build", BUILDS)
def test_half_stores_match_numpy(request, build):
    lib = _math_lib(request, build)
    with np.errstate(all="ignore"):
        x = _store_inputs()
        for name, np_t in (("m_f16_store", np.float16), ("m_bf16_store", ml_dtypes.bfloat16)):
            got = _call(lib, name, x, np.uint16)
            want = x.astype(np_t).view(np.uint16)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (name, x[bad[:5]], got[bad[:5]], want[bad[:5]])


@pytest.mark.parametrize("build", BUILDS)
def test_half_stores_from_double_round_once(request, build):
    lib = _math_lib(request, build)
    rng = np.random.default_rng(2)
    with np.errstate(all="ignore"):
        x = np.concatenate([_store_inputs()[:400000].astype(np.float64),
                            rng.standard_normal(200000) * 100,
                            # just above a float16/bfloat16 tie: rounding via float32 would
                            # land on the tie and round to even
                            1.0 + 2.0 ** -11 + 2.0 ** -40 * np.arange(1, 100),
                            1.0 + 2.0 ** -8 + 2.0 ** -40 * np.arange(1, 100),
                            [1e300, -1e300, 1e-300, 65520.0, 65519.99, np.nan, -np.nan]])
        for name, np_t in (("m_f16_store_d", np.float16),
                           ("m_bf16_store_d", ml_dtypes.bfloat16)):
            got = _call(lib, name, x, np.uint16)
            want = x.astype(np_t).view(np.uint16)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (name, x[bad[:5]], got[bad[:5]], want[bad[:5]])


# ----------------------------------------------------------------------------- Philox
CASES = [(0, 0, 1), (0, 4, 7), (1234, 8, 33), (2 ** 63 + 5, 1 << 34, 100),
         (67280421310721, 2 ** 32 * 4 - 8, 50), (2 ** 64 - 1, 12, 1000)]


def test_philox_known_answers(lib):
    for ctr, key, want in [((0, 0, 0, 0), (0, 0), "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
                           ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2,
                            "408f276d 41c83b0e a20bc7c6 6d5451fd"),
                           ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
                            (0xA4093822, 0x299F31D0), "d16cfe09 94fdcceb 5001e420 24126ea1")]:
        c = (ctypes.c_uint32 * 4)(*ctr)
        lib.philox_block(c, ctypes.c_uint32(key[0]), ctypes.c_uint32(key[1]))
        assert " ".join(f"{v:08x}" for v in c) == want


def test_philox_words_match_eager(lib):
    for seed, offset, n in CASES:
        y = np.empty(n, np.uint32)
        lib.philox_words(ctypes.c_uint64(seed), ctypes.c_uint64(offset), y.ctypes.data_as(_P),
                         _N(n))
        np.testing.assert_array_equal(y, random_words(seed, offset, n))


KINDS = {0: dt.float32, 1: dt.float16, 2: dt.bfloat16, 3: dt.float64}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_uniform_and_normal_match_eager(lib, kind):
    d = KINDS[kind]
    store = np.float64 if kind == 3 else np.float32 if kind == 0 else np.uint16
    for seed, offset, n in CASES:
        for low, high in ((0.0, 1.0), (-3.0, 5.5)):
            out = np.empty(n, store)
            lib.rand_uniform(kind, ctypes.c_uint64(seed), ctypes.c_uint64(offset),
                             ctypes.c_double(low), ctypes.c_double(high), out.ctypes.data_as(_P),
                             _N(n))
            want = R.UNIFORM.eager(shape=(n,), dtype=d, low=low, high=high, seed=seed,
                                   offset=offset)
            np.testing.assert_array_equal(out.view(d.np), want)
        out = np.empty(n, store)
        lib.rand_normal(kind, ctypes.c_uint64(seed), ctypes.c_uint64(offset), ctypes.c_double(0.5),
                        ctypes.c_double(2.0), out.ctypes.data_as(_P), _N(n))
        want = R.NORMAL.eager(0.5, 2.0, shape=(n,), dtype=d, seed=seed, offset=offset)
        if kind == 3:
            # glibc's log/cos/sin may differ from NumPy's by an ulp (docs/random.md §5)
            np.testing.assert_array_max_ulp(out, want, maxulp=4)
        else:
            np.testing.assert_array_equal(out.view(d.np), want)


def test_bernoulli_matches_eager(lib):
    rng = np.random.default_rng(3)
    for seed, offset, n in CASES:
        p = rng.uniform(0, 1, n)
        p[:2] = [0.0, 1.0][:n]
        out = np.empty(n, np.bool_)
        lib.bernoulli(ctypes.c_uint64(seed), ctypes.c_uint64(offset), p.ctypes.data_as(_P),
                      out.ctypes.data_as(_P), _N(n))
        want = R.BERNOULLI.eager(p, dtype=dt.float64, seed=seed, offset=offset)
        np.testing.assert_array_equal(out, want.astype(bool))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_dropout_kernel_matches_eager(lib, dtype):
    import ember
    rng = np.random.default_rng(4)
    name = {np.float32: "dropout_f32", np.float64: "dropout_f64", np.float16: "dropout_f16"}
    for seed, offset, n in CASES:
        for p in (0.1, 0.5, 0.9):
            x = rng.standard_normal(n).astype(dtype)
            out = np.empty_like(x)
            getattr(lib, name[dtype])(ctypes.c_uint64(seed), ctypes.c_uint64(offset),
                                      ctypes.c_double(p), x.ctypes.data_as(_P),
                                      out.ctypes.data_as(_P), _N(n))
            want = R.DROPOUT.eager(x, p=p, seed=seed, offset=offset)
            np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
    # and through the public API: the generator's (seed, offset) before the call
    g = ember.Generator().manual_seed(77)
    g.set_offset(40)
    x = ember.randn(1000, generator=ember.Generator().manual_seed(1))
    seed, offset = g.initial_seed(), g.get_offset()
    with ember.random.fork_rng():
        ember.manual_seed(0)
        ember.default_generator.set_state(g.get_state())
        want = ember.nn.functional.dropout(x, 0.3).numpy()
    out = np.empty(1000, np.float32)
    xs = x.numpy()
    lib.dropout_f32(ctypes.c_uint64(seed), ctypes.c_uint64(offset), ctypes.c_double(0.3),
                    xs.ctypes.data_as(_P), out.ctypes.data_as(_P), _N(1000))
    np.testing.assert_array_equal(out, want)
