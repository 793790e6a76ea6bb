"""``sort``/``topk`` as ``SortKernel``s (``c/lower/sort.py``) and their gradients' gather and
scatter-add as ``DimIndexKernel``s: no externs, bit-identical to eager ember (stable order,
NaN largest), equal to PyTorch."""

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

FNS = [("sort", lambda t, x: t.sort(x, dim=1, stable=True)),
       ("sort_desc_dim0", lambda t, x: t.sort(x, dim=0, descending=True, stable=True)),
       ("topk", lambda t, x: t.topk(x, 4, dim=1)),
       ("topk_smallest_dim0", lambda t, x: t.topk(x, 2, dim=0, largest=False)),
       ("sort_transposed", lambda t, x: t.sort(x.t(), dim=1, descending=True, stable=True))]


@pytest.fixture(autouse=True)
def _two_threads():
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)


def _data(dtype):
    rng = np.random.default_rng(0)
    xs = rng.integers(-3, 4, (6, 40)).astype(np.float64)   # many ties: stability shows
    if dtype.is_floating_point:
        xs[1, 3] = xs[1, 7] = xs[4, 0] = np.nan
    return xs


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16,
                                   ember.int64, ember.int32, ember.uint8], ids=lambda d: d.name)
@pytest.mark.parametrize("name,fn", FNS, ids=[f[0] for f in FNS])
def test_sort_and_topk(name, fn, dtype):
    xs = _data(dtype)
    if dtype is ember.uint8:
        xs = xs + 3
    x = ember.tensor(xs).to(dtype)
    got = ember.compile(lambda x: fn(ember, x), backend="c", dynamic=False)(x)
    assert cbackend.last_compiled().stats.externs == 0, cbackend.last_compiled().stats.fallbacks
    want = fn(ember, x)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.double().numpy(), b.double().numpy())
    if dtype in (ember.float32, ember.float64, ember.int64):
        tv, ti = fn(torch, torch.tensor(xs).to(getattr(torch, dtype.name)))
        np.testing.assert_array_equal(got[0].double().numpy(), tv.double().numpy())
        if name.startswith("sort"):   # torch's topk does not promise the order of ties
            np.testing.assert_array_equal(got[1].numpy(), ti.numpy())


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16],
                         ids=lambda d: d.name)
def test_gradients_lower(dtype):
    x = ember.tensor(np.random.default_rng(1).standard_normal((5, 30))).to(dtype)
    x.requires_grad_()

    def f(x):
        v, _ = ember.topk(x, 3, dim=1)
        s, _ = ember.sort(x, dim=0)
        ((v * v).sum() + (s * s[:, :1]).sum()).backward()
        return x.grad

    want = f(x).float().numpy().copy()
    x.grad = None
    got = ember.compile(f, backend="c", dynamic=False)(x)
    assert cbackend.last_compiled().stats.externs == 0, cbackend.last_compiled().stats.fallbacks
    np.testing.assert_array_equal(got.float().numpy(), want)
    tx = torch.tensor(x.detach().float().numpy(), requires_grad=True)
    tv, _ = torch.topk(tx, 3, dim=1)
    ts, _ = torch.sort(tx, dim=0)
    ((tv * tv).sum() + (ts * ts[:, :1]).sum()).backward()
    tol = {"float16": 1e-2, "bfloat16": 6e-2}.get(dtype.name, 1e-5)
    np.testing.assert_allclose(got.float().numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.int64],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("name", ["kthvalue", "median_dim", "median_all", "kthvalue_keepdim"])
def test_kthvalue_and_median(name, dtype):
    xs = _data(dtype)[:, :9]
    x = ember.tensor(xs).to(dtype)
    fn = {"kthvalue": lambda t, x: t.kthvalue(x, 3, dim=1),
          "median_dim": lambda t, x: t.median(x, dim=0),
          "median_all": lambda t, x: (t.median(x), t.median(x[2:4])),
          "kthvalue_keepdim": lambda t, x: t.kthvalue(x, 2, 0, keepdim=True)}[name]
    got = ember.compile(lambda x: fn(ember, x), backend="c", dynamic=False)(x)
    assert cbackend.last_compiled().stats.externs == 0, cbackend.last_compiled().stats.fallbacks
    for a, b in zip(got, fn(ember, x)):
        np.testing.assert_array_equal(a.double().numpy(), b.double().numpy())
    if dtype in (ember.float32, ember.float64, ember.int64):
        ref = fn(torch, torch.tensor(xs).to(getattr(torch, dtype.name)))
        pairs = zip(got, ref) if name == "median_all" else [(got[0], ref[0])]
        for a, b in pairs:   # values only: torch may pick another index among ties
            np.testing.assert_array_equal(a.double().numpy(), b.double().numpy())


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.int64],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("right", [False, True], ids=["left", "right"])
def test_searchsorted(right, dtype):
    rng = np.random.default_rng(3)
    seq = np.sort(rng.integers(-5, 5, (3, 8)), axis=1).astype(np.float64)
    vals = rng.integers(-6, 6, (3, 5)).astype(np.float64)
    if dtype.is_floating_point:
        seq[2, 7] = vals[0, 1] = np.nan   # PyTorch's comparisons with NaN, not NumPy's order
    srt = np.argsort(rng.standard_normal((3, 8)), axis=1)

    def fn(t, s, v, o):
        return (t.searchsorted(s, v, right=right), t.searchsorted(s[1], v, right=right),
                t.searchsorted(s, v, sorter=o, out_int32=True))

    args = (ember.tensor(seq).to(dtype), ember.tensor(vals).to(dtype),
            ember.tensor(srt, dtype=ember.int64))
    got = ember.compile(lambda *a: fn(ember, *a), backend="c", dynamic=False)(*args)
    assert cbackend.last_compiled().stats.externs == 0, cbackend.last_compiled().stats.fallbacks
    td = getattr(torch, dtype.name)
    ref = fn(torch, torch.tensor(seq).to(td), torch.tensor(vals).to(td), torch.tensor(srt))
    for a, b, c in zip(got, fn(ember, *args), ref):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_array_equal(a.numpy(), c.numpy())
        assert a.dtype.name == str(c.dtype).replace("torch.", "")


def test_searchsorted_bad_sorter_raises_as_eager():
    seq, vals = ember.arange(8.0).reshape(2, 4), ember.ones(2, 3)
    srt = ember.tensor([[0, 1, 2, 3], [0, 9, 2, 1]], dtype=ember.int64)

    def f(s, v, o):
        return ember.searchsorted(s, v, sorter=o)

    with pytest.raises(RuntimeError, match="sorter index out of range"):
        ember.compile(f, backend="c")(seq, vals, srt)
