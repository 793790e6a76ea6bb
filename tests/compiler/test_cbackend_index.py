"""``embedding`` (a gather), ``embedding_backward`` (a scatter-add) and ``basic_index_backward``
as C kernels (``ember/compiler/c/lower/index.py``), against eager ember.

The gather copies values and the scatter-add adds the gradient rows in index order in the
result's dtype, as eager's ``np.add.at`` does, so both are bit-identical to eager; so is
``basic_index_backward`` (zeros and a copy).  Sizes above ``OMP_MIN_ITERATIONS`` run the
threaded loops (two threads here).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config
from ember.errors import EmberIndexError
from tests.compiler.helpers import lm_step

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional


@pytest.fixture(autouse=True)
def _two_threads():
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)


def _index_kernels(cg):
    return [k for k in cg.program.kernels() if type(k).__name__ == "IndexKernel"]


def _no_index_externs(cg):
    bad = [f for f in cg.stats.fallbacks if f.split(":")[0] in
           ("embedding", "embedding_backward", "basic_index_backward")]
    assert not bad, bad


SIZES = [(10, 7, (3, 5)), (300, 96, (8, 256))]   # (num weights, dim, index shape): small, threaded


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("num,dim,ishape", SIZES, ids=["small", "threaded"])
def test_embedding_forward_equals_eager(dtype, num, dim, ishape):
    rng = np.random.default_rng(0)
    w = ember.tensor(rng.standard_normal((num, dim))).to(dtype)
    idx = ember.tensor(rng.integers(0, num, ishape), dtype=ember.int64)

    def f(w, idx):
        return F.embedding(idx, w) * 2

    got = ember.compile(f, backend="c")(w, idx)
    cg = cbackend.last_compiled()
    _no_index_externs(cg)
    assert len(_index_kernels(cg)) == 1
    np.testing.assert_array_equal(got.numpy(), f(w, idx).numpy())


def test_embedding_strided_operands():
    # a transposed weight (column stride != 1) and a transposed, sliced index
    rng = np.random.default_rng(1)
    wt = ember.tensor(rng.standard_normal((6, 11)).astype(np.float32))
    idx = ember.tensor(rng.integers(0, 11, (7, 4)), dtype=ember.int64)

    def f(wt, idx):
        return F.embedding(idx.t()[:, 1:], wt.t()) + 1

    got = ember.compile(f, backend="c")(wt, idx)
    _no_index_externs(cbackend.last_compiled())
    np.testing.assert_array_equal(got.numpy(), f(wt, idx).numpy())


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("num,dim,ishape", SIZES, ids=["small", "threaded"])
def test_embedding_backward_bit_identical(dtype, num, dim, ishape):
    # repeated indices (few weights, many rows): every row sums several gradient rows
    rng = np.random.default_rng(2)
    w = ember.tensor(rng.standard_normal((num, dim))).to(dtype).requires_grad_()
    idx = ember.tensor(rng.integers(0, max(2, num // 4), ishape), dtype=ember.int64)
    g = ember.tensor(rng.standard_normal(ishape + (dim,))).to(dtype)

    def f(w, idx, g):
        (F.embedding(idx, w) * g).sum().backward()
        return w.grad

    want = f(w, idx, g).numpy().copy()
    w.grad = None
    got = ember.compile(f, backend="c")(w, idx, g)
    cg = cbackend.last_compiled()
    _no_index_externs(cg)
    assert [k.scatter for k in _index_kernels(cg)] == [True]   # the unused gather is dropped
    np.testing.assert_array_equal(got.numpy(), want)


def test_embedding_backward_of_a_strided_gradient():
    rng = np.random.default_rng(3)
    idx = ember.tensor(rng.integers(0, 5, (4, 3)), dtype=ember.int64)
    g = ember.tensor(rng.standard_normal((3, 4, 6)).astype(np.float32))

    def f(g, idx):   # the gradient rows read through a transposed view
        return ember.ops.bind(ember.ops.nn_conv.EMBEDDING_BACKWARD, g.transpose(0, 1), idx,
                              num_weights=5, padding_idx=None, scale_grad_by_freq=False) * 1

    got = ember.compile(f, backend="c")(g, idx)
    _no_index_externs(cbackend.last_compiled())
    np.testing.assert_array_equal(got.numpy(), f(g, idx).numpy())


@pytest.mark.parametrize("bad", [10, -1], ids=["past_the_end", "negative"])
def test_index_out_of_range_raises_as_eager(bad):
    w = ember.randn(10, 4)
    idx = ember.tensor([[1, 2, bad]], dtype=ember.int64)

    def f(w, idx):
        return F.embedding(idx, w) + 1

    with pytest.raises(EmberIndexError, match="index out of range"):
        f(w, idx)
    with pytest.raises(EmberIndexError, match="index out of range"):
        ember.compile(f, backend="c")(w, idx)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("scale", [False, True])
def test_padding_idx_and_scale_grad_by_freq_lower(dtype, scale):
    """The scaled scatter-add (0 at padding_idx, 1/count with scale_grad_by_freq) and its
    double backward's masked gather run in C and equal eager (float16 accumulates in float)."""
    rng = np.random.default_rng(4)
    dt = getattr(ember, dtype)
    w = ember.tensor(rng.standard_normal((8, 5)), dtype=dt, requires_grad=True)
    idx = ember.tensor(rng.integers(0, 8, (4, 6)), dtype=ember.int64)

    def f(w, idx):
        out = F.embedding(idx, w, padding_idx=0, scale_grad_by_freq=scale)
        (g,) = ember.autograd.grad([out], [w], [out], create_graph=True)
        return g, ember.autograd.grad([g], [w], [ember.ones_like(g)])[0]

    want = [t.detach().numpy().copy() for t in f(w, idx)]
    got = ember.compile(f, backend="c")(w, idx)
    cg = cbackend.last_compiled()
    assert not any(f.startswith("embedding") for f in cg.stats.fallbacks), cg.stats.fallbacks
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.detach().numpy(), b)


@pytest.mark.parametrize("key", [
    lambda x: x[:5], lambda x: x[1::2], lambda x: x[2], lambda x: x[None, 1:3, ::3],
    lambda x: x[:, 2:4], lambda x: x[-3:, None, 1]],
    ids=["prefix", "step", "int", "none_and_step", "columns", "tail_int"])
def test_basic_index_backward(key):
    rng = np.random.default_rng(5)
    x = ember.tensor(rng.standard_normal((8, 6)).astype(np.float32), requires_grad=True)

    def f(x):
        y = key(x)
        (y * y).sum().backward()
        return x.grad

    want = f(x).numpy().copy()
    x.grad = None
    got = ember.compile(f, backend="c")(x)
    _no_index_externs(cbackend.last_compiled())
    np.testing.assert_array_equal(got.numpy(), want)


def test_gpt_training_step_has_no_externs():
    """The char GPT's training step: token and position embeddings and their gradients in C,
    so forward, backward and the AdamW step are one C segment without externs."""
    from ember import demo
    ember.manual_seed(0)
    m = demo.CharGPT(20, block=16, d=32, layers=1, heads=2)
    opt = ember.optim.AdamW(m.parameters(), lr=1e-2)

    rng = np.random.default_rng(0)
    x = ember.tensor(rng.integers(0, 20, (2, 16)), dtype=ember.int64)
    y = ember.tensor(rng.integers(0, 20, (2, 16)), dtype=ember.int64)
    f = ember.compile(lambda x, y: lm_step(m, opt, x, y), backend="c")
    for _ in range(2):   # the second step is the steady graph (AdamW's state exists)
        f(x, y).item()
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0 and cg.stats.segments == 1, cg.stats.fallbacks
