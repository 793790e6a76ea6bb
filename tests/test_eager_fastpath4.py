"""The full-reduction and gradient-expand fast paths (issue 21, autograd round): ``x.sum()`` /
``x.mean()`` of small float tensors and ``g.expand(shape)`` without a node, checked against
PyTorch and against the general path (``check_meta`` on with ``check_fast_paths`` off, which
the fast paths leave to it)."""

import numpy as np
import pytest

import ember
from ember.autograd.graph import FullReduceNode, OpNode
from ember.config import config

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fast_paths():
    """The fast paths as users run them: without ``check_meta`` (the suite's conftest turns it
    on, which runs them too, each followed by ``check_results``)."""
    prev = config.check_meta
    config.check_meta = False
    yield
    config.check_meta = prev


X = np.array([0.5, -1.25, 2.0, 3.5, 0.125, -7.0], dtype=np.float32)
SHAPES = [(), (6,), (2, 3), (1, 2, 3)]


def _both(arr: np.ndarray, grad: bool = True) -> tuple:
    return ember.tensor(arr, requires_grad=grad), torch.tensor(arr, requires_grad=grad)


def _general(fn, arr: np.ndarray):  # noqa: ANN001, ANN202
    """``fn`` on the general path (check_meta without check_fast_paths: every fast path steps
    aside)."""
    config.check_meta, config.check_fast_paths = True, False
    try:
        x = ember.tensor(arr, requires_grad=True)
        y = fn(x)
        y.backward()
        return y, x.grad
    finally:
        config.check_meta, config.check_fast_paths = False, True


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_full_reduction_matches_torch_and_general_path(name: str, shape: tuple,
                                                       dtype: type) -> None:
    arr = (X[:1] if shape == () else X).reshape(shape).astype(dtype)
    ex, tx = _both(arr)
    ey, ty = getattr(ex, name)(), getattr(tx, name)()
    assert isinstance(ey.grad_fn, OpNode)
    assert ey.grad_fn.name() == ty.grad_fn.name()
    assert ey.shape == ty.shape == () and ey.dtype == getattr(ember, str(ty.dtype)[6:])
    assert ey.grad_fn.params == {"dims": tuple(range(len(shape))), "keepdim": False}
    assert ey.grad_fn.next_functions[0][0] is ex._accumulator()
    node = ey.grad_fn
    assert isinstance(node, FullReduceNode) and node.ctx is node
    assert node.out_specs == (((), ex.dtype),) and node.needs_input_grad == (True,)
    assert node.input_shapes == (shape,) and node.input_dtypes == (ex.dtype,)
    ey.backward()
    ty.backward()
    np.testing.assert_allclose(ey.item(), ty.item(), rtol=1e-6)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    assert ex.grad.shape == tx.grad.shape and ex.grad.dtype == ex.dtype
    gy, gg = _general(lambda t: getattr(t, name)(), arr)
    assert ey.item() == gy.item()
    np.testing.assert_array_equal(ex.grad.numpy(), gg.numpy())


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_full_reduction_modes(name: str) -> None:
    x = ember.tensor(X, requires_grad=True)
    with ember.no_grad():
        y = getattr(x, name)()
        assert y.grad_fn is None and not y.requires_grad
    with ember.inference_mode():
        y = getattr(x, name)()
        assert y.grad_fn is None and y.is_inference()
    h = x * 2.0
    v = h[1:5]  # a view of a non-leaf: the edge goes to the view's node
    ev = getattr(v, name)()
    tx = torch.tensor(X, requires_grad=True)
    tv = getattr((tx * 2.0)[1:5], name)()
    assert ev.grad_fn.next_functions[0][0].name() == tv.grad_fn.next_functions[0][0].name()
    ev.backward()
    tv.backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_full_reduction_double_backward(name: str) -> None:
    res = []
    for lib in (ember, torch):
        x = lib.tensor(X, requires_grad=True)
        y = getattr(x * x, name)()
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        (gg,) = lib.autograd.grad(getattr(g * g, name)(), x)
        res.append((g.detach().numpy(), gg.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)


def test_full_reduction_falls_back() -> None:
    """Integers (int64 sums), half precision, empty and keepdim/dim/dtype calls run the
    general path, with PyTorch's results and errors."""
    i = np.arange(6, dtype=np.int32)
    assert ember.tensor(i).sum().dtype == ember.int64 and ember.tensor(i).sum().item() == 15
    h = ember.tensor(X.astype(np.float16), requires_grad=True)
    th = torch.tensor(X.astype(np.float16), requires_grad=True)
    assert h.sum().dtype == ember.float16
    np.testing.assert_allclose(h.mean().item(), th.mean().item(), rtol=1e-3)
    e = ember.tensor(np.zeros(0, np.float32))
    assert e.sum().item() == 0.0 and np.isnan(e.mean().item())
    x = ember.tensor(X.reshape(2, 3))
    assert x.sum(keepdim=True).shape == (1, 1) and x.mean(1).shape == (2,)
    assert x.sum(dtype=ember.float64).dtype == ember.float64
    with pytest.raises(RuntimeError, match="mean"):
        ember.tensor(i).mean()


def test_saved_versions_unaffected_by_fast_sum() -> None:
    """sum saves nothing: modifying its input in place afterwards does not break backward."""
    for lib in (ember, torch):
        x = lib.tensor(X, requires_grad=True)
        h = x * 1.0
        y = h.sum()
        h.add_(1.0)
        y.backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones(6, np.float32))


@pytest.mark.parametrize("src,shape", [((), (4,)), ((), (2, 3)), ((3,), (2, 3)),
                                       ((2, 1), (2, 5)), ((1,), (7,))])
def test_expand_view_matches_torch(src: tuple, shape: tuple) -> None:
    arr = np.arange(int(np.prod(src)), dtype=np.float32).reshape(src) + 1
    e, t = ember.tensor(arr), torch.tensor(arr)
    ev, tv = e.expand(shape), t.expand(shape)
    np.testing.assert_array_equal(ev.numpy(), tv.numpy())
    assert ev.stride() == tv.stride() and ev._base is e and ev.is_leaf == tv.is_leaf
    assert ev._version_counter is e._version_counter
    e.add_(1.0)  # the view sees writes to its base
    t.add_(1.0)
    np.testing.assert_array_equal(ev.numpy(), tv.numpy())


def test_expand_view_errors_and_grad() -> None:
    e = ember.tensor(np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match="expanded size"):
        e.expand((2, 4))
    with pytest.raises(RuntimeError, match="number of sizes"):
        ember.tensor(np.ones((2, 3), np.float32)).expand((3,))
    # with grad the general path records ExpandBackward0
    x, tx = _both(np.ones((), np.float32))
    y, ty = x.expand((2, 3)), tx.expand((2, 3))
    assert y.grad_fn.name() == ty.grad_fn.name()
    (y * 2.0).sum().backward()
    (ty * 2.0).sum().backward()
    assert x.grad.item() == tx.grad.item() == 12.0
    base = e[1:]  # a view's expand shares the root base
    assert base.expand((2, 2))._base is e


def test_fast_paths_taken_and_refused() -> None:
    """The fast functions run for the cases above and step aside for the others."""
    from ember._bind_fast import expand_view, full_reduce
    from ember._frontend.reduction import _ALL_DIMS
    from ember.ops import reduction as R
    x = ember.tensor(X, requires_grad=True)
    assert full_reduce(R.SUM, x, _ALL_DIMS, False) is not None
    assert full_reduce(R.MEAN, x, _ALL_DIMS, True).item() == pytest.approx(float(X.mean()))
    for t in (ember.tensor(X.astype(np.float16)), ember.tensor(np.zeros(0, np.float32)),
              ember.tensor(np.arange(3))):
        assert full_reduce(R.SUM, t, _ALL_DIMS, False) is None
    g = ember.tensor(np.float32(2.0))
    assert expand_view(g, (3,)) is not None
    assert expand_view(g, (1, 3)) is None  # a size-1 target dim: PyTorch's strides, generic
    assert expand_view(ember.tensor(X), (6,)) is None  # same shape: a writable view, generic
    config.check_meta = True  # the fast paths run and are checked (check_fast_paths)
    assert full_reduce(R.SUM, x, _ALL_DIMS, False) is not None
    assert expand_view(g, (3,)) is not None
    config.check_fast_paths = False  # ... or step aside for the general path
    try:
        assert full_reduce(R.SUM, x, _ALL_DIMS, False) is None and expand_view(g, (3,)) is None
    finally:
        config.check_fast_paths = True
