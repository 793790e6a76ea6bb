"""KV-cache generation of the char GPT (``ember.demo.CharGPT.generate_cached``, issue 21):
the same tokens as the uncached ``generate``, one compiled graph for every position, and
``index_copy_`` at a recorded (tensor) position lowered to C without a graph break."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.demo import CharGPT, KVCache
from ember.errors import EmberValueError


def _model(seed: int = 0) -> CharGPT:
    ember.manual_seed(seed)
    return CharGPT(23, block=16, d=24, layers=2, heads=3).eval()


def test_cached_equals_uncached_greedy_eager():
    m = _model()
    prompt = ember.tensor([[1, 5, 7], [2, 2, 9]])
    want = m.generate(prompt, 10, greedy=True)
    got = m.generate_cached(prompt, 10, greedy=True, compiled=False)
    assert got.tolist() == want.tolist()


def test_cached_equals_uncached_sampled_eager():
    m = _model(1)
    prompt = ember.tensor([[4]])
    ember.manual_seed(7)
    want = m.generate(prompt, 12, temperature=0.9)
    ember.manual_seed(7)
    got = m.generate_cached(prompt, 12, temperature=0.9, compiled=False)
    assert got.tolist() == want.tolist()


def test_cached_compiled_equals_uncached_and_never_recompiles():
    m = _model(2)
    prompt = ember.tensor([[3, 1]])
    want = m.generate(prompt, 13, greedy=True)
    step = m.compiled_decode_step(mode=None)  # Python runs every call: the cache is consulted
    cache = KVCache(m, 1)
    step(prompt[:, :1], ember.tensor(0), cache.k, cache.v)  # the one compile
    with ember.compiler.set_stance("fail_on_recompile"):
        for p in range(1, 16):  # every later position hits the same graph
            step(prompt[:, :1], ember.tensor(p), cache.k, cache.v)
    m.__dict__["_compiled_decode_steps"] = {None: step}
    got = m.generate_cached(prompt, 13, greedy=True)
    assert got.tolist() == want.tolist()


def test_cached_generation_replays_one_graph_per_token():
    m = _model(5)
    prompt = ember.tensor([[3, 1, 4]])
    ember.manual_seed(11)
    want = m.generate(prompt, 12, temperature=0.7)
    ember.manual_seed(11)
    got = m.generate_cached(prompt, 12, temperature=0.7)
    assert got.tolist() == want.tolist()
    step = m.compiled_decode_step()
    assert (step.record_count, step.replay_count) == (1, 3 + 12 - 1 - 1)
    again = m.generate_cached(prompt, 12, greedy=True)  # a new cache: replays too
    assert again.tolist() == m.generate(prompt, 12, greedy=True).tolist()
    assert step.record_count == 1


def test_decode_step_is_one_graph_without_breaks_or_externs():
    m = _model(3)
    cache = KVCache(m, 1)
    out = ember.compiler.explain(m.decode_step)(ember.tensor([[2]]), ember.tensor(0),
                                                cache.k, cache.v)
    assert (out.graph_count, out.graph_break_count, out.extern_count) == (1, 0, 0)


def test_decode_step_logits_match_full_forward():
    m = _model(4)
    seq = ember.tensor([[1, 2, 3, 4, 5, 6]])
    full = m(seq).detach().numpy()
    step = m.compiled_decode_step()
    cache = KVCache(m, 1)
    for p in range(seq.shape[1]):
        logits = step(seq[:, p:p + 1], ember.tensor(p), cache.k, cache.v)
        np.testing.assert_allclose(logits.numpy(), full[:, p], rtol=1e-4, atol=1e-5)


def test_index_copy_at_a_recorded_position_matches_torch():
    torch = pytest.importorskip("torch")
    buf = np.zeros((1, 2, 5, 3), np.float32)
    src = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3) + 1

    def f(b, pos, s):
        b.index_copy_(2, pos.view(1), s)
        return b * 2

    eb = ember.tensor(buf.copy())
    out = ember.compile(f)(eb, ember.tensor(3), ember.tensor(src))
    tb = torch.tensor(buf.copy())
    want = f(tb, torch.tensor(3), torch.tensor(src))
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    np.testing.assert_array_equal(eb.numpy(), tb.numpy())  # written back into the input


def test_generate_cached_rejects_too_long():
    m = _model()
    with pytest.raises(EmberValueError, match=r"\[generate_cached\]"):
        m.generate_cached(ember.tensor([[1, 2]]), 15)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["nn", "nt", "strided_a", "packed_b", "batched"])
def test_one_row_products_match_torch(dtype, layout):
    """A single-row product (a decode step's linear layers) runs as BLAS gemv in C."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    K, N = 37, 29
    a = rng.standard_normal((1, 2 * K)).astype(dtype)
    w = rng.standard_normal((K, N, 2)).astype(dtype)
    wt = rng.standard_normal((N, K)).astype(dtype)
    ab = rng.standard_normal((3, 1, K)).astype(dtype)
    wb = rng.standard_normal((3, K, N)).astype(dtype)

    def f(lib, a, w, wt, ab, wb):
        x = a[:, :K]
        if layout == "nn":
            return x @ w[:, :, 0].contiguous()
        if layout == "nt":
            return lib.nn.functional.linear(x, wt)
        if layout == "strided_a":
            return a[:, ::2] @ wt.t()
        if layout == "packed_b":
            return x @ w[:, :, 1]
        return ab @ wb

    args = (a, w, wt, ab, wb)
    ember.compiler.reset()  # each case compiles (no recompile limit across the cases)
    got = ember.compile(lambda *t: f(ember, *t))(*(ember.tensor(v) for v in args))
    assert ember.compiler.c.backend.last_compiled().externs == []  # the product ran in C
    want = f(torch, *(torch.tensor(v) for v in args))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)


@pytest.mark.xfail(strict=True, reason="index_copy_ with an index recorded in the graph: the "
                   "index_put kernel counts a negative index from the end, PyTorch raises")
def test_index_copy_recorded_negative_index_raises():
    def f(b, pos, s):
        b.index_copy_(0, (pos - 5).view(1), s)
        return b

    with pytest.raises(IndexError):
        ember.compile(f)(ember.zeros(4, 2), ember.tensor(3), ember.ones(1, 2))
