"""ember.nn.utils: clip_grad_norm_, clip_grad_value_, parameters_to_vector against torch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.nn import utils

torch = pytest.importorskip("torch")

GRADS = [np.linspace(-2, 3, 12).reshape(3, 4), np.linspace(0.5, -1.5, 5), np.array(4.0)]


def params(lib, dtype="float32", grads=GRADS):
    ps = []
    for g in grads:
        p = lib.nn.Parameter(lib.zeros(g.shape, dtype=getattr(lib, dtype)))
        p.grad = lib.tensor(g, dtype=getattr(lib, dtype))
        ps.append(p)
    return ps


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, float("inf"), 0.5])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(dtype, norm_type, max_norm):
    pe, pt = params(ember, dtype), params(torch, dtype)
    ne = utils.clip_grad_norm_(pe, max_norm, norm_type=norm_type)
    nt = torch.nn.utils.clip_grad_norm_(pt, max_norm, norm_type=norm_type)
    assert str(ne.dtype).split(".")[1] == str(nt.dtype).split(".")[1] and ne.shape == ()
    rtol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(ne.numpy(), nt.numpy(), rtol=rtol)
    for a, b in zip(pe, pt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=1e-7)


def test_clip_grad_norm_single_tensor_and_no_grads():
    pe, pt = params(ember)[0], params(torch)[0]
    np.testing.assert_allclose(utils.clip_grad_norm_(pe, 1.0).numpy(),
                               torch.nn.utils.clip_grad_norm_(pt, 1.0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(pe.grad.numpy(), pt.grad.numpy(), rtol=1e-6)
    empty = utils.clip_grad_norm_([ember.nn.Parameter(ember.zeros(2))], 1.0)
    assert empty.item() == torch.nn.utils.clip_grad_norm_(
        [torch.nn.Parameter(torch.zeros(2))], 1.0).item() == 0.0
    assert utils.clip_grad_norm_((p for p in params(ember)), 1.0).item() > 1.0  # generator


def test_clip_grad_norm_nonfinite():
    bad = [np.array([1.0, np.inf]), np.array([2.0])]
    pe, pt = params(ember, grads=bad), params(torch, grads=bad)
    with pytest.raises(RuntimeError) as te:
        torch.nn.utils.clip_grad_norm_(pt, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as ee:
        utils.clip_grad_norm_(pe, 1.0, error_if_nonfinite=True)
    assert str(ee.value) == str(te.value)
    ne = utils.clip_grad_norm_(pe, 1.0)
    nt = torch.nn.utils.clip_grad_norm_(pt, 1.0)
    assert ne.item() == nt.item() == float("inf")
    for a, b in zip(pe, pt):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_get_total_norm_and_clip_grads_with_norm():
    pe, pt = params(ember), params(torch)
    te = utils.get_total_norm([p.grad for p in pe], 3.0)
    tt = torch.nn.utils.get_total_norm([p.grad for p in pt], 3.0)
    np.testing.assert_allclose(te.numpy(), tt.numpy(), rtol=1e-6)
    utils.clip_grads_with_norm_(pe, 1.0, te)
    torch.nn.utils.clip_grads_with_norm_(pt, 1.0, tt)
    for a, b in zip(pe, pt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("clip", [0.5, 2, 10.0])
def test_clip_grad_value_matches_torch(clip):
    pe, pt = params(ember), params(torch)
    assert utils.clip_grad_value_(pe, clip) is None
    torch.nn.utils.clip_grad_value_(pt, clip)
    for a, b in zip(pe, pt):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_parameters_to_vector_and_back():
    pe, pt = params(ember), params(torch)
    with ember.no_grad():
        for p, g in zip(pe, GRADS):
            p.copy_(ember.tensor(g, dtype=ember.float32))
    with torch.no_grad():
        for p, g in zip(pt, GRADS):
            p.copy_(torch.tensor(g, dtype=torch.float32))
    ve, vt = utils.parameters_to_vector(pe), torch.nn.utils.parameters_to_vector(pt)
    np.testing.assert_array_equal(ve.detach().numpy(), vt.detach().numpy())
    assert ve.shape == vt.shape and ve.requires_grad == vt.requires_grad
    ve.sum().backward()  # differentiable, as torch's
    assert pe[0].grad is not None
    ids = [id(p) for p in pe]
    utils.vector_to_parameters(ember.arange(18, dtype=ember.float32), pe)
    torch.nn.utils.vector_to_parameters(torch.arange(18, dtype=torch.float32), pt)
    assert [id(p) for p in pe] == ids
    for a, b in zip(pe, pt):
        assert a.tolist() == b.tolist() and type(a) is ember.nn.Parameter
    with pytest.raises(TypeError, match="expected ember.Tensor, but got: list"):
        utils.vector_to_parameters([1.0], pe)


def test_clip_on_module_parameters():
    m = ember.nn.Module()
    m.w = ember.nn.Parameter(ember.ones(3))
    (m.w * 10).sum().backward()
    total = utils.clip_grad_norm_(m.parameters(), 1.0)
    np.testing.assert_allclose(total.item(), np.sqrt(300), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(m.w.grad.numpy()), 1.0, rtol=1e-5)
