"""Sparse COO tensors against PyTorch: construction, accessors, coalesce, to_dense/to_sparse,
sparse @ dense with gradients, and a GCN layer in the style of public graph examples."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

IDX = np.array([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]])  # (0, 2) twice: uncoalesced
VAL = np.array([3.0, 4.0, 5.0, -1.0, 0.5])


def _pair(dtype=np.float64):
    e = ember.sparse_coo_tensor(ember.tensor(IDX), ember.tensor(VAL.astype(dtype)), (4, 3))
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL.astype(dtype)), (4, 3))
    return e, t


def test_construction_and_accessors():
    e, t = _pair()
    assert e.is_sparse and e.layout == ember.sparse_coo
    assert tuple(e.shape) == tuple(t.shape) and e._nnz() == t._nnz() == 5
    assert e.sparse_dim() == t.sparse_dim() and e.dense_dim() == t.dense_dim()
    assert e.is_coalesced() == t.is_coalesced() is False
    np.testing.assert_array_equal(e._indices().numpy(), t._indices().numpy())
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor"):
        e.indices()
    c, tc = e.coalesce(), t.coalesce()
    assert c.is_coalesced() and c._nnz() == tc._nnz() == 4
    np.testing.assert_array_equal(c.indices().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(c.values().numpy(), tc.values().numpy())


def test_size_inferred_and_hybrid_values():
    e = ember.sparse_coo_tensor(IDX, VAL)
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL))
    assert tuple(e.shape) == tuple(t.shape)
    v = np.arange(10.0).reshape(5, 2)
    e = ember.sparse_coo_tensor(ember.tensor(IDX), ember.tensor(v), (4, 3, 2))
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(v), (4, 3, 2))
    np.testing.assert_allclose(e.to_dense().numpy(), t.to_dense().numpy())
    np.testing.assert_allclose(e.coalesce().values().numpy(), t.coalesce().values().numpy())


def test_to_dense_and_to_sparse_round_trip():
    e, t = _pair()
    np.testing.assert_allclose(e.to_dense().numpy(), t.to_dense().numpy())
    d = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    es, ts = ember.tensor(d).to_sparse(), torch.tensor(d).to_sparse()
    np.testing.assert_array_equal(es.indices().numpy(), ts.indices().numpy())
    np.testing.assert_allclose(es.values().numpy(), ts.values().numpy())
    np.testing.assert_allclose(es.t().to_dense().numpy(), ts.t().to_dense().numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sparse_mm_values_and_grads(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(dtype)
    ev = ember.tensor(VAL.astype(dtype), requires_grad=True)
    tv = torch.tensor(VAL.astype(dtype), requires_grad=True)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    es = ember.sparse_coo_tensor(ember.tensor(IDX), ev, (4, 3))
    ts = torch.sparse_coo_tensor(torch.tensor(IDX), tv, (4, 3))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for ey, ty in [(ember.sparse.mm(es, ex), torch.sparse.mm(ts, tx)),
                   (ember.spmm(es, ex), torch.spmm(ts, tx)), (ember.mm(es, ex), torch.mm(ts, tx)),
                   (es @ ex, ts @ tx)]:
        np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), **tol)
    w = rng.standard_normal((4, 5)).astype(dtype)
    (ember.sparse.mm(es, ex) * ember.tensor(w)).sum().backward()
    (torch.sparse.mm(ts, tx) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(ev.grad.numpy(), tv.grad.to_dense().numpy()
                               if tv.grad.is_sparse else tv.grad.numpy(), **tol)


def test_legacy_constructor_and_vector_product():
    e = ember.sparse.FloatTensor(ember.tensor(IDX), ember.tensor(VAL), ember.Size([4, 3]))
    assert e.dtype is ember.float32
    v = np.array([1.0, 2.0, 3.0], np.float32)
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL, dtype=torch.float32), (4, 3))
    np.testing.assert_allclose((e @ ember.tensor(v)).numpy(), (t @ torch.tensor(v)).numpy(),
                               rtol=1e-6)


def test_errors():
    with pytest.raises(RuntimeError, match=r"indices and values must have same nnz, but got "
                                           r"nnz from indices: 5, nnz from values: 2"):
        ember.sparse_coo_tensor(IDX, [1.0, 2.0], (4, 3))
    with pytest.raises(RuntimeError, match=r"for dim 0, size is 2 but found index 3"):
        ember.sparse_coo_tensor(IDX, VAL, (2, 3))
    e, _ = _pair()
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        e + ember.ones(4, 3)
    with pytest.raises(RuntimeError, match=r"\[sparse\] Tensor.exp is not supported"):
        e.exp()
    with pytest.raises(RuntimeError, match=r"shapes cannot be multiplied \(4x3 and 4x2\)"):
        ember.sparse.mm(e, ember.ones(4, 2, dtype=ember.float64))


def _normalized_adjacency(n, rng):
    a = (rng.random((n, n)) < 0.3).astype(np.float32)
    a = np.maximum(a, a.T) + np.eye(n, dtype=np.float32)
    d = a.sum(1)
    a = a / d[:, None]
    idx = np.stack(np.nonzero(a))
    return idx, a[tuple(idx)]


def test_gcn_training_matches_torch():
    """Two GCN layers (Kipf & Welling style: spmm(adj, x @ W)) trained for a few steps."""
    rng = np.random.default_rng(1)
    n, f, h, c = 12, 6, 8, 3
    idx, vals = _normalized_adjacency(n, rng)
    feats = rng.standard_normal((n, f)).astype(np.float32)
    labels = rng.integers(0, c, n)
    w1 = (rng.standard_normal((f, h)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((h, c)) * 0.3).astype(np.float32)

    def run(lib):
        adj = lib.sparse.FloatTensor(lib.tensor(idx), lib.tensor(vals), lib.Size([n, n]))
        p1 = lib.nn.Parameter(lib.tensor(w1))
        p2 = lib.nn.Parameter(lib.tensor(w2))
        opt = lib.optim.Adam([p1, p2], lr=0.01)
        x, y, losses = lib.tensor(feats), lib.tensor(labels), []
        for _ in range(5):
            opt.zero_grad()
            hid = lib.nn.functional.relu(lib.spmm(adj, x @ p1))
            out = lib.sparse.mm(adj, hid @ p2)
            loss = lib.nn.functional.nll_loss(lib.nn.functional.log_softmax(out, dim=1), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, p1.detach().numpy()

    el, ew = run(ember)
    tl, tw = run(torch)
    np.testing.assert_allclose(el, tl, rtol=1e-5)
    np.testing.assert_allclose(ew, tw, rtol=1e-4, atol=1e-6)
