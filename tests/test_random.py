"""Randomness: the Philox4x32-10 stream (known-answer vectors and a pure-Python reference of
docs/random.md), generators and their state, determinism, distributions, and dropout."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops import random as R
from ember.ops._philox import philox4x32, random_words

N = 100_000


# ------------------------------------------------------------------------------- Philox
@pytest.mark.parametrize("ctr,key,expected", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_known_answers(ctr, key, expected):
    """Random123's kat_vectors for philox4x32_10."""
    out = philox4x32(np.array([ctr], np.uint32), key)
    assert tuple(int(v) for v in out[0]) == expected


def _philox_ref(ctr: list[int], key: list[int]) -> list[int]:
    """Philox4x32-10 with Python ints, written from the paper, independent of the NumPy one."""
    m = 0xFFFFFFFF
    c, k = list(ctr), list(key)
    for r in range(10):
        if r:
            k = [(k[0] + 0x9E3779B9) & m, (k[1] + 0xBB67AE85) & m]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & m, (p0 >> 32) ^ c[3] ^ k[1], p0 & m]
    return c


def _words_ref(seed: int, offset: int, n: int) -> list[int]:
    """docs/random.md: word w is lane w % 4 of Philox(counter = w // 4, key = seed)."""
    key = [seed & 0xFFFFFFFF, seed >> 32]
    out = []
    for w in range(offset, offset + n):
        blk = w // 4
        out.append(_philox_ref([blk & 0xFFFFFFFF, blk >> 32, 0, 0], key)[w % 4])
    return out


@pytest.mark.parametrize("seed,offset,n", [(0, 0, 9), (2 ** 40 + 12345, 8, 7),
                                           (2 ** 64 - 1, 6, 5), (7, 4 * 2 ** 33, 6),
                                           (0, 0, 33), (2 ** 64 - 1, 6, 100),
                                           (7, 4 * 2 ** 32 - 8, 40), (9, 2 ** 40 + 3, 64)])
def test_stream_matches_the_spec(seed, offset, n):
    assert random_words(seed, offset, n).tolist() == _words_ref(seed, offset, n)


def test_stream_is_one_sequence():
    w = random_words(3, 0, 80)          # crosses the small-draw path's size limit
    for off in (0, 1, 4, 7, 13, 50, 60):
        np.testing.assert_array_equal(random_words(3, off, 80 - off), w[off:])
        np.testing.assert_array_equal(random_words(3, off, 5), w[off:off + 5])
    assert random_words(3, 0, 0).shape == (0,)


def test_rand_follows_the_spec():
    """float32: (w >> 8) * 2**-24; float64: ((a >> 5) * 2**26 + (b >> 6)) * 2**-53."""
    g = ember.Generator().manual_seed(99)
    ref = [(w >> 8) * 2.0 ** -24 for w in _words_ref(99, 0, 6)]
    assert ember.rand(6, generator=g).tolist() == ref
    words = _words_ref(99, 8, 6)     # the first call consumed 6 words, rounded up to 8
    ref64 = [((a >> 5) * 2 ** 26 + (b >> 6)) * 2.0 ** -53
             for a, b in zip(words[0::2], words[1::2])]
    assert ember.rand(3, dtype=ember.float64, generator=g).tolist() == ref64


def test_randn_follows_the_spec():
    """Box-Muller on pairs: u1 = 1 - (w0 >> 8) * 2**-24, u2 = (w1 >> 8) * 2**-24."""
    g = ember.Generator().manual_seed(5)
    words = _words_ref(5, 0, 4)
    ref = []
    for w0, w1 in zip(words[0::2], words[1::2]):
        u1 = 1.0 - (w0 >> 8) * 2.0 ** -24
        u2 = (w1 >> 8) * 2.0 ** -24
        r = math.sqrt(-2.0 * math.log(u1))
        ref += [r * math.cos(2 * math.pi * u2), r * math.sin(2 * math.pi * u2)]
    out32 = ember.randn(3, generator=g)
    np.testing.assert_array_equal(out32._data, np.array(ref[:3], np.float32))
    # float64: each uniform takes two words (53 bits), so a pair takes four
    words = _words_ref(5, 4, 4)           # the float32 call above consumed words 0..3

    def res53(a, b):
        return ((a >> 5) * 2 ** 26 + (b >> 6)) * 2.0 ** -53

    u1, u2 = 1.0 - res53(words[0], words[1]), res53(words[2], words[3])
    r = math.sqrt(-2.0 * math.log(u1))
    ref64 = [r * math.cos(2 * math.pi * u2), r * math.sin(2 * math.pi * u2)]
    out64 = ember.randn(2, generator=g, dtype=ember.float64)
    np.testing.assert_allclose(out64._data, ref64, rtol=1e-15, atol=0)


# ------------------------------------------------------------------------------- generators
def test_manual_seed_makes_sequences_reproducible():
    def draw():
        return [ember.rand(5), ember.randn(2, 3), ember.randint(0, 10, (4,)), ember.randperm(6),
                ember.normal(ember.zeros(3), 1.0), ember.bernoulli(ember.full((5,), 0.5)),
                F.dropout(ember.ones(8), 0.5), ember.empty(3).uniform_(-1, 1)]

    g = ember.manual_seed(1234)
    assert g is ember.default_generator and ember.initial_seed() == 1234
    a = draw()
    ember.manual_seed(1234)
    b = draw()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x._data, y._data)
    ember.manual_seed(1235)
    c = draw()
    assert not np.array_equal(a[0]._data, c[0]._data)


def test_default_generator_advances():
    ember.manual_seed(0)
    a, b = ember.rand(4), ember.rand(4)
    assert not np.array_equal(a._data, b._data)
    assert ember.default_generator.get_offset() == 8


def test_offset_advances_by_whole_blocks():
    g = ember.Generator().manual_seed(0)
    steps = [(lambda: ember.rand(5, generator=g), 8),
             (lambda: ember.rand(5, dtype=ember.float64, generator=g), 12),
             (lambda: ember.randn(5, generator=g), 8),          # 3 pairs -> 6 words
             (lambda: ember.randn(3, dtype=ember.float64, generator=g), 8),
             (lambda: ember.randint(10, (3,), generator=g), 4),
             (lambda: ember.randint(0, 2 ** 40, (3,), generator=g), 8),
             (lambda: ember.randperm(3, generator=g), 8),
             (lambda: ember.rand(0, generator=g), 0)]
    for fn, advance in steps:
        before = g.get_offset()
        fn()
        assert g.get_offset() - before == advance


def test_generators_are_independent():
    g1 = ember.Generator().manual_seed(7)
    g2 = ember.Generator().manual_seed(7)
    ember.manual_seed(0)
    state = ember.get_rng_state()
    a = ember.rand(10, generator=g1)
    ember.rand(3)                          # the default generator does not disturb g2
    b = ember.rand(10, generator=g2)
    np.testing.assert_array_equal(a._data, b._data)
    ember.set_rng_state(state)
    ember.rand(3)
    assert ember.default_generator.get_offset() == 4
    assert ember.Generator().initial_seed() == 67280421310721


def test_state_save_and_restore():
    g = ember.Generator().manual_seed(42)
    ember.rand(3, generator=g)
    state = g.get_state()
    assert state.dtype is ember.uint8 and state.shape == (16,)
    a = ember.randn(7, generator=g)
    g.set_state(state)
    b = ember.randn(7, generator=g)
    np.testing.assert_array_equal(a._data, b._data)
    # the state is a copy: drawing does not change a saved state
    assert np.array_equal(state._data, g.get_state()._data) is False
    h = ember.Generator().set_state(state)
    np.testing.assert_array_equal(ember.randn(7, generator=h)._data, a._data)
    c = h.clone_state()
    np.testing.assert_array_equal(ember.rand(5, generator=c)._data,
                                  ember.rand(5, generator=h)._data)
    # the DataLoader idiom: seed a generator from a random int64
    seed = int(ember.empty((), dtype=ember.int64).random_(generator=g).item())
    assert 0 <= seed < 2 ** 63
    assert ember.Generator().manual_seed(seed).initial_seed() == seed


def test_rng_state_of_the_default_generator():
    ember.manual_seed(3)
    s = ember.get_rng_state()
    a = ember.rand(5)
    ember.set_rng_state(s)
    np.testing.assert_array_equal(ember.rand(5)._data, a._data)
    with ember.random.fork_rng():
        ember.rand(100)
    np.testing.assert_array_equal(ember.random.get_rng_state()._data,
                                  ember.get_rng_state()._data)
    assert ember.random.manual_seed is ember.manual_seed


def test_seed_and_initial_seed():
    s = ember.seed()
    assert isinstance(s, int) and 0 <= s < 2 ** 64 and ember.initial_seed() == s
    g = ember.Generator()
    assert g.seed() == g.initial_seed()
    assert ember.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    assert ember.manual_seed(2.0).initial_seed() == 2
    assert g.device.type == "cpu"


def test_generator_errors():
    g = ember.Generator()
    with pytest.raises(RuntimeError, match=r"\[manual_seed\] manual_seed expected a long"):
        g.manual_seed(1.5)
    with pytest.raises(ValueError, match=r"Overflow"):
        ember.manual_seed(2 ** 64)
    with pytest.raises(RuntimeError, match=r"\[set_state\] .*16 bytes.* size to be 3"):
        g.set_state(ember.zeros(3, dtype=ember.uint8))
    with pytest.raises(TypeError, match=r"\[set_state\] RNG state must be"):
        g.set_state(ember.zeros(16))
    with pytest.raises(TypeError, match=r"expected an ember.Generator"):
        ember.rand(3, generator=object())
    with pytest.raises(RuntimeError, match=r"\[Generator\]"):
        ember.Generator(device="cuda")


# ------------------------------------------------------------------------------- distributions
def _within(value, expected, sigma, k=4.0):
    assert abs(value - expected) < k * sigma, (value, expected, sigma)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_rand_is_uniform(dtype):
    g = ember.Generator().manual_seed(11)
    x = ember.rand(N, dtype=getattr(ember, dtype), generator=g)._data.astype(np.float64)
    assert x.min() >= 0.0 and x.max() < 1.0
    _within(x.mean(), 0.5, math.sqrt(1 / 12 / N))
    _within(x.var(), 1 / 12, math.sqrt(1 / 180 / N))
    # 16 bins line up with the dtype's grid of 2**-bits values
    counts = np.histogram(x, bins=16, range=(0, 1))[0]
    chi2 = ((counts - N / 16) ** 2 / (N / 16)).sum()
    assert chi2 < 50, chi2        # 15 degrees of freedom: p < 1e-5 beyond 50


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_randn_is_standard_normal(dtype):
    g = ember.Generator().manual_seed(12)
    x = ember.randn(N + 1, dtype=getattr(ember, dtype), generator=g)._data.astype(np.float64)
    assert np.isfinite(x).all()
    _within(x.mean(), 0.0, 1 / math.sqrt(N))
    _within(x.std(), 1.0, math.sqrt(1 / (2 * N)) + (0.01 if dtype == "bfloat16" else 0))
    # tails: P(|z| > 2) = 0.0455 (bfloat16 rounds too coarsely around 2 for this check)
    if dtype != "bfloat16":
        _within((np.abs(x) > 2).mean(), 0.0455, math.sqrt(0.0455 * 0.9545 / N))
    # Box-Muller pairs are uncorrelated
    assert abs(np.corrcoef(x[0:N:2], x[1:N:2])[0, 1]) < 4 / math.sqrt(N / 2)


def test_uniform_normal_exponential_inplace():
    g = ember.Generator().manual_seed(13)
    x = ember.empty(N).uniform_(-2, 3, generator=g)._data.astype(np.float64)
    assert x.min() >= -2 and x.max() < 3
    _within(x.mean(), 0.5, 5 / math.sqrt(12 * N))
    y = ember.empty(N, dtype=ember.float64).normal_(3.0, 2.0, generator=g)._data
    _within(y.mean(), 3.0, 2 / math.sqrt(N))
    _within(y.std(), 2.0, 2 * math.sqrt(1 / (2 * N)))
    z = ember.empty(N).exponential_(4.0, generator=g)._data.astype(np.float64)
    assert z.min() >= 0
    _within(z.mean(), 0.25, 0.25 / math.sqrt(N))


def test_cauchy_log_normal_geometric():
    g = ember.Generator().manual_seed(24)
    c = ember.empty(N, dtype=ember.float64).cauchy_(1.0, 2.0, generator=g)._data
    # median and quartiles of Cauchy(1, 2): 1 -/+ 2
    q1, med, q3 = np.quantile(c, [0.25, 0.5, 0.75])
    se = 4 * math.sqrt(0.25 * 0.75 / N) * math.pi * 2 * 2   # generous: density at quartiles
    _within(med, 1.0, se)
    _within(q1, -1.0, se)
    _within(q3, 3.0, se)
    ln = ember.empty(N, dtype=ember.float64).log_normal_(0.5, 0.25, generator=g)._data
    assert (ln > 0).all()
    _within(np.log(ln).mean(), 0.5, 0.25 / math.sqrt(N))
    _within(np.log(ln).std(), 0.25, 0.25 * math.sqrt(1 / (2 * N)))
    geo = ember.empty(N, dtype=ember.int64).geometric_(0.3, generator=g)._data
    assert geo.dtype == np.int64 and geo.min() == 1
    _within(geo.mean(), 1 / 0.3, math.sqrt(0.7 / 0.09 / N))
    _within((geo == 1).mean(), 0.3, math.sqrt(0.21 / N))
    with pytest.raises(RuntimeError, match=r"\[geometric_\] geometric_ expects p to be in"):
        ember.empty(2).geometric_(1.0)
    with pytest.raises(RuntimeError, match=r"\[log_normal_\] log_normal_ expects std > 0.0"):
        ember.empty(2).log_normal_(1.0, 0.0)
    with pytest.raises(RuntimeError, match=r"\[cauchy_\] cauchy_ expects sigma > 0.0"):
        ember.empty(2).cauchy_(0.0, -1.0)
    with pytest.raises(RuntimeError, match=r"\[cauchy_\] Cauchy distribution is a continuous"):
        ember.empty(2, dtype=ember.int64).cauchy_()
    with pytest.raises(RuntimeError, match=r"\[exponential_\] Exponential distribution"):
        ember.empty(2, dtype=ember.int64).exponential_()


def test_randint_bounds_and_coverage():
    g = ember.Generator().manual_seed(14)
    x = ember.randint(-3, 7, (N,), generator=g)
    assert x.dtype is ember.int64
    v = x._data
    assert v.min() == -3 and v.max() == 6
    assert set(np.unique(v).tolist()) == set(range(-3, 7))
    _within(v.mean(), 1.5, math.sqrt((10 ** 2 - 1) / 12 / N))
    big = ember.randint(-(2 ** 62), 2 ** 62, (1000,), generator=g)._data
    assert big.min() >= -(2 ** 62) and big.max() < 2 ** 62 and big.std() > 2 ** 60
    full = ember.randint(-(2 ** 63), 2 ** 63 - 1, (1000,), generator=g)._data
    assert (full < 0).any() and (full > 0).any()
    u8 = ember.randint(0, 256, (N,), dtype=ember.uint8, generator=g)._data
    assert u8.dtype == np.uint8 and len(np.unique(u8)) == 256
    b = ember.randint(0, 2, (1000,), dtype=ember.bool, generator=g)._data
    assert b.dtype == np.bool_ and b.any() and not b.all()
    f = ember.randint_like(ember.zeros(2000), 5, 9, generator=g)._data
    assert f.dtype == np.float32 and set(np.unique(f).tolist()) == {5.0, 6.0, 7.0, 8.0}


def test_random_inplace():
    g = ember.Generator().manual_seed(15)
    x = ember.zeros(N, dtype=ember.int32).random_(3, 9, generator=g)._data
    assert set(np.unique(x).tolist()) == set(range(3, 9))
    y = ember.zeros(1000, dtype=ember.int8).random_(generator=g)._data
    assert y.min() >= 0 and y.max() <= 127 and y.max() > 100
    z = ember.zeros(1000, dtype=ember.float16).random_(generator=g)._data
    assert z.min() >= 0 and z.max() <= 2 ** 11 and (z == np.round(z)).all()


def test_randperm_is_a_permutation():
    g = ember.Generator().manual_seed(16)
    p = ember.randperm(1000, generator=g)
    assert p.dtype is ember.int64
    assert sorted(p.tolist()) == list(range(1000))
    assert p.tolist() != list(range(1000))
    # each position is uniform: the mean of the first element over many draws
    first = [ember.randperm(10, generator=g).tolist()[0] for _ in range(2000)]
    _within(np.mean(first), 4.5, math.sqrt(99 / 12 / 2000))
    assert ember.randperm(0).shape == (0,)


def test_bernoulli_frequency():
    g = ember.Generator().manual_seed(17)
    p = ember.full((N,), 0.3)
    x = ember.bernoulli(p, generator=g)._data
    assert set(np.unique(x).tolist()) <= {0.0, 1.0}
    _within(x.mean(), 0.3, math.sqrt(0.21 / N))
    probs = ember.tensor([0.0, 1.0] * 50)
    out = ember.bernoulli(probs, generator=g)._data
    np.testing.assert_array_equal(out, probs._data)
    y = ember.zeros(N, dtype=ember.int64).bernoulli_(0.8, generator=g)._data
    assert y.dtype == np.int64
    _within(y.mean(), 0.8, math.sqrt(0.16 / N))
    z = ember.empty(N).bernoulli_(ember.tensor([0.1]), generator=g)._data
    _within(z.mean(), 0.1, math.sqrt(0.09 / N))
    w = ember.ones(N, dtype=ember.float64).bernoulli(0.6, generator=g)._data
    _within(w.mean(), 0.6, math.sqrt(0.24 / N))


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial(replacement):
    g = ember.Generator().manual_seed(18)
    probs = ember.tensor([[1.0, 0.0, 3.0, 4.0], [0.0, 5.0, 5.0, 0.0]])
    if replacement:
        x = ember.multinomial(probs, N, True, generator=g)._data
        assert x.shape == (2, N) and x.dtype == np.int64
        f0 = np.bincount(x[0], minlength=4) / N
        f1 = np.bincount(x[1], minlength=4) / N
        assert f0[1] == 0 and f1[0] == 0 and f1[3] == 0
        for got, want in zip(f0, [0.125, 0.0, 0.375, 0.5]):
            _within(got, want, math.sqrt(want * (1 - want) / N) + 1e-12)
        _within(f1[1], 0.5, math.sqrt(0.25 / N))
    else:
        rows = [ember.multinomial(probs, 2, generator=g)._data for _ in range(2000)]
        for r in rows:
            assert len(set(r[0].tolist())) == 2 and 1 not in r[0].tolist()
            assert sorted(r[1].tolist()) == [1, 2]
        # first draw of row 0 follows the probabilities
        first = np.bincount([r[0][0] for r in rows], minlength=4) / 2000
        _within(first[3], 0.5, math.sqrt(0.25 / 2000))
        allcat = ember.multinomial(ember.tensor([1.0, 0.0, 2.0]), 3, generator=g).tolist()
        assert sorted(allcat) == [0, 1, 2] and allcat[-1] == 1


def test_normal_overloads():
    g = ember.Generator().manual_seed(19)
    m = ember.full((N,), 3.0, dtype=ember.float64)
    s = ember.full((N,), 2.0, dtype=ember.float64)
    for out in (ember.normal(m, s, generator=g), ember.normal(m, 2.0, generator=g),
                ember.normal(3.0, s, generator=g),
                ember.normal(3.0, 2.0, (N,), generator=g, dtype=ember.float64)):
        assert out.dtype is ember.float64 and out.shape == (N,)
        x = out._data
        _within(x.mean(), 3.0, 2 / math.sqrt(N))
        _within(x.std(), 2.0, 2 * math.sqrt(1 / (2 * N)))
    # per-element means and stds broadcast
    out = ember.normal(ember.tensor([[0.0], [100.0]]), ember.tensor([1.0, 0.0, 5.0]),
                       generator=g)
    assert out.shape == (2, 3)
    assert out._data[0, 1] == 0.0 and out._data[1, 1] == 100.0
    assert out._data[1, 0] != 100.0
    # std = 0 gives the mean exactly
    np.testing.assert_array_equal(ember.normal(2.5, 0.0, (4,))._data, np.full(4, 2.5, np.float32))


def test_normal_and_bernoulli_gradients_are_zero_like_torch():
    m = ember.zeros(3, requires_grad=True)
    s = ember.ones(3, requires_grad=True)
    out = ember.normal(m, s)
    assert out.requires_grad
    out.sum().backward()
    np.testing.assert_array_equal(m.grad._data, np.zeros(3, np.float32))
    np.testing.assert_array_equal(s.grad._data, np.zeros(3, np.float32))
    p = ember.full((3,), 0.5, requires_grad=True)
    ember.bernoulli(p).sum().backward()
    np.testing.assert_array_equal(p.grad._data, np.zeros(3, np.float32))


def test_creation_arguments():
    x = ember.rand(2, 3, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.dtype is ember.float32
    assert ember.rand(size=(2, 2)).shape == (2, 2)
    assert ember.randn((), dtype=ember.float64).shape == ()
    ember.set_default_dtype(ember.float64)
    assert ember.rand(2).dtype is ember.float64 and ember.randn(2).dtype is ember.float64
    ember.set_default_dtype(ember.float32)
    assert ember.randint(5, size=(3,)).dtype is ember.int64
    assert ember.rand_like(ember.zeros(2, dtype=ember.float16)).dtype is ember.float16
    with pytest.raises(RuntimeError, match=r"\[rand\] .*negative dimension"):
        ember.rand(-1)
    with pytest.raises(RuntimeError, match=r"\[randperm\] .*negative dimension"):
        ember.randperm(-1)


def test_inplace_random_semantics():
    x = ember.zeros(3, 4)
    v = x._version
    assert x.uniform_() is x and x._version == v + 1
    view = x.view(12)
    view.normal_()
    np.testing.assert_array_equal(view._data.reshape(3, 4), x._data)
    leaf = ember.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"leaf Variable that requires grad"):
        leaf.uniform_()
    with ember.no_grad():
        leaf.uniform_()
    assert leaf.requires_grad and (leaf._data != 0).all()
    with pytest.raises(RuntimeError, match=r"\[uniform_\] .*from=2.0 > to=1.0"):
        ember.zeros(2).uniform_(2, 1)
    with pytest.raises(RuntimeError, match=r"\[exponential_\] .*lambda > 0.0"):
        ember.zeros(2).exponential_(-1)
    with pytest.raises(RuntimeError, match=r"\[normal_\] .*std >= 0.0"):
        ember.zeros(2).normal_(0, -1)
    with pytest.raises(NotImplementedError, match=r"\[uniform_\] .*'Long'"):
        ember.zeros(2, dtype=ember.int64).uniform_()
    with pytest.raises(RuntimeError, match=r"\[random_\] .*from=5 >= to=2"):
        ember.zeros(2).random_(5, 2)
    with pytest.raises(RuntimeError, match=r"\[bernoulli\] bernoulli_ expects p"):
        ember.zeros(2).bernoulli_(1.5)


# ------------------------------------------------------------------------------- dropout
def test_dropout_fraction_and_scale():
    g = ember.Generator().manual_seed(20)
    x = ember.tensor(np.linspace(1, 2, N, dtype=np.float32))
    for p in (0.1, 0.5, 0.9):
        y = F.dropout(x, p, generator=g)._data
        dropped = y == 0
        _within(dropped.mean(), p, math.sqrt(p * (1 - p) / N))
        scale = np.float32(1 / (1 - p))
        np.testing.assert_array_equal(y[~dropped], x._data[~dropped] * scale)


def test_dropout_gradient_is_the_mask_over_keep_probability():
    g = ember.Generator().manual_seed(21)
    x = ember.tensor(np.random.default_rng(0).uniform(1, 2, 1000), requires_grad=True)
    y = F.dropout(x, 0.3, generator=g)
    go = ember.tensor(np.random.default_rng(1).standard_normal(1000))
    y.backward(go)
    kept = y._data != 0
    np.testing.assert_array_equal(x.grad._data, np.where(kept, go._data * (1 / 0.7), 0.0))
    # double backward: the gradient is linear in go with the same mask
    x2 = ember.tensor(np.ones(50), requires_grad=True)
    gg = ember.tensor(np.ones(50), requires_grad=True)
    y2 = F.dropout(x2, 0.5)
    (gx,) = ember.autograd.grad(y2, x2, gg, create_graph=True)
    (ggg,) = ember.autograd.grad(gx.sum(), gg)
    np.testing.assert_array_equal(ggg._data, y2._data)


def test_dropout_same_seed_same_mask_and_replay():
    x = ember.ones(64, 64)
    ember.manual_seed(5)
    a = F.dropout(x, 0.5)
    ember.manual_seed(5)
    b = F.dropout(x, 0.5)
    np.testing.assert_array_equal(a._data, b._data)
    c = F.dropout(x, 0.5)
    assert not np.array_equal(a._data, c._data)
    # the op records the (seed, offset) it consumed: rebinding with them reproduces the mask
    seed, offset = ember.default_generator.initial_seed(), 0
    replay = ember.ops.bind(R.DROPOUT, x, p=0.5, seed=seed, offset=offset)
    np.testing.assert_array_equal(replay._data, a._data)


def test_dropout_modes_and_special_p():
    x = ember.rand(10, requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert F.dropout(ember.ones(0), 0.5).shape == (0,)
    z = F.dropout(ember.ones(5), 1.0)
    np.testing.assert_array_equal(z._data, np.zeros(5, np.float32))
    y = ember.ones(1000)
    v = y._version
    out = F.dropout(y, 0.5, inplace=True)
    assert out is y and y._version == v + 1
    assert set(np.unique(y._data).tolist()) == {0.0, 2.0}
    h = F.dropout(ember.ones(1000, dtype=ember.float16), 0.3)
    assert h.dtype is ember.float16
    assert set(np.unique(h._data.astype(np.float32)).tolist()) == {
        0.0, float(np.float16(1 / 0.7))}


def test_dropout_errors():
    for p in (-0.1, 1.1):
        with pytest.raises(ValueError, match=r"\[dropout\] dropout probability has to be"):
            F.dropout(ember.ones(3), p)
    with pytest.raises(RuntimeError, match=r"\[dropout\] result type Float"):
        F.dropout(ember.ones(3, dtype=ember.int64), 0.5)
    with pytest.raises(RuntimeError, match=r"\[dropout1d\] dropout1d: Expected 2D or 3D"):
        F.dropout1d(ember.ones(3), 0.5)


def test_feature_dropout_zeroes_whole_channels():
    ember.manual_seed(22)
    x = ember.ones(8, 16, 5, 5)
    y = F.dropout2d(x, 0.5)._data
    per_channel = y.reshape(8, 16, -1)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()
    frac = (per_channel[..., 0] == 0).mean()
    _within(frac, 0.5, math.sqrt(0.25 / 128))
    y1 = F.dropout1d(ember.ones(16, 7), 0.5)._data      # unbatched: one value per channel
    assert ((y1 == 0).all(-1) | (y1 == 2).all(-1)).all()
    y3 = F.dropout3d(ember.ones(2, 4, 3, 3, 3), 0.5)._data.reshape(2, 4, -1)
    assert ((y3 == 0).all(-1) | (y3 == 2).all(-1)).all()
    assert F.dropout2d(x, 0.5, training=False) is x


def test_alpha_dropout_keeps_mean_and_variance():
    ember.manual_seed(23)
    x = ember.randn(N)
    y = F.alpha_dropout(x, 0.2, training=True)._data.astype(np.float64)
    _within(y.mean(), 0.0, 4 / math.sqrt(N))
    _within(y.std(), 1.0, 0.02)
    assert F.alpha_dropout(x, 0.2) is x   # training defaults to False
    # feature variant: one affine map per (N, C) channel
    z = F.feature_alpha_dropout(ember.ones(4, 8, 5), 0.5, training=True)._data
    assert np.allclose(z, z[..., :1])
    assert len(np.unique(z.round(5))) == 2
    np.testing.assert_array_equal(F.alpha_dropout(ember.ones(3), 1.0, True)._data,
                                  np.zeros(3, np.float32))


def test_out_arguments():
    out = ember.empty(2, dtype=ember.float64)
    r = ember.rand(3, out=out)
    assert r is out and out.shape == (3,) and out.dtype is ember.float64
    assert ((out._data >= 0) & (out._data < 1)).all()
    same = ember.empty(4)
    v = same._version
    ember.randn(4, out=same)
    assert same._version == v + 1
    i32 = ember.empty(0, dtype=ember.int32)
    assert ember.randint(5, (3,), out=i32).dtype is ember.int32 and i32.shape == (3,)
    assert ember.arange(5, out=ember.empty(0)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert ember.zeros(2, 2, out=ember.ones(4)).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(RuntimeError, match=r"\[rand\] dtype Float does not match dtype of out "
                                           r"parameter \(Double\)"):
        ember.rand(3, dtype=ember.float32, out=out)
    with pytest.raises(RuntimeError, match=r"\[zeros\] functions with out=... arguments"):
        ember.zeros(3, out=ember.empty(3, requires_grad=True))


SIGNATURES = [
    "rand(2, 3)", "rand((2, 3), dtype=L.float64)", "rand(size=(4,), requires_grad=True)",
    "randn([], device='cpu')", "randn(3, dtype=L.float16, requires_grad=True)",
    "randint(5, (3,))", "randint(-2, 5, (2, 2), dtype=L.int16)", "randint(3, 9, size=[4])",
    "randint(0, 5, (2,), dtype=L.float32, requires_grad=True)",
    "randperm(5)", "randperm(4, dtype=L.float64, requires_grad=True)",
    "normal(0.0, 1.0, (2, 3))", "normal(L.zeros(3, dtype=L.float64), 1.0)",
    "normal(2.0, L.ones(2, 1))", "normal(L.zeros(2, 1), L.ones(3))",
    "normal(L.zeros(2, requires_grad=True), L.ones(2))",
    "normal(mean=L.zeros(3), std=L.ones(3))", "normal(1.0, 2.0, size=(2,), requires_grad=True)",
    "bernoulli(L.full((3,), 0.5, dtype=L.float64))", "bernoulli(L.full((3,), 0.5), 0.2)",
    "bernoulli(L.full((3,), 0.5, requires_grad=True))",
    "multinomial(L.ones(4), 2)", "multinomial(L.ones(2, 4), 6, True)",
    "rand_like(L.zeros(2, dtype=L.float64), requires_grad=True)",
    "randn_like(L.zeros(2, 3), dtype=L.bfloat16)", "randint_like(L.zeros(3, dtype=L.int8), 4)",
    "randint_like(L.zeros(3), 1, 4)",
    "zeros(2).uniform_()", "zeros(2, dtype=L.float64).normal_(1, 2)",
    "zeros(3, dtype=L.int32).random_(4)", "zeros(3, dtype=L.bool).bernoulli_(0.5)",
    "nn.functional.dropout(L.ones(3, requires_grad=True), 0.5)",
    "nn.functional.dropout(L.ones(2, 3), 0.5, training=False)",
]


@pytest.mark.parametrize("call", SIGNATURES)
def test_metadata_matches_torch(call):
    """Same call, same shape, dtype, device and requires_grad as torch (values differ)."""
    torch = pytest.importorskip("torch")
    e = eval("L." + call, {"L": ember})
    t = eval("L." + call, {"L": torch})
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert str(e.device) == str(t.device)
    assert e.requires_grad == t.requires_grad
    assert e.is_leaf == t.is_leaf
