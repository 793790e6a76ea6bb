"""The stable C ABI (ember/include/ember/stable/) and ember.utils.cpp_extension: a C++
extension built with load_inline, boxed calls, errors, ABI versions, and a prebuilt version-1
binary that must keep loading (docs/extensions.md, "Stable C ABI")."""

from __future__ import annotations

import gc
import io
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.errors import CompileError, DTypeError, EmberRuntimeError, EmberValueError
from ember.library._custom_op import PACKETS
from ember.utils import cpp_extension
from ember.utils.cpp_extension import _host, _ops

torch = pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent
PREBUILT = HERE / "prebuilt" / "ember_stable_v1_demo.so"
needs_cxx = pytest.mark.skipif(cpp_extension._build.cxx_compiler() is None,
                               reason="no C++ compiler (g++): C++ extensions cannot be built")
needs_x86 = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                               reason="the prebuilt extension is an x86-64 binary")


@pytest.fixture(scope="module")
def ext():
    if cpp_extension._build.cxx_compiler() is None:
        pytest.skip("no C++ compiler (g++): C++ extensions cannot be built")
    return cpp_extension.load_inline("ember_stable_demo", (HERE / "demo_ext.cpp").read_text())


def _t(x: ember.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.array(x.numpy()))


# ------------------------------------------------------------------------ values
def test_load_inline_registers_ops_under_ember_ops(ext):
    assert "stabletest::mul_scalar" in ext.ops
    assert ember.ops.stabletest.mul_scalar is PACKETS["stabletest::mul_scalar"]
    assert ember.ops.stabletest.mul_scalar.schema == "(Tensor x, float c) -> Tensor"


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_mul_scalar_matches_torch(ext, layout):
    x = ember.randn(5, 6)
    x = {"contiguous": x, "transposed": x.t(), "sliced": x[1:, ::2]}[layout]
    want = _t(x) * 2.5
    for got in (ember.ops.stabletest.mul_scalar(x, 2.5), ext.mul_scalar(x, 2.5)):
        assert got.dtype == ember.float32 and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_amax_narrow_pad_match_torch(ext):
    x = ember.randn(4, 7)
    got = ember.ops.stabletest.window_max(x, 2, 3, 2)
    want = torch.nn.functional.pad(torch.amax(_t(x).narrow(-1, 2, 3), -1), (2, 2))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_tensor_accessors_and_ops_match_torch(ext):
    base = ember.arange(20, dtype=ember.float32).reshape(4, 5)
    x = base[1:, 2:]
    t, z, stride0, offset = ember.ops.stabletest.layout_info(x)
    tx = _t(base)[1:, 2:]
    np.testing.assert_array_equal(t.numpy(), tx.transpose(0, 1).clone().numpy())
    assert z.dtype == ember.float64 and tuple(z.shape) == tuple(tx.shape)
    np.testing.assert_array_equal(z.numpy(), tx.new_zeros(tx.shape, dtype=torch.float64)
                                  .fill_(2.0).numpy())
    assert (stride0, offset) == (tx.stride(0), tx.storage_offset()) == (5, 7)
    assert ember.ops.stabletest.dl_info(x) == (2, 32, 1, 28)  # kDLFloat, 32 bits, kDLCPU


def test_copy_broadcasts_and_converts_like_torch(ext):
    src = ember.tensor([1.7, -2.2, 3.9, 250.0])
    got = ember.ops.stabletest.copy_into(ember.zeros(2, 4, dtype=ember.int32), src)
    want = torch.zeros(2, 4, dtype=torch.int32).copy_(_t(src))
    assert got.dtype == ember.int32
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    half = ember.ops.stabletest.copy_into(ember.zeros(3, dtype=ember.bfloat16),
                                          ember.tensor([1.0039, -3.3, 7.1]))
    want = torch.zeros(3, dtype=torch.bfloat16).copy_(torch.tensor([1.0039, -3.3, 7.1]))
    np.testing.assert_array_equal(half.float().numpy(), want.float().numpy())


def test_zero_dim_and_empty_tensors(ext):
    s = ember.tensor(3.0)
    got = ember.ops.stabletest.mul_scalar(s, 2.0)
    assert tuple(got.shape) == () and got.item() == 6.0
    e = ember.ones(0, 3)
    assert tuple(ember.ops.stabletest.mul_scalar(e, 2.0).shape) == (0, 3)


def test_loading_twice_registers_once(ext):
    again = cpp_extension.load_inline("ember_stable_demo", (HERE / "demo_ext.cpp").read_text())
    assert again is ext
    assert cpp_extension.load_inline("ember_stable_demo", (HERE / "demo_ext.cpp").read_text(),
                                     is_python_module=False) is None


def test_stream_and_device_guard_on_cpu(ext):
    assert ember.ops.stabletest.stream_id(ember.ones(2)) == 0
    with pytest.raises(EmberValueError, match=r"^\[stabletest::guard_bad\] DeviceGuard: device "
                       "index 3 is not available"):
        ember.ops.stabletest.guard_bad(ember.ones(2))


def test_optional_list_string_dtype_arguments(ext):
    x, y = ember.randn(3, 4, 2), ember.randn(3, 4, 2)
    out, n, f, b = ember.ops.stabletest.options(x, None, [0, 2], "x", None, True)
    assert (n, f, b) == (2, 1.5, False) and out.dtype == ember.float32
    np.testing.assert_array_equal(out.numpy(), torch.amax(_t(x), (0, 2)).numpy())
    out, n, f, b = ember.ops.stabletest.options(x, y, [-1], "y", ember.float64, False)
    assert (n, f, b) == (1, -2.5, True) and out.dtype == ember.float64
    np.testing.assert_array_equal(out.numpy(), torch.amax(_t(y), -1).double().numpy())


def test_raw_boxed_kernel(ext):
    x = ember.randn(3, 2)
    np.testing.assert_allclose(ember.ops.stabletest.add_scalar(x, 1.5).numpy(),
                               (_t(x) + 1.5).numpy(), rtol=1e-6)


def test_calls_from_threads(ext):
    # the GIL is released around the kernel: threads call concurrently, each with its buffers
    from concurrent.futures import ThreadPoolExecutor
    xs = [ember.randn(50, 7) for _ in range(8)]

    def work(x):
        return [ext.mul_scalar(x, 3.0) for _ in range(50)][-1]

    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(work, xs))
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out.numpy(), (_t(x) * 3.0).numpy(), rtol=1e-6)


def test_memory_a_kernel_keeps_stays_alive(ext):
    x = ember.arange(6, dtype=ember.float32) * 3
    assert ember.ops.stabletest.stash(x) == 6
    del x
    gc.collect()
    ember.ones(1000) * 7  # reuse freed memory if it was freed
    np.testing.assert_array_equal(ember.ops.stabletest.peek(ember.ones(1)).numpy(),
                                  np.arange(6, dtype=np.float32) * 3)


# ------------------------------------------------------------------------ as custom ops
def test_compile_runs_the_op_as_one_extern_node(ext):
    op = ember.ops.stabletest.mul_scalar
    ember.library.register_fake("stabletest::mul_scalar", lambda x, c: ember.empty_like(x))

    def f(x):
        return op(x, 3.0) + 1

    x = ember.randn(6)
    got = ember.compile(f, fullgraph=True)(x)
    np.testing.assert_allclose(got.numpy(), (_t(x) * 3.0 + 1).numpy(), rtol=1e-6)
    ex = ember.compiler.explain(f)(x)
    assert ex.graph_break_count == 0
    assert [e[0] for e in ex.externs] == [op.opdef.name]


def test_export_keeps_the_op(ext):
    ember.library.register_fake("stabletest::mul_scalar", lambda x, c: ember.empty_like(x))
    op = ember.ops.stabletest.mul_scalar

    class M(ember.nn.Module):
        def forward(self, x):
            return op(x, 0.5) * 2

    x = ember.randn(4)
    ep = ember.export.export(M(), (x,))
    assert any(n.target is op.opdef for n in ep.graph.nodes if n.op == "call_function")
    np.testing.assert_allclose(ep.module()(x).numpy(), (_t(x) * 0.5 * 2).numpy(), rtol=1e-6)
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    ep2 = ember.export.load(buf)  # the extension is loaded, so its op resolves by name
    np.testing.assert_allclose(ep2.module()(x).numpy(), (_t(x) * 0.5 * 2).numpy(), rtol=1e-6)


def test_autograd_registered_from_python_and_opcheck(ext):
    def setup_context(ctx, inputs, output):
        ctx.c = inputs[1]

    def backward(ctx, grad):
        return ember.ops.stabletest.mul_scalar(grad, ctx.c), None

    ember.library.register_fake("stabletest::mul_scalar", lambda x, c: ember.empty_like(x))
    ember.library.register_autograd("stabletest::mul_scalar", backward,
                                    setup_context=setup_context)
    x0 = np.random.default_rng(0).standard_normal(5).astype(np.float32)
    x = ember.tensor(x0, requires_grad=True)
    (ember.ops.stabletest.mul_scalar(x, 1.5) ** 2).sum().backward()
    tx = torch.tensor(x0, requires_grad=True)
    ((tx * 1.5) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
    result = ember.library.opcheck(ember.ops.stabletest.mul_scalar, (ember.randn(3), 2.0))
    assert set(result.values()) == {"SUCCESS"}


# ------------------------------------------------------------------------ errors
def test_check_failure_names_the_op(ext):
    with pytest.raises(EmberRuntimeError, match=r"^\[stabletest::mul_scalar\] mul_scalar "
                       r"expects a float32 tensor, got scalar type 7"):
        ember.ops.stabletest.mul_scalar(ember.ones(3, dtype=ember.float64), 2.0)


def test_schema_and_function_arity_mismatch(ext):
    with pytest.raises(EmberValueError, match=r"\[stabletest::bad_arity\] the boxed kernel "
                       r"takes 1 arguments .* schema gives 2 arguments"):
        ember.ops.stabletest.bad_arity(ember.ones(2), 1.0)


def test_wrong_python_arity_and_types(ext):
    with pytest.raises(TypeError, match="stabletest::mul_scalar"):
        ember.ops.stabletest.mul_scalar(ember.ones(2))
    with pytest.raises(TypeError, match=r"\[stabletest::mul_scalar\] takes 2 arguments"):
        ext.mul_scalar(ember.ones(2), 1.0, 2.0)
    with pytest.raises(TypeError, match="must be a Tensor"):
        ext.mul_scalar([1.0], 1.0)


def test_stable_op_errors_surface_with_torch_text(ext):
    x = ember.ones(2, 4)
    with pytest.raises(EmberRuntimeError, match=r"\[stabletest::window_max\] narrow: start "
                       r"\(3\) \+ length \(4\) exceeds dimension size \(4\)"):
        ember.ops.stabletest.window_max(x, 3, 4, 1)
    with pytest.raises(RuntimeError):
        torch.ones(2, 4).narrow(-1, 3, 4)
    # an error inside an op ember computes (amax of an empty dim) comes back through C
    # (ember's amax names the wrapped dim, 1; torch the given one, -1)
    with pytest.raises(IndexError, match=r"^\[stabletest::window_max\] \[amax\] amax\(\): "
                       "Expected reduction dim 1 to have non-zero size"):
        ember.ops.stabletest.window_max(x, 1, 0, 1)
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim -1 to have non-zero"):
        torch.amax(torch.ones(2, 4).narrow(-1, 1, 0), -1)


# ------------------------------------------------------------------------ versions
def test_extension_built_for_newer_abi_is_refused(tmp_path):
    src = tmp_path / "future.c"
    src.write_text(
        '#include <ember/stable/c/library.h>\n'
        '__attribute__((used)) static const char tag[] = "EMBER_STABLE_ABI_TARGET:99;";\n'
        'static void k(StableIValue* s, uint64_t a, uint64_t o) { (void)s; (void)a; (void)o; }\n'
        'EMBER_STABLE_C_LIBRARY(future_ns, lib) {\n'
        '  ember_stable_library_def(lib, "op(Tensor x) -> Tensor");\n}\n'
        'EMBER_STABLE_C_LIBRARY_IMPL(future_ns, CPU, lib) {\n'
        '  ember_stable_library_impl(lib, "op", k, 0);\n}\n')
    with pytest.raises(EmberRuntimeError, match=r"built for ember stable ABI version 99, newer "
                       rf"than this ember's version {_host.abi_version()}; it was not loaded"):
        cpp_extension.load("future_ext", [str(src)], build_directory=str(tmp_path))
    assert "future_ns::op" not in PACKETS


@needs_cxx
def test_target_newer_than_headers_does_not_compile(tmp_path):
    with pytest.raises(CompileError, match="EMBER_TARGET_VERSION is newer than the ember "
                       "stable ABI"):
        target = f"-DEMBER_TARGET_VERSION={_host.abi_version() + 1}"
        cpp_extension.load_inline("too_new", "", build_directory=str(tmp_path),
                                  extra_cflags=[target])


V2_SRC = """
using ember::stable::Tensor;
Tensor grid(const Tensor& x, int64_t rows) {
  Tensor e = ember::stable::empty({rows, x.numel() / rows}, ember::stable::kDouble);
  ember::stable::copy_(e, ember::stable::reshape(x, {rows, -1}));
  return e;
}
EMBER_STABLE_LIBRARY(stable_v2test, m) { m.def("grid(Tensor x, int rows) -> Tensor"); }
EMBER_STABLE_LIBRARY_IMPL(stable_v2test, CPU, m) { m.impl("grid", EMBER_BOX(&grid)); }
"""


@needs_cxx
def test_target_version_compiles_out_newer_apis(tmp_path):
    with pytest.raises(CompileError, match="empty"):
        cpp_extension.load_inline("v2_as_v1", V2_SRC, build_directory=str(tmp_path),
                                  extra_cflags=["-DEMBER_TARGET_VERSION=1"])
    ext = cpp_extension.load_inline("v2_api", V2_SRC, build_directory=str(tmp_path / "v2"),
                                    extra_cflags=["-DEMBER_TARGET_VERSION=2"])
    assert _ops.target_versions(ext.__file__) == [2, 2]
    x = ember.arange(6, dtype=ember.float32)
    got = ember.ops.stable_v2test.grid(x, 2)
    assert got.dtype == ember.float64
    np.testing.assert_array_equal(got.numpy(), _t(x).reshape(2, -1).double().numpy())


@needs_x86
def test_prebuilt_v1_binary_loads_and_runs():
    assert _ops.target_versions(PREBUILT) == [1, 1]
    assert _host.abi_version() >= 1
    ops = cpp_extension.load_library(PREBUILT)
    assert sorted(ops) == ["stable_v1::info", "stable_v1::row_amax_padded",
                           "stable_v1::scale_add", "stable_v1::transpose_plus_one"]
    x = ember.randn(3, 5)
    np.testing.assert_allclose(ember.ops.stable_v1.scale_add(x, 2.0, -1.0).numpy(),
                               (_t(x) * 2.0 - 1.0).numpy(), rtol=1e-6)
    xd = x.double().t()
    np.testing.assert_allclose(ember.ops.stable_v1.scale_add(xd, 0.5, 3.0).numpy(),
                               (_t(xd) * 0.5 + 3.0).numpy(), rtol=1e-12)
    want = torch.nn.functional.pad(torch.amax(_t(x)[:, 1:], -1), (2, 2), value=-1.0)
    np.testing.assert_array_equal(ember.ops.stable_v1.row_amax_padded(x, 2).numpy(),
                                  want.numpy())
    tx = _t(x)[1:, ::2]
    assert ember.ops.stable_v1.info(x[1:, ::2]) == (
        2, tx.numel(), 4, tx.is_contiguous(), tx.storage_offset(), 0)
    np.testing.assert_array_equal(ember.ops.stable_v1.transpose_plus_one(x).numpy(),
                                  (_t(x).t().double() + 1).numpy())
    with pytest.raises(EmberRuntimeError, match=r"\[stable_v1::scale_add\] scale_add: "
                       "expected a float32 or float64"):
        ember.ops.stable_v1.scale_add(ember.ones(2, dtype=ember.int64), 1.0, 1.0)


def _nm(path: Path, *flags: str) -> set[str]:
    out = subprocess.run(["nm", "-D", *flags, str(path)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


@needs_x86
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_abi_symbols_are_kept_and_extensions_need_no_python():
    listed = {}
    for line in (HERE / "abi_symbols.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            version, name = line.split()
            listed[name] = int(version)
    header = (_host.INCLUDE / "ember" / "stable" / "c" / "shim.h").read_text()
    assert all(f"{name}(" in header for name in listed)
    assert max(listed.values()) == _host.abi_version()
    _host.SHIM.lib  # noqa: B018 (built)
    shim = Path(_host.SHIM.lib._name)
    assert set(listed) <= _nm(shim, "--defined-only")
    needed = {s for s in _nm(PREBUILT, "--undefined-only") if s.startswith("ember_stable_")}
    assert needed and all(listed.get(s) == 1 for s in needed)
    assert not any(s.startswith("Py") for s in _nm(PREBUILT, "--undefined-only"))


# ------------------------------------------------------------------------ C only, setuptools
C_SRC = """
#include <ember/stable/c/library.h>
static void neg(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  EmberTensorHandle x = (EmberTensorHandle)stack[0], y;
  EmberScalarType dtype;
  ember_stable_get_scalar_type(x, &dtype);
  if (dtype != EMBER_STABLE_FLOAT32) {
    ember_stable_set_error(EMBER_STABLE_DTYPE_ERROR, "neg: expected a float32 tensor");
    return;
  }
  if (ember_stable_clone(x, &y)) return;  /* the error is already set */
  int64_t n; float* p;
  ember_stable_get_numel(y, &n);
  ember_stable_get_data_ptr(y, (void**)&p);
  for (int64_t i = 0; i < n; i++) p[i] = -p[i];
  stack[0] = (StableIValue)y;
}
EMBER_STABLE_C_LIBRARY(stable_ctest, lib) {
  ember_stable_library_def(lib, "neg(Tensor x) -> Tensor");
}
EMBER_STABLE_C_LIBRARY_IMPL(stable_ctest, CPU, lib) {
  ember_stable_library_impl(lib, "neg", neg, 0);
}
"""


def test_c_extension(tmp_path):
    (tmp_path / "neg.c").write_text(C_SRC)
    ext = cpp_extension.load("stable_ctest", [str(tmp_path / "neg.c")],
                             build_directory=str(tmp_path))
    x = ember.randn(4).t()
    np.testing.assert_array_equal(ext.neg(x).numpy(), (-_t(x)).numpy())
    with pytest.raises(DTypeError, match=r"^\[stable_ctest::neg\] neg: expected a float32"):
        ember.ops.stable_ctest.neg(ember.ones(2, dtype=ember.float64))


@pytest.mark.slow
def test_setuptools_build_extension(tmp_path):
    (tmp_path / "neg.c").write_text(C_SRC.replace("stable_ctest", "stable_setuptest"))
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n"
        "from ember.utils.cpp_extension import BuildExtension, CppExtension\n"
        "setup(name='negext', ext_modules=[CppExtension('negext', ['neg.c'])],\n"
        "      cmdclass={'build_ext': BuildExtension})\n")
    env = {"PYTHONPATH": str(Path(ember.__file__).parents[1]), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib", "out"],
                         cwd=tmp_path, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    (so,) = (tmp_path / "out").glob("negext*.so")
    assert cpp_extension.load_library(so) == ["stable_setuptest::neg"]
    np.testing.assert_array_equal(ember.ops.stable_setuptest.neg(ember.ones(2)).numpy(),
                                  -np.ones(2, np.float32))


LIST_SRC = r"""
#include <optional>
#include <vector>
using ember::stable::Tensor;
Tensor weighted_sum(std::vector<Tensor> xs, std::vector<double> w,
                    std::optional<std::vector<Tensor>> extra) {
  STD_EMBER_CHECK(!xs.empty() && xs.size() == w.size(), "weighted_sum: ", xs.size(),
                  " tensors but ", w.size(), " weights");
  Tensor y = ember::stable::empty_like(xs[0]);
  float* q = y.mutable_data_ptr<float>();
  for (int64_t i = 0; i < y.numel(); i++) q[i] = 0.0f;
  auto add = [&](const Tensor& x, double c) {
    STD_EMBER_CHECK(x.scalar_type() == ember::stable::kFloat && x.is_contiguous() &&
                    x.numel() == y.numel(), "weighted_sum: float32 contiguous tensors of one size");
    const float* p = x.const_data_ptr<float>();
    for (int64_t i = 0; i < y.numel(); i++) q[i] += static_cast<float>(c) * p[i];
  };
  for (size_t k = 0; k < xs.size(); k++) add(xs[k], w[k]);
  if (extra) for (const Tensor& x : *extra) add(x, 1.0);
  return y;
}
Tensor ident(const Tensor& x) { return x; }
EMBER_STABLE_LIBRARY(stablelists, m) {
  m.def("weighted_sum(Tensor[] xs, float[] w, Tensor[]? extra) -> Tensor");
  m.def("ident(Tensor x) -> Tensor");
}
EMBER_STABLE_LIBRARY_IMPL(stablelists, CPU, m) {
  m.impl("weighted_sum", EMBER_BOX(&weighted_sum));
  m.impl("ident", EMBER_BOX(&ident));
}
"""


@needs_cxx
def test_tensor_list_and_float_list_arguments(tmp_path):
    ext = cpp_extension.load_inline("stablelists", LIST_SRC, build_directory=str(tmp_path))
    xs = [ember.randn(5), ember.randn(5), ember.randn(5)]
    op = ember.ops.stablelists.weighted_sum
    got = op(xs, [0.5, -2.0, 3.0], None)
    ref = 0.5 * _t(xs[0]) - 2.0 * _t(xs[1]) + 3.0 * _t(xs[2])
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)
    got = ext.weighted_sum(xs[:1], (2.0,), [xs[1], xs[2]])          # the direct path too
    np.testing.assert_allclose(got.numpy(), (2 * _t(xs[0]) + _t(xs[1]) + _t(xs[2])).numpy(),
                               rtol=1e-6)
    view = ember.randn(2, 5)[1]  # a view: the kernel sees its storage offset
    np.testing.assert_allclose(op([view], [1.0], None).numpy(), view.numpy(), rtol=1e-6)
    with pytest.raises(EmberRuntimeError, match=r"\[stablelists::weighted_sum\] "
                       r"weighted_sum: 2 tensors but 1 weights"):
        op(xs[:2], [1.0], None)
    with pytest.raises(TypeError, match="argument 'xs' must be a Tensor, got int"):
        ext.weighted_sum([xs[0], 3], [1.0, 1.0], None)
    # the custom-op contract: a result over an argument's memory is an aliasing error (the
    # module function, with no custom-op dispatch, returns the view)
    with pytest.raises(RuntimeError, match="may not alias any inputs"):
        ember.ops.stablelists.ident(xs[0])
    assert np.shares_memory(ext.ident(xs[0]).numpy(), xs[0].numpy())
