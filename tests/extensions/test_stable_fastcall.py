"""The C fast path of stable-kernel calls (ember/utils/cpp_extension/fastcall.c): the same
results and errors as the ctypes path (``StableKernel.invoke``), no leaked references, and the
custom op's cached fast call dropped whenever its kernels change (as torch.library picks up a
newly registered kernel)."""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.errors import EmberRuntimeError
from ember.library import Library
from ember.library._custom_op import PACKETS
from ember.utils import cpp_extension
from ember.utils.cpp_extension import _fast

try:  # the oracle for the cache-invalidation sequence; the rest runs without it (3.13)
    import torch
except ImportError:  # pragma: no cover
    torch = None

SRC = r"""
using ember::stable::Tensor;
Tensor affine(const Tensor& x, double a, int64_t b, bool neg) {
  STD_EMBER_CHECK(x.scalar_type() == ember::stable::kFloat, "affine: float32 only");
  Tensor src = x.is_contiguous() ? x : ember::stable::clone(x);
  Tensor y = ember::stable::empty_like(src);
  const float* p = src.const_data_ptr<float>();
  float* q = y.mutable_data_ptr<float>();
  for (int64_t i = 0; i < src.numel(); i++) {
    float v = p[i] * static_cast<float>(a) + static_cast<float>(b);
    q[i] = neg ? -v : v;
  }
  return y;
}
int64_t offset(const Tensor& x) { return x.storage_offset() * 100 + x.stride(0); }
int64_t dtype_code(const Tensor& x) { return static_cast<int64_t>(x.scalar_type()); }
int64_t echo(int64_t k) { return k; }
double first(const Tensor& x) { return static_cast<double>(x.const_data_ptr<float>()[0]); }
bool positive(const Tensor& x) { return x.const_data_ptr<float>()[0] > 0; }
Tensor copy_of(const Tensor& x) { return ember::stable::clone(x); }
Tensor ident(const Tensor& x) { return x; }
void touch(const Tensor& x) {}
EMBER_STABLE_LIBRARY(fastcall, m) {
  m.def("affine(Tensor x, float a, int b, bool neg) -> Tensor");
  m.def("offset(Tensor x) -> int");
  m.def("dtype_code(Tensor x) -> int");
  m.def("echo(int k) -> int");
  m.def("first(Tensor x) -> float");
  m.def("positive(Tensor x) -> bool");
  m.def("copy_of(Tensor x) -> Tensor");
  m.def("victim(Tensor x) -> Tensor");
  m.def("ident(Tensor x) -> Tensor");
  m.def("touch(Tensor x) -> ()");
}
EMBER_STABLE_LIBRARY_IMPL(fastcall, CPU, m) {
  m.impl("affine", EMBER_BOX(&affine));
  m.impl("offset", EMBER_BOX(&offset));
  m.impl("dtype_code", EMBER_BOX(&dtype_code));
  m.impl("echo", EMBER_BOX(&echo));
  m.impl("first", EMBER_BOX(&first));
  m.impl("positive", EMBER_BOX(&positive));
  m.impl("copy_of", EMBER_BOX(&copy_of));
  m.impl("victim", EMBER_BOX(&copy_of));
  m.impl("ident", EMBER_BOX(&ident));
  m.impl("touch", EMBER_BOX(&touch));
}
"""


@pytest.fixture(scope="module")
def ext():
    if cpp_extension._build.cxx_compiler() is None:
        pytest.skip("no C++ compiler (g++): C++ extensions cannot be built")
    if _fast.MODULE.get() is None:
        pytest.skip(f"the fast path cannot be built here: {_fast.MODULE.error}")
    return cpp_extension.load_inline("fastcall_test", SRC)


def _sk(name: str):
    return PACKETS[f"fastcall::{name}"]._kernel().stable_kernel




def _same(a, b) -> None:
    if isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    else:
        assert type(a) is type(b) and a == b


def test_the_module_functions_take_the_c_path(ext):
    assert ext.affine.func is _fast.MODULE.get().call
    x = ember.ones(3)
    ember.ops.fastcall.affine(x, 2.0, 1, False)
    op = PACKETS["fastcall::affine"]
    assert op._stable_call.func is _fast.MODULE.get().call_op


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "result"])
def test_fast_and_ctypes_paths_agree(ext, layout):
    base = ember.randn(6, 5)
    x = {"contiguous": base, "transposed": base.t(), "sliced": base[2:, 1::2],
         "result": ext.copy_of(base)[1:]}[layout]   # over shim memory (a capsule's)
    cases = [("affine", (x, 1.5, -2, True)), ("affine", (x, 2, 3, False)),
             ("offset", (x,)), ("first", (x,)), ("positive", (x,)), ("copy_of", (x,)),
             ("touch", (x,)), ("echo", (-7,)), ("echo", (2 ** 63 + 5,)), ("echo", (True,))]
    for name, args in cases:
        fast = getattr(ext, name)(*args)
        _same(fast, _sk(name).invoke(args, None))
        _same(fast, getattr(ember.ops.fastcall, name)(*args))
    np.testing.assert_allclose(ext.affine(x, 1.5, -2, True).numpy(),
                               -(x.numpy() * np.float32(1.5) - 2), rtol=1e-6)
    assert ext.offset(x) == x.storage_offset() * 100 + x.stride(0)
    assert ext.echo(2 ** 63 + 5) == -(2 ** 63) + 5   # masked to 64 bits, as the ctypes path


@pytest.mark.parametrize("dtype", ["float16", "float64", "int64", "int32", "uint8", "bool",
                                   "bfloat16"])
def test_dtypes_round_trip(ext, dtype):
    dt = getattr(ember, dtype)
    x = (ember.arange(12).reshape(3, 4) % 3).to(dt)
    for y in (ext.copy_of(x), ext.copy_of(x.t()), ember.ops.fastcall.copy_of(x)):
        assert y.dtype == dt
        np.testing.assert_array_equal(y.numpy().astype(np.float64),
                                      np.asarray(y.numpy(), dtype=np.float64))
    np.testing.assert_array_equal(ext.copy_of(x.t()).numpy(), x.t().numpy())
    assert ext.dtype_code(x) == {"float16": 5, "float64": 7, "int64": 4, "int32": 3,
                                 "uint8": 0, "bool": 11, "bfloat16": 15}[dtype]
    if dtype == "bfloat16":  # ml_dtypes' dtype: the ctypes path lends it as uint16
        assert ext.copy_of(x).numpy().dtype == ml_dtypes.bfloat16


def test_errors_match_the_ctypes_path(ext):
    for call in (lambda: ext.affine(ember.ones(2, dtype=ember.float64), 1.0, 0, False),
                 lambda: ember.ops.fastcall.affine(ember.ones(2, dtype=ember.float64), 1.0, 0,
                                                   False)):
        with pytest.raises(EmberRuntimeError, match=r"^\[fastcall::affine\] affine: float32 "
                           "only"):
            call()
    with pytest.raises(TypeError, match=r"\[fastcall::affine\] takes 4 arguments"):
        ext.affine(ember.ones(2), 1.0)
    with pytest.raises(TypeError, match="argument 'x' must be a Tensor, got list"):
        ext.affine([1.0], 1.0, 0, False)
    errors = []
    for call in (ext.affine, _sk("affine")):  # a str for a float: the ctypes path's error
        with pytest.raises(Exception) as e:
            call(ember.ones(2), "a", 0, False)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]
    with pytest.raises(TypeError, match="fastcall::affine"):
        ember.ops.fastcall.affine(ember.ones(2), 1.0)


def test_result_over_an_argument_keeps_it_alive_and_nothing_leaks(ext):
    x = ember.arange(5, dtype=ember.float32)
    refs = sys.getrefcount(x._data)
    y = ext.ident(x)                      # the module function: a view of x's memory
    held = sys.getrefcount(x._data)
    shared = np.shares_memory(y.numpy(), x.numpy())
    del y
    after = sys.getrefcount(x._data)  # (not inside assert: pytest's rewrite holds a reference)
    assert shared and held == refs + 1 and after == refs
    for _ in range(200):
        ext.copy_of(x), ext.affine(x, 1.0, 0, False), ext.offset(x)
    after = sys.getrefcount(x._data)
    assert after == refs
    with pytest.raises(EmberRuntimeError, match="may not alias any inputs"):
        ember.ops.fastcall.ident(x)      # the custom-op contract
    after = sys.getrefcount(x._data)
    assert after == refs


def test_inputs_requiring_grad_take_the_autograd_path(ext):
    op = ember.ops.fastcall.affine
    ember.library.register_autograd(
        "fastcall::affine", lambda ctx, g: (g * ctx.a * (-1 if ctx.neg else 1), None, None, None),
        setup_context=lambda ctx, inputs, output: (setattr(ctx, "a", inputs[1]),
                                                   setattr(ctx, "neg", inputs[3])))
    x = ember.randn(4, requires_grad=True)
    y = op(x, 3.0, 1, True)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, -3.0, np.float32))
    p = ember.nn.Parameter(ember.randn(3))      # a Tensor subclass: the general path
    with ember.no_grad():
        np.testing.assert_allclose(op(p, 2.0, 0, False).numpy(), p.detach().numpy() * 2,
                                   rtol=1e-6)


def test_cached_fast_call_follows_kernel_changes_like_torch(ext):
    op = ember.ops.fastcall.victim
    x = ember.arange(3, dtype=ember.float32)
    np.testing.assert_array_equal(op(x).numpy(), x.numpy())      # the stable kernel, cached
    assert op._stable_call is not None
    stable = op._kernels["cpu"]

    op.register_kernel("cpu", lambda x: x * 10)
    np.testing.assert_array_equal(op(x).numpy(), x.numpy() * 10)
    op._kernels["cpu"] = stable                                   # any change of the table
    np.testing.assert_array_equal(op(x).numpy(), x.numpy())
    Library("fastcall", "FRAGMENT").impl("victim", lambda x: x + 1, "CPU")   # the old style
    np.testing.assert_array_equal(op(x).numpy(), x.numpy() + 1)
    op._kernels.update({"cpu": stable, None: stable})
    np.testing.assert_array_equal(op(x).numpy(), x.numpy())
    Library("fastcall", "FRAGMENT").impl("victim", lambda x: x - 1, "CompositeImplicitAutograd")
    np.testing.assert_array_equal(op(x).numpy(), x.numpy() - 1)
    op._implicit = False
    op._kernels = {None: stable}
    np.testing.assert_array_equal(op(x).numpy(), x.numpy())
    op._kernels.pop(None)
    op._kernels.setdefault(None, lambda x: x * 0)
    np.testing.assert_array_equal(op(x).numpy(), np.zeros(3, np.float32))

    if torch is None:
        return
    # torch.library: a kernel registered after the first call is used by the next call
    top = torch.library.custom_op("ember_oracle_fc::victim", lambda x: x.clone(),
                                  mutates_args=(), schema="(Tensor x) -> Tensor")
    tx = torch.arange(3.0)
    np.testing.assert_array_equal(top(tx).numpy(), tx.numpy())
    top.register_kernel("cpu", lambda x: x * 10)
    np.testing.assert_array_equal(top(tx).numpy(), tx.numpy() * 10)


def test_without_the_c_module_calls_take_ctypes(ext, monkeypatch):
    sk = _sk("affine")
    x = ember.randn(3)
    want = ext.affine(x, 2.0, 1, False)
    monkeypatch.setattr(_fast.MODULE, "_module", None)
    assert sk.fast_function() is sk and sk.op_fast_call(lambda: None) is None
    _same(sk(x, 2.0, 1, False), want)
    op = PACKETS["fastcall::affine"]
    op._stable_call = op._resolve_stable_call()
    assert op._stable_call is None
    _same(op(x, 2.0, 1, False), want)
    monkeypatch.undo()
    op._kernels = dict(op._kernels)   # re-resolve with the module back
    _same(op(x, 2.0, 1, False), want)
    assert op._stable_call is not None
