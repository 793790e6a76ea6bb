"""Views share memory, version counter and geometry with their base, as in PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _make(lib, shape, kind):
    """A float32 tensor of ``shape``: contiguous, non-contiguous (every other element of a
    wider last dim) or transposed."""
    n = int(np.prod(shape))
    if kind == "contig":
        return lib.arange(float(n)).reshape(*shape)
    if kind == "strided":
        return lib.arange(float(2 * n)).reshape(*shape, 2).select(-1, 0)
    return lib.arange(float(n)).reshape(*reversed(shape)).permute(
        *reversed(range(len(shape))))


VIEW_OPS = {
    "view": lambda x: x.view(-1) if x.is_contiguous() else x.view(x.shape),
    "reshape_view": lambda x: x.reshape(1, *x.shape),
    "t": lambda x: x.t() if x.ndim <= 2 else x.transpose(0, 1),
    "T": lambda x: x.T,
    "mT": lambda x: x.mT,
    "transpose": lambda x: x.transpose(0, -1),
    "permute": lambda x: x.permute(*reversed(range(x.ndim))),
    "movedim": lambda x: x.movedim(0, -1),
    "unsqueeze0": lambda x: x.unsqueeze(0),
    "unsqueeze1": lambda x: x.unsqueeze(1),
    "unsqueeze_last": lambda x: x.unsqueeze(-1),
    "squeeze": lambda x: x.unsqueeze(1).squeeze(),
    "squeeze_dim": lambda x: x.unsqueeze(1).squeeze(1),
    "flatten": lambda x: x.flatten(1),
    "unflatten": lambda x: x.unflatten(0, (1, x.shape[0])),
    "expand": lambda x: x.unsqueeze(0).expand(2, *x.shape),
    "expand_size1": lambda x: x.narrow(0, 0, 1).expand(3, *x.shape[1:]),
    "narrow": lambda x: x.narrow(-1, 1, 1),
    "narrow_empty": lambda x: x.narrow(0, 1, 0),
    "select": lambda x: x.select(0, 1),
    "select_last": lambda x: x.select(-1, 0),
    "split": lambda x: x.split(1, 0)[1],
    "chunk": lambda x: x.chunk(2, -1)[-1],
    "tensor_split": lambda x: x.tensor_split(2, 1)[1],
    "unbind": lambda x: x.unbind(1)[1],
    "unfold": lambda x: x.unfold(-1, 2, 1),
    "diagonal": lambda x: x.diagonal(),
    "diagonal_offset": lambda x: x.diagonal(1, -1, 0),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 2), 1),
    "as_strided_default_offset": lambda x: x.select(0, 1).as_strided((2,), (2,)),
    "narrow_t": lambda x: x.narrow(0, 0, 1).t() if x.ndim == 2 else x.narrow(0, 0, 1).mT,
}
SHAPES = [(3, 4), (2, 3, 4), (4, 1, 3), (1, 4)]
KINDS = ["contig", "strided", "transposed"]


def _geometry(x):
    return tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.is_contiguous()


@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_view_geometry_matches_torch(name):
    fn = VIEW_OPS[name]
    checked = 0
    for shape in SHAPES:
        for kind in KINDS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    t = fn(_make(torch, shape, kind))
                except (RuntimeError, IndexError):
                    with pytest.raises((RuntimeError, IndexError)):
                        fn(_make(ember, shape, kind))
                    continue
                e = fn(_make(ember, shape, kind))
            what = f"{name} {shape} {kind}"
            assert _geometry(e) == _geometry(t), what
            np.testing.assert_array_equal(e.numpy(), t.numpy(), err_msg=what)
            checked += 1
    assert checked


@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_view_shares_memory_and_version(name):
    fn = VIEW_OPS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = ember.arange(24.0).reshape(2, 3, 4)
        v = fn(base)
    assert v._base is base._base or v._base is base
    if v.numel() == 0:
        return
    root = base._base if base._base is not None else base
    before_base, before_view = base._version, v._version
    if name.startswith("expand"):
        with pytest.raises(RuntimeError, match="more than one element"):
            v.add_(1)
        return
    v.fill_(-7.0)
    assert (base.numpy() == -7.0).any()  # the write is visible in the base
    assert base._version == before_base + 1 and v._version == before_view + 1
    assert root._version == base._version


def test_base_is_the_root_of_a_view_chain():
    x = ember.zeros(3, 4)
    assert x.t()._base is x
    assert x.t().unsqueeze(0).narrow(1, 0, 2)._base is x
    assert x.unbind(0)[1]._base is x
    assert all(p._base is x for p in x.split(2, 1))
    xt = torch.zeros(3, 4)
    assert xt.t().unsqueeze(0).narrow(1, 0, 2)._base is xt


def test_reshape_copies_only_when_it_must():
    for lib in (torch, ember):
        x = lib.zeros(3, 4)
        assert x.reshape(12)._base is x
        c = x.t().reshape(12)
        assert c._base is None and c.is_contiguous()
        assert x.t().flatten()._base is None
    e = ember.zeros(3, 4)
    flat = e.t().reshape(12)
    flat.fill_(1.0)
    assert e.sum().item() == 0.0


@pytest.mark.parametrize("fn", [
    lambda lib, x: x.flip(0), lambda lib, x: x.roll(1, 0), lambda lib, x: x.repeat(1, 1),
    lambda lib, x: lib.cat([x]), lambda lib, x: lib.stack([x]), lambda lib, x: x.tile((1,)),
])
def test_movement_ops_copy(fn):
    for lib in (torch, ember):
        x = lib.zeros(3, 4)
        y = fn(lib, x)
        y.fill_(1.0)
        assert x.sum().item() == 0.0
        assert y._base is None


def test_t_of_0d_and_1d_are_views():
    for lib in (torch, ember):
        x = lib.zeros(3)
        assert x.t()._base is x
        assert x.t().shape == x.shape


def test_T_warns_on_3d_and_0d():
    x = ember.zeros(2, 3, 4)
    with pytest.warns(UserWarning, match=r"The use of `x.T` on tensors of dimension other than 2"):
        assert x.T.shape == (4, 3, 2)
    with pytest.warns(UserWarning, match=r"Tensor.T is deprecated on 0-D tensors"):
        assert ember.tensor(1.0).T.shape == ()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ember.zeros(3).T.shape == (3,)
        assert ember.zeros(2, 3).T.shape == (3, 2)


def test_iteration_uses_unbind():
    x = ember.arange(6.0).reshape(3, 2)
    rows = list(x)
    assert [r.tolist() for r in rows] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    rows[1].fill_(9.0)
    assert x.tolist()[1] == [9.0, 9.0]


def test_as_strided_offset_is_relative_to_storage():
    for lib in (torch, ember):
        x = lib.arange(12.0)
        v = x.narrow(0, 4, 4)
        a = v.as_strided((2,), (1,), 1)
        b = v.as_strided((2,), (1,))
        assert a.tolist() == [1.0, 2.0] and a.storage_offset() == 1
        assert b.tolist() == [4.0, 5.0] and b.storage_offset() == 4


def _inplace_through_view_grad(lib, opname):
    x = lib.arange(1.0, 13.0, dtype=lib.float64).reshape(3, 4).requires_grad_(True)
    y = x * 1.0
    views = {
        "narrow": lambda y: y.narrow(1, 1, 2),
        "select": lambda y: y.select(0, 2),
        "t": lambda y: y.t(),
        "unsqueeze": lambda y: y.unsqueeze(0),
        "diagonal": lambda y: y.diagonal(),
        "unfold": lambda y: y.unfold(1, 2, 2),
    }
    views[opname](y).mul_(3.0)
    (y * y).sum().backward()
    return x.grad.detach().numpy().copy(), y.detach().numpy().copy()


@pytest.mark.parametrize("opname", ["narrow", "select", "t", "unsqueeze", "diagonal", "unfold"])
def test_inplace_through_view_updates_base_history(opname):
    eg, ey = _inplace_through_view_grad(ember, opname)
    tg, ty = _inplace_through_view_grad(torch, opname)
    np.testing.assert_allclose(ey, ty)
    np.testing.assert_allclose(eg, tg)


@pytest.mark.parametrize("fn", [
    lambda lib, x: x.narrow(1, 1, 2), lambda lib, x: x.select(0, 1),
    lambda lib, x: lib.cat([x, x * 2], 1), lambda lib, x: lib.stack([x, x], 0),
    lambda lib, x: x.unfold(1, 2, 1), lambda lib, x: x.as_strided((2, 2), (1, 1), 1),
    lambda lib, x: x.diagonal(), lambda lib, x: x.flip(0).roll(1, 1).repeat(2, 1),
    lambda lib, x: lib.cat(x.split([1, 3], 1)[::-1], 1), lambda lib, x: lib.stack(x.unbind(1)),
])
def test_double_backward(fn):
    """Gradients of views are ember ops themselves, so grad-of-grad works."""
    def run(lib):
        x = lib.arange(1.0, 13.0, dtype=lib.float64).reshape(3, 4).requires_grad_(True)
        y = fn(lib, x)
        (g,) = lib.autograd.grad((y ** 3).sum() if hasattr(y, "__pow__") else (y * y * y).sum(),
                                 x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        return gg.detach().numpy()
    np.testing.assert_allclose(run(ember), run(torch))


def test_metadata_inplace_ops():
    for lib in (torch, ember):
        x = lib.arange(6.0).reshape(2, 3)
        y = x.t()
        assert x.unsqueeze_(0) is x and tuple(x.shape) == (1, 2, 3)
        assert tuple(x.squeeze_(0).shape) == (2, 3)
        assert tuple(x.t_().shape) == (3, 2) and tuple(x.stride()) == (1, 3)
        assert tuple(x.transpose_(0, 1).shape) == (2, 3)
        assert y.tolist() == x.t().tolist()
    leaf = ember.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf.unsqueeze_(0)
    h = ember.zeros(3, dtype=ember.float64, requires_grad=True)
    z = h * 2.0
    z.unsqueeze_(0)
    z.sum().backward()
    assert h.grad.tolist() == [2.0, 2.0, 2.0]


def test_expand_writability_matches_torch():
    for lib in (torch, ember):
        x = lib.zeros(3, 4)
        same = x.expand(3, 4)
        same.add_(1.0)  # no overlap: allowed
        assert x.sum().item() == 12.0
        with pytest.raises(RuntimeError, match="more than one element"):
            lib.zeros(3, 1).expand(3, 4).add_(1.0)
        new_dim = lib.zeros(4).expand(1, 4)
        new_dim.add_(1.0)  # a new size-1 dim does not overlap either


@pytest.mark.parametrize("pick", [0, 1, -1])
def test_multi_output_views_with_unused_outputs(pick):
    """split/unbind are one backward node each; outputs without a gradient count as zeros."""
    def run(lib):
        x = lib.arange(1.0, 13.0, dtype=lib.float64).reshape(4, 3).requires_grad_(True)
        a = x.split([1, 2, 1])[pick]
        b = x.unbind(1)[pick]
        c = x.chunk(2, 1)[pick]
        ((a * a).sum() + (b * 3).sum() + c.sum()).backward()
        return x.grad.numpy(), a.grad_fn.name(), b.grad_fn.name()
    eg, ea, eb = run(ember)
    tg, ta, tb = run(torch)
    np.testing.assert_allclose(eg, tg)
    assert (ea, eb) == (ta, tb)


@pytest.mark.parametrize("op", ["clone", "contiguous", "flip", "roll", "repeat", "cat", "stack",
                                "reshape_copy"])
@pytest.mark.parametrize("kind", KINDS)
def test_copy_layout_matches_torch(op, kind):
    """Copies keep the input's dim order where PyTorch does (clone, flip) and are contiguous
    where it makes them so (contiguous, roll, repeat, cat)."""
    fns = {
        "clone": lambda lib, x: x.clone(), "contiguous": lambda lib, x: x.contiguous(),
        "flip": lambda lib, x: x.flip(0), "roll": lambda lib, x: x.roll(1, 0),
        "repeat": lambda lib, x: x.repeat(1, 2, 1), "cat": lambda lib, x: lib.cat([x, x], 1),
        "stack": lambda lib, x: lib.stack([x, x]), "reshape_copy": lambda lib, x: x.reshape(-1),
    }
    t = fns[op](torch, _make(torch, (2, 3, 4), kind))
    e = fns[op](ember, _make(ember, (2, 3, 4), kind))
    assert _geometry(e) == _geometry(t)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_views_of_a_permuted_copy_keep_the_half_dtype(dtype):
    """A half copy that keeps a permuted layout (neither C nor F order) owns memory NumPy
    cannot take as a buffer; its views are built from the array interface, whose typestr
    names bfloat16 as void ``|V2``: they must still be bfloat16 (and match torch)."""
    t = torch.arange(24.).reshape(3, 2, 4).permute(1, 0, 2).to(getattr(torch, dtype))
    e = ember.arange(24.).reshape(3, 2, 4).permute(1, 0, 2).to(getattr(ember, dtype))
    assert _geometry(e) == _geometry(t)
    for fn in (lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(0), lambda x: x[:, 1:]):
        ev, tv = fn(e), fn(t)
        assert ev.dtype == getattr(ember, dtype) and ev.numpy().dtype == ev.dtype.np
        assert _geometry(ev) == _geometry(tv)
        np.testing.assert_array_equal(ev.float().numpy(), tv.float().numpy())
