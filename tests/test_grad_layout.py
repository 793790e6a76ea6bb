"""PyTorch's gradient layout contract for ``.grad`` (``AccumulateGrad``, ``docs/autograd.md``):
a leaf's gradient has the leaf's strides where the leaf is non-overlapping and dense, else it is
contiguous, whatever layout the backward produced (``x @ w.t()`` gives ``w`` a transposed
gradient); an accumulated gradient keeps that layout.  Checked against torch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 2)).astype(np.float32)
B = RNG.standard_normal((2, 3)).astype(np.float32)
X = RNG.standard_normal((4, 2)).astype(np.float32)
W3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
S = RNG.standard_normal((4, 4)).astype(np.float32)


def _leaf(lib, arr, layout):  # noqa: ANN001, ANN202
    """A leaf holding ``arr`` (contiguous), or a transposed / sliced view of a copy of it."""
    if layout == "contiguous":
        return lib.tensor(arr).requires_grad_()
    if layout == "transposed":
        return lib.tensor(np.ascontiguousarray(arr.T)).t().detach().requires_grad_()
    return lib.tensor(np.concatenate([arr, arr], 1))[:, :arr.shape[1]].detach().requires_grad_()


CASES = {  # name: (leaf array, what the loss does with the leaf w (x: a (4, 2) input))
    "x @ w.t()": (A, lambda lib, w, x: x @ w.t()),
    "mm(x, w.t())": (A, lambda lib, w, x: lib.mm(x, w.t())),
    "w.t() * 2": (A, lambda lib, w, x: w.t() * 2),
    "x.t() @ w": (RNG.standard_normal((4, 3)).astype(np.float32),
                  lambda lib, w, x: x.t() @ w),
    "batched x @ w.t()": (RNG.standard_normal((5, 2)).astype(np.float32),
                          lambda lib, w, x: x.reshape(2, 2, 2) @ w.t()),
    "permute": (W3, lambda lib, w, x: w.permute(2, 0, 1) * 3),
    "expand": (A[0], lambda lib, w, x: w.expand(4, 2) * x),
}


def _grad_layout(lib, name: str, layout: str, create_graph: bool = False, times: int = 1):  # noqa: ANN001, ANN202
    arr, f = CASES[name]
    w = _leaf(lib, arr, layout)
    x = lib.tensor(X)
    for _ in range(times):
        f(lib, w, x).sum().backward(create_graph=create_graph)
    return w.stride(), w.grad.stride(), w.grad


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("name", list(CASES))
def test_grad_strides_match_torch(name: str, layout: str) -> None:
    if layout != "contiguous" and CASES[name][0].ndim != 2:
        pytest.skip("transposed / sliced leaves are 2-d here")
    e_leaf, e_grad, eg = _grad_layout(ember, name, layout)
    t_leaf, t_grad, tg = _grad_layout(torch, name, layout)
    assert e_leaf == t_leaf
    assert e_grad == t_grad, (name, layout, e_grad, t_grad)
    np.testing.assert_allclose(eg.numpy(), tg.numpy(), rtol=1e-6, atol=1e-6)
    assert eg._base is None


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_accumulated_grad_keeps_the_layout(layout: str) -> None:
    for name in ("x @ w.t()", "w.t() * 2"):
        e = _grad_layout(ember, name, layout, times=2)
        t = _grad_layout(torch, name, layout, times=2)
        assert e[1] == t[1], (name, layout, e[1], t[1])
        np.testing.assert_allclose(e[2].numpy(), t[2].numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_create_graph_grad_is_contiguous_and_differentiable() -> None:
    grads = []
    for lib in (ember, torch):
        w, x = lib.tensor(A).requires_grad_(), lib.tensor(X).requires_grad_()
        (x @ w.t()).pow(2).sum().backward(create_graph=True)
        assert w.grad.stride() == (2, 1) and w.grad.requires_grad
        w.grad.sum().backward()   # through the copy that laid the gradient out
        grads.append(x.grad.detach().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-5)


def test_the_copy_does_not_alias_the_backward_gradient() -> None:
    """A gradient handed to a leaf in a new layout is a fresh array (writes to .grad, as
    clipping does, reach nothing else)."""
    w = ember.tensor(A).requires_grad_()
    g = ember.tensor(np.ascontiguousarray(A.T)).t()   # a transposed view as the gradient
    w.backward(g)
    assert w.grad.stride() == (2, 1) and w.grad._base is None
    w.grad.mul_(0)
    assert float(g.abs().sum()) > 0


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_compiled_grads_follow_the_contract(backend: str) -> None:
    """A compiled backward stores the same layouts as eager (a contiguous copy recorded in the
    graph for a contiguous leaf; a transposed leaf keeps its transposed gradient)."""
    import shutil

    from ember.config import config
    if backend == "c" and shutil.which(config.cc.split()[-1]) is None:
        pytest.skip("no C compiler")
    w = ember.tensor(A).requires_grad_()
    wt = ember.tensor(B).t().detach().requires_grad_()
    x = ember.tensor(X)

    def step(x):  # noqa: ANN001, ANN202
        (x @ w.t()).sum().backward()
        (x @ wt.t() * 2).sum().backward()

    ember.compiler.reset()
    for _ in range(2):   # the recording call and a cached one
        w.grad = wt.grad = None
        ember.compile(step, backend=backend)(x)
        assert w.grad.stride() == (2, 1) and wt.grad.stride() == (1, 3)
    tw = torch.tensor(A, requires_grad=True)
    (torch.tensor(X) @ tw.t()).sum().backward()
    assert tw.grad.stride() == (2, 1)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)
