"""Products that are not float32/float64 in the C backend (docs/compiler.md, "Half and integer
products"): float16/bfloat16 ``matmul``/``addmm``/``linear``/convolutions run float32 GEMMs on
converted operands and round once, integer ones a wrapping loop, and ``einsum``, ``addbmm``,
``cosine_similarity``, ``cross_entropy`` with probabilities and ``_safe_softmax`` decompose into
ops that lower.  Each case compiles with zero externs and equals eager, and half/integer results
match torch.  Half forward products are compared bit for bit with eager here because these
small cases sum exactly in float32 (few terms of half values); in general eager and compiled half
products agree within one ulp (they share the half GEMM kernels, but may block the columns
differently: docs/low_precision.md), which is what the half backward test asserts (a random
output gradient: inexact float32 sums).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional
HALF = ["float16", "bfloat16"]
INTS = ["int64", "int32", "int16", "int8", "uint8"]
# torch.testing's defaults for the dtype (one rounding of a float32 result)
TOL = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
       "float64": (1e-7, 1e-7)}


def _arr(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    if dtype in INTS:
        lo = 0 if dtype == "uint8" else -60
        return rng.integers(lo, 60, shape)  # products wrap in the narrow types
    return rng.standard_normal(shape).astype(np.float32)


def _args(dtype: str, *shapes: tuple, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [ember.tensor(_arr(rng, s, dtype)).to(getattr(ember, dtype)) for s in shapes]


def _torch(t: ember.Tensor) -> torch.Tensor:
    if t.dtype == ember.bfloat16:
        return torch.from_numpy(t.float().numpy()).to(torch.bfloat16)
    return torch.from_numpy(t.numpy().copy())


def _np(t: ember.Tensor | torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy() if t.dtype in (ember.bfloat16, torch.bfloat16) \
        else t.detach().numpy()


def _in_c(fn, *args):  # noqa: ANN001, ANN202
    """(compiled result, eager result) of ``fn``, asserting the graph has no externs."""
    ember.compiler.reset()
    got = ember.compile(fn, backend="c", fullgraph=True)(*args)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.externs
    return got, fn(*args)


def _same(got, want) -> None:  # noqa: ANN001
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_array_equal(_np(g), _np(w))


def _near(got, want, dtype: str, scale: float = 1.0) -> None:  # noqa: ANN001
    """Within the dtype's tolerance (relative to the result's largest magnitude * scale)."""
    rtol, atol = TOL[dtype]
    a, b = _np(got).astype(np.float64), np.asarray(_np(want), np.float64)
    big = np.abs(b).max(initial=1.0)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol + rtol * big * scale)


PRODUCTS = {
    "matmul": (lambda x, y: x @ y, [(5, 7), (7, 3)]),
    "matmul_batched": (lambda x, y: x @ y, [(2, 5, 7), (7, 3)]),
    "matmul_transposed": (lambda x, y: x.t() @ y.t(), [(7, 5), (3, 7)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(2, 5, 7), (3, 7), (3,)]),
    "linear_then_pointwise": (lambda x, w, b: F.linear(x, w, b) * 2 + 1,
                              [(2, 5, 7), (3, 7), (3,)]),
    "addmm": (lambda c, x, y: ember.addmm(c, x, y, beta=2, alpha=3), [(5, 3), (5, 7), (7, 3)]),
    "baddbmm": (lambda c, x, y: ember.baddbmm(c, x, y), [(2, 5, 3), (2, 5, 7), (2, 7, 3)]),
}


def _torch_fn(name: str):  # noqa: ANN202
    tf = torch.nn.functional
    return {"matmul": lambda x, y: x @ y, "matmul_batched": lambda x, y: x @ y,
            "matmul_transposed": lambda x, y: x.t() @ y.t(),
            "linear": lambda x, w, b: tf.linear(x, w, b),
            "linear_then_pointwise": lambda x, w, b: tf.linear(x, w, b) * 2 + 1,
            "addmm": lambda c, x, y: torch.addmm(c, x, y, beta=2, alpha=3),
            "baddbmm": lambda c, x, y: torch.baddbmm(c, x, y)}[name]


@pytest.mark.parametrize("dtype", HALF + INTS)
@pytest.mark.parametrize("name", list(PRODUCTS))
def test_product_in_c_equals_eager_and_torch(name: str, dtype: str) -> None:
    fn, shapes = PRODUCTS[name]
    args = _args(dtype, *shapes)
    got, want = _in_c(fn, *args)
    _same(got, want)
    ref = _torch_fn(name)(*[_torch(a) for a in args])
    if dtype in INTS:  # wraparound of the output dtype, as torch
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
    else:
        _near(got, ref, dtype, scale=2.0)


def test_integer_products_wrap_like_torch() -> None:
    a = ember.full((3, 4), 100, dtype=ember.int8)
    got, want = _in_c(lambda x: x @ x.t(), a)
    _same(got, want)
    ta = torch.full((3, 4), 100, dtype=torch.int8)
    np.testing.assert_array_equal(got.numpy(), (ta @ ta.t()).numpy())


@pytest.mark.parametrize("dtype", HALF + ["int64"])
def test_convolution_in_c(dtype: str) -> None:
    x, w = _args(dtype, (2, 3, 6, 6), (4, 3, 3, 3))
    got, want = _in_c(lambda a, b: F.conv2d(a, b, padding=1, stride=(1, 2)), x, w)
    _same(got, want)
    ref = torch.nn.functional.conv2d(_torch(x), _torch(w), padding=1, stride=(1, 2))
    if dtype == "int64":
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
    else:
        _near(got, ref, dtype, scale=2.0)


def _within_one_ulp(got, want, dtype: str) -> None:  # noqa: ANN001
    """Every element of ``got`` within one ulp of ``want``'s (the dtype's ``eps`` scaled to the
    larger magnitude's binade; subnormals: the smallest normal's ulp)."""
    fi = ember.finfo(getattr(ember, dtype))
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    a, b = _np(got).astype(np.float64), _np(want).astype(np.float64)
    big = np.maximum(np.maximum(np.abs(a), np.abs(b)), fi.smallest_normal)
    ulp = fi.eps * np.exp2(np.floor(np.log2(big)))
    bad = np.abs(a - b) > ulp
    assert not bad.any(), (a[bad], b[bad], ulp[bad])


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("op", ["linear", "conv2d"])
def test_half_backward_in_c(op: str, dtype: str) -> None:
    """The backward products (matmul, conv_input_grad, conv_weight_grad) in float16/bfloat16,
    with a random output gradient: within one ulp of eager's, and near torch's."""
    if op == "linear":
        x, w, g = _args(dtype, (4, 6), (3, 6), (4, 3))
        fwd = F.linear
        tfwd = torch.nn.functional.linear
    else:
        x, w, g = _args(dtype, (2, 3, 5, 5), (4, 3, 3, 3), (2, 4, 5, 5))
        fwd = lambda a, b: F.conv2d(a, b, padding=1)  # noqa: E731
        tfwd = lambda a, b: torch.nn.functional.conv2d(a, b, padding=1)  # noqa: E731

    def step(a, b, grad):  # noqa: ANN001, ANN202
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        fwd(a, b).backward(grad)
        return a.grad, b.grad

    report = ember.compiler.explain(step)(x, w, g)
    assert report.extern_count == 0, report.externs
    got, want = _in_c(step, x, w, g)
    _within_one_ulp(got[0], want[0], dtype)
    _within_one_ulp(got[1], want[1], dtype)
    ta, tb = _torch(x).requires_grad_(), _torch(w).requires_grad_()
    tfwd(ta, tb).backward(_torch(g))
    _near(got[0], ta.grad, dtype, scale=4.0)
    _near(got[1], tb.grad, dtype, scale=4.0)


EINSUMS = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
           ("ii->i", [(4, 4)]), ("ij->", [(3, 4)]), ("i,j->ij", [(3,), (4,)]),
           ("ijk,jl,lk->il", [(2, 3, 4), (3, 5), (5, 4)]),
           ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("iij,jk->ki", [(3, 3, 4), (4, 2)]),
           ("ij,ij->ij", [(3, 4), (3, 4)]), ("bi,bi->b", [(5, 6), (5, 6)]), ("i,i->", [(7,), (7,)])]


@pytest.mark.parametrize("dtype", ["float32", "float64"] + HALF + ["int64", "int32", "int8"])
@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_in_c(eq: str, shapes: list, dtype: str) -> None:
    args = _args(dtype, *shapes)
    got, want = _in_c(lambda *a: ember.einsum(eq, *a), *args)
    ref = torch.einsum(eq, *[_torch(a) for a in args])
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    if dtype in INTS:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
    elif dtype in HALF:
        _same(got, want)  # float32 products rounded once, as eager
        _near(got, ref, dtype, scale=2.0)
    else:  # BLAS sums in another order than np.einsum: a few ulps
        _near(got, want, dtype, scale=4.0)
        _near(got, ref, dtype, scale=4.0)


def test_einsum_gradient_in_c() -> None:
    a, b = _args("float32", (3, 4), (4, 5))

    def step(x, y):  # noqa: ANN001, ANN202
        x, y = x.detach().requires_grad_(), y.detach().requires_grad_()
        ember.einsum("ij,jk->ik", x, y).sum().backward()
        return x.grad, y.grad

    assert ember.compiler.explain(step)(a, b).extern_count == 0
    got, want = _in_c(step, a, b)
    for g, w in zip(got, want):
        _near(g, w, "float32", scale=4.0)


@pytest.mark.parametrize("dtype", ["float32"] + HALF + ["int64"])
def test_addbmm_in_c(dtype: str) -> None:
    c, a, b = _args(dtype, (3, 4), (5, 3, 2), (5, 2, 4))
    got, want = _in_c(lambda *t: ember.addbmm(*t, beta=2, alpha=3), c, a, b)
    ref = torch.addbmm(*[_torch(t) for t in (c, a, b)], beta=2, alpha=3)
    if dtype == "float32":
        _near(got, want, dtype, scale=4.0)
    else:
        _same(got, want)
    if dtype == "int64":
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
    else:
        _near(got, ref, dtype, scale=8.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"] + HALF)
def test_cosine_similarity_in_c(dtype: str) -> None:
    x, y = _args(dtype, (4, 6), (4, 6))
    if dtype not in HALF:  # (torch's half kernel gives NaN for a zero vector; eager 0)
        x = x.clone()
        x[1] = 0  # a zero vector: the clamped norm, and a zero gradient direction

    def step(a, b):  # noqa: ANN001, ANN202
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        out = F.cosine_similarity(a, b, dim=1)
        out.sum().backward()
        return out, a.grad, b.grad

    got, want = _in_c(step, x, y)
    ta, tb = _torch(x).requires_grad_(), _torch(y).requires_grad_()
    tout = torch.nn.functional.cosine_similarity(ta, tb, dim=1)
    tout.sum().backward()
    for g, w, r in zip(got, want, (tout, ta.grad, tb.grad)):
        _near(g, w, dtype, scale=4.0)
        _near(g, r, dtype, scale=4.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"] + HALF)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probabilities_in_c(reduction: str, dtype: str) -> None:
    x, t = _args(dtype, (3, 5, 2), (3, 5, 2))
    t = F.softmax(t.float(), dim=1).to(x.dtype)

    def step(a, b):  # noqa: ANN001, ANN202
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        out = F.cross_entropy(a, b, reduction=reduction, label_smoothing=0.1)
        out.sum().backward()
        return out, a.grad, b.grad

    got, want = _in_c(step, x, t)
    ta, tb = _torch(x).requires_grad_(), _torch(t).requires_grad_()
    tout = torch.nn.functional.cross_entropy(ta, tb, reduction=reduction, label_smoothing=0.1)
    tout.sum().backward()
    for g, w, r in zip(got, want, (tout, ta.grad, tb.grad)):
        _near(g, w, dtype, scale=4.0)
        _near(g, r, dtype, scale=8.0)


@pytest.mark.parametrize("dtype", ["float32"] + HALF)
def test_safe_softmax_in_c(dtype: str) -> None:
    from ember.ops.attention import SAFE_SOFTMAX
    from ember.ops.registry import bind

    (x,) = _args(dtype, (3, 4))
    x = x.clone()
    x[1] = float("-inf")  # a fully masked row gives zeros, not NaN
    got, want = _in_c(lambda a: bind(SAFE_SOFTMAX, a), x)
    _same(got, want) if dtype in HALF else _near(got, want, dtype)
    ref = torch._safe_softmax(_torch(x), -1)
    assert not np.isnan(_np(got)).any() and (_np(got)[1] == 0).all()
    _near(got, ref, dtype)


def test_half_product_that_stays_extern_leaves_no_conversion_kernels() -> None:
    """A dynamic-size convolution is an extern; its float32 conversions are not left behind."""
    ember.compiler.reset()
    f = ember.compile(lambda a, b: F.conv2d(a, b) + 1, backend="c", dynamic=True)
    x, w = _args("float16", (2, 3, 6, 6), (4, 3, 3, 3))
    got = f(x, w)
    cg = cbackend.last_compiled()
    assert [op for op, _ in cg.externs] == ["convolution"]
    ops = [o for seg in cg.program.segments() for k in seg.kernels for o in k.ops]
    assert "to_float32" not in ops and "add" in ops
    _same(got, F.conv2d(x, w) + 1)
