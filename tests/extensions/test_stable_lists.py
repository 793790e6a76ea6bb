"""Stable ABI version 3: ``Tensor[]`` results of boxed kernels and ``Tensor?[]`` arguments
(docs/extensions.md, "Calling convention"), against torch.library's custom ops."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import EmberRuntimeError, EmberValueError
from ember.utils import cpp_extension

torch = pytest.importorskip("torch")

SRC = r"""
using ember::stable::Tensor;
/* copies of the chunks of x along dim 0 (torch.chunk, then clone) */
std::vector<Tensor> chunk_copy(const Tensor& x, int64_t chunks) {
  STD_EMBER_CHECK(chunks > 0, "chunk_copy: chunks must be positive, got ", chunks);
  int64_t n = x.size(0), step = (n + chunks - 1) / chunks;
  std::vector<Tensor> out;
  for (int64_t start = 0; start < n; start += step) {
    int64_t len = start + step <= n ? step : n - start;
    out.push_back(ember::stable::clone(ember::stable::narrow(x, 0, start, len)));
  }
  return out;
}
/* two views of one new tensor: the results alias each other */
std::vector<Tensor> halves(const Tensor& x) {
  Tensor y = ember::stable::clone(x);
  int64_t h = y.size(0) / 2;
  return {ember::stable::narrow(y, 0, 0, h), ember::stable::narrow(y, 0, h, y.size(0) - h)};
}
std::vector<Tensor> passthrough(std::vector<Tensor> xs) { return xs; }
std::vector<Tensor> nothing(const Tensor& x) { return {}; }
std::vector<Tensor> with_hole(const Tensor& x) { return {ember::stable::clone(x), Tensor()}; }
std::tuple<std::vector<Tensor>, Tensor, int64_t> split_and_sum(const Tensor& x) {
  std::vector<Tensor> parts = chunk_copy(x, 2);
  Tensor total = ember::stable::clone(parts[0]);
  float* t = total.mutable_data_ptr<float>();
  const float* p = parts[1].const_data_ptr<float>();
  for (int64_t i = 0; i < parts[1].numel(); i++) t[i] += p[i];
  return {parts, total, static_cast<int64_t>(parts.size())};
}
/* the sum of the tensors present; float32, all of like's shape */
Tensor opt_sum(std::vector<std::optional<Tensor>> xs, const Tensor& like) {
  Tensor out = ember::stable::new_zeros(like, like.sizes());
  float* o = out.mutable_data_ptr<float>();
  for (const auto& t : xs) {
    if (!t.has_value()) continue;
    Tensor c = t->is_contiguous() ? *t : ember::stable::clone(*t);
    STD_EMBER_CHECK(c.numel() == out.numel(), "opt_sum: sizes differ");
    const float* p = c.const_data_ptr<float>();
    for (int64_t i = 0; i < c.numel(); i++) o[i] += p[i];
  }
  return out;
}
int64_t count_none(std::vector<std::optional<Tensor>> xs) {
  int64_t n = 0;
  for (const auto& t : xs) n += !t.has_value();
  return n;
}
EMBER_STABLE_LIBRARY(stable3, m) {
  m.def("chunk_copy(Tensor x, int chunks) -> Tensor[]");
  m.def("halves(Tensor x) -> Tensor[]");
  m.def("passthrough(Tensor[] xs) -> Tensor[]");
  m.def("nothing(Tensor x) -> Tensor[]");
  m.def("with_hole(Tensor x) -> Tensor[]");
  m.def("split_and_sum(Tensor x) -> (Tensor[], Tensor, int)");
  m.def("opt_sum(Tensor?[] xs, Tensor like) -> Tensor");
  m.def("count_none(Tensor?[] xs) -> int");
}
EMBER_STABLE_LIBRARY_IMPL(stable3, CPU, m) {
  m.impl("chunk_copy", EMBER_BOX(&chunk_copy));
  m.impl("halves", EMBER_BOX(&halves));
  m.impl("passthrough", EMBER_BOX(&passthrough));
  m.impl("nothing", EMBER_BOX(&nothing));
  m.impl("with_hole", EMBER_BOX(&with_hole));
  m.impl("split_and_sum", EMBER_BOX(&split_and_sum));
  m.impl("opt_sum", EMBER_BOX(&opt_sum));
  m.impl("count_none", EMBER_BOX(&count_none));
}
"""


@pytest.fixture(scope="module")
def ext():
    if cpp_extension._build.cxx_compiler() is None:
        pytest.skip("no C++ compiler (g++): C++ extensions cannot be built")
    return cpp_extension.load_inline("stable3", SRC)


def _t(x: ember.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.array(x.numpy()))


def _torch_op(name: str, schema: str, fn):
    """The same op as a torch.library custom op (the oracle for results and errors)."""
    return torch.library.custom_op(f"ember_oracle3::{name}", fn, mutates_args=(),
                                   schema=schema)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_tensor_list_result_matches_torch(ext, layout):
    x = ember.randn(5, 3)
    x = x if layout == "contiguous" else x.t()
    want = [c.clone() for c in _t(x).chunk(2)]
    oracle = _torch_op("chunk_copy", "(Tensor x, int chunks) -> Tensor[]",
                       lambda x, chunks: [c.clone() for c in x.chunk(chunks)])
    assert ember.ops.stable3.chunk_copy.schema == str(oracle._opoverload._schema).split(
        "chunk_copy", 1)[1]
    for got in (ember.ops.stable3.chunk_copy(x, 2), ext.chunk_copy(x, 2)):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == ember.float32 and tuple(g.shape) == tuple(w.shape)
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert [tuple(w.shape) for w in oracle(_t(x), 2)] == [tuple(w.shape) for w in want]


def test_empty_list_and_tuple_with_a_list(ext):
    assert ember.ops.stable3.nothing(ember.ones(2)) == [] == ext.nothing(ember.ones(2))
    x = ember.randn(4, 2)
    parts, total, n = ember.ops.stable3.split_and_sum(x)
    tx = _t(x)
    assert n == 2 and len(parts) == 2
    np.testing.assert_array_equal(parts[1].numpy(), tx[2:].numpy())
    np.testing.assert_allclose(total.numpy(), (tx[:2] + tx[2:]).numpy(), rtol=1e-6)


def test_results_aliasing_each_other_or_inputs_raise_like_torch(ext):
    x = ember.randn(6)
    with pytest.raises(EmberRuntimeError, match="may not alias any inputs to this custom "
                       "operator or other returns"):
        ember.ops.stable3.halves(x)
    with pytest.raises(RuntimeError, match="may not alias any inputs"):
        ember.ops.stable3.passthrough([x, x * 2])
    oracle = _torch_op("halves", "(Tensor x) -> Tensor[]",
                       lambda x: list(x.clone().split([3, 3])))
    with pytest.raises(RuntimeError, match="may not alias any inputs to this custom operator "
                       "or other returns"):
        oracle(_t(x))
    # the module function has no custom-op contract: it returns the views
    a, b = ext.halves(x)
    start = a.numpy().__array_interface__["data"][0]
    assert b.numpy().__array_interface__["data"][0] == start + 3 * 4  # one buffer
    np.testing.assert_array_equal(np.concatenate([a.numpy(), b.numpy()]), x.numpy())
    y, z = ext.passthrough([x, x * 2])
    assert np.shares_memory(y.numpy(), x.numpy())
    np.testing.assert_array_equal(z.numpy(), (x * 2).numpy())


def test_undefined_tensor_in_a_list_result_is_an_error(ext):
    with pytest.raises(EmberValueError, match=r"^\[stable3::with_hole\] Tensor\[\] result, "
                       r"element 1: .*NULL"):
        ember.ops.stable3.with_hole(ember.ones(2))
    with pytest.raises(EmberRuntimeError, match=r"^\[stable3::chunk_copy\] chunk_copy: chunks "
                       "must be positive, got 0"):
        ext.chunk_copy(ember.ones(2), 0)


def test_optional_tensor_list_argument_matches_torch(ext):
    xs = [ember.randn(3), None, ember.randn(6)[::2], None]
    like = ember.ones(3)
    oracle = _torch_op("opt_sum", "(Tensor?[] xs, Tensor like) -> Tensor",
                       lambda xs, like: sum((t for t in xs if t is not None),
                                            torch.zeros_like(like)))
    assert ember.ops.stable3.opt_sum.schema == str(oracle._opoverload._schema).split(
        "opt_sum", 1)[1]
    want = oracle([None if t is None else _t(t) for t in xs], _t(like))
    for got in (ember.ops.stable3.opt_sum(xs, like), ext.opt_sum(xs, like)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert ember.ops.stable3.count_none(xs) == 2 == ext.count_none([None, None])
    assert ember.ops.stable3.count_none([]) == 0


def test_list_results_and_optional_lists_with_autograd_and_compile(ext):
    ember.library.register_fake("stable3::chunk_copy",
                                lambda x, chunks: [ember.empty_like(c) for c in
                                                   x.chunk(chunks)])

    def backward(ctx, grads):  # PyTorch's contract: one list of gradients
        return ember.cat(list(grads)), None

    ember.library.register_autograd("stable3::chunk_copy", backward)
    x = ember.randn(4, 2, requires_grad=True)
    a, b = ember.ops.stable3.chunk_copy(x, 2)
    (a.sum() * 2 + b.sum() * 3).backward()
    oracle = _torch_op("chunk_grad", "(Tensor x, int chunks) -> Tensor[]",
                       lambda x, chunks: [c.clone() for c in x.chunk(chunks)])
    oracle.register_autograd(lambda ctx, grads: (torch.cat(grads), None))
    tx = _t(x.detach()).requires_grad_()
    ta, tb = oracle(tx, 2)
    (ta.sum() * 2 + tb.sum() * 3).backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())

    @ember.compile(fullgraph=True)
    def f(x):
        parts = ember.ops.stable3.chunk_copy(x * 2, 2)
        return parts[0] + parts[1]

    x = ember.randn(4, 3)
    np.testing.assert_allclose(f(x).numpy(), (2 * _t(x)[:2] + 2 * _t(x)[2:]).numpy(),
                               rtol=1e-6)


def test_version_3_apis_compile_out_for_target_2(tmp_path):
    if cpp_extension._build.cxx_compiler() is None:
        pytest.skip("no C++ compiler (g++)")
    from ember.errors import CompileError
    src = SRC.replace("stable3", "stable3_as_v2")
    with pytest.raises(CompileError, match=r"no matching function for call to "
                       r".from\(const std::vector<ember::stable::Tensor>"):
        cpp_extension.load_inline("stable3_as_v2", src, build_directory=str(tmp_path),
                                  extra_cflags=["-DEMBER_TARGET_VERSION=2"])


def test_opcheck_and_export_with_lists(ext):
    ember.library.register_fake("stable3::chunk_copy",
                                lambda x, chunks: [ember.empty_like(c) for c in
                                                   x.chunk(chunks)])
    ember.library.register_fake("stable3::opt_sum", lambda xs, like: ember.empty_like(like))
    x = ember.randn(4, 3)
    ok = {"test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
          "test_faketensor": "SUCCESS", "test_aot_dispatch_dynamic": "SUCCESS"}
    assert ember.library.opcheck(ember.ops.stable3.chunk_copy, (x, 2)) == ok
    assert ember.library.opcheck(ember.ops.stable3.opt_sum, ([x, None], x)) == ok

    class M(ember.nn.Module):
        def forward(self, x):
            a, b = ember.ops.stable3.chunk_copy(x, 2)
            return a + b

    ep = ember.export.export(M(), (x,))
    assert "ember.ops.stable3.chunk_copy.default" in ep.graph_module.code
    np.testing.assert_allclose(ep.module()(x).numpy(), (_t(x)[:2] + _t(x)[2:]).numpy(),
                               rtol=1e-6)
