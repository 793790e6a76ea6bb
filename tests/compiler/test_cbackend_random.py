"""Random ops in the C backend (docs/compiler.md "Philox in C"): ``dropout`` (forward and its
backward) and ``uniform`` lower to pointwise C whose element ``i`` is drawn from
``(seed, offset, i)`` as eager's stream does, so compiled results equal eager BIT FOR BIT in
float32/float64/float16/bfloat16, call after call with the generator moving on, without
recompiling (seed/offset are runtime integers) and with no extern step.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.config import config

pytestmark = pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None,
                                reason="no C compiler")

F = ember.nn.functional
DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16]


@pytest.fixture(autouse=True)
def _fresh():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def _bits(t):
    return t.detach().numpy().view(np.uint8)


def assert_bits(got, want):
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def _twice(fn, args, seed=1234, calls=3):
    """``fn`` eager and compiled, each from the same generator state, ``calls`` times in a row
    (the default generator advancing between calls); returns (eager, compiled) result lists."""
    cf = ember.compile(fn, backend="c")
    ember.manual_seed(seed)
    want = [fn(*args) for _ in range(calls)]
    ember.manual_seed(seed)
    got = [cf(*args) for _ in range(calls)]
    return want, got


def _input(dt, shape=(6, 33), seed=0):
    rs = np.random.RandomState(seed)
    a = rs.standard_normal(shape).astype(np.float32)
    a.flat[:3] = [np.inf, -np.inf, np.nan]  # x * 0 keeps NaN where dropped, as eager
    return ember.tensor(a).to(dt)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_dropout_forward_bit_exact(dt, p):
    x = _input(dt)
    lowp = dt in (ember.float16, ember.bfloat16)

    def f(x):
        # (float16/bfloat16 values stay unrounded inside a fused group, as for every pointwise
        # op, so their chain ends at the dropout: x * 2 is exact)
        y = F.dropout(x * 2, p=p, training=True)
        return y if lowp else y + 1

    builds = cbackend.BUILDS[0]
    want, got = _twice(f, (x,))
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
    assert cg.stats.kernels == 1  # mul, dropout (and add) fused into one kernel
    assert cbackend.BUILDS[0] - builds == 1  # the advancing generator does not recompile
    for w, g in zip(want, got):
        assert_bits(g, w)
    assert not np.array_equal(_bits(got[0]), _bits(got[1])) or p in (0.0, 1.0)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_dropout_non_contiguous_input(dt):
    x = _input(dt, (8, 5, 6)).permute(2, 0, 1)[:, ::2]

    def f(x):
        return F.dropout(x, p=0.3, training=True)

    want, got = _twice(f, (x,))
    assert cbackend.last_compiled().stats.externs == 0
    for w, g in zip(want, got):
        assert_bits(g, w)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("seed", [7, 2**64 - 5], ids=["small", "u64"])
def test_dropout_twice_per_call(dt, seed):
    x = _input(dt, (4, 9))

    def f(x):
        return F.dropout(F.dropout(x, p=0.2, training=True) * 2, p=0.5, training=True)

    builds = cbackend.BUILDS[0]
    want, got = _twice(f, (x,), seed=seed, calls=4)
    assert cbackend.BUILDS[0] - builds == 1
    assert cbackend.last_compiled().stats.externs == 0
    for w, g in zip(want, got):
        assert_bits(g, w)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_backward_bit_exact(dt, p):
    a = _input(dt, (5, 12), seed=3)
    a = ember.where(a.isfinite(), a, ember.zeros_like(a))
    gy = _input(dt, (5, 12), seed=4)
    gy = ember.where(gy.isfinite(), gy, ember.zeros_like(gy))

    def step(x, gy):
        y = F.dropout(x * 2, p=p, training=True)
        y.backward(gy)
        return y

    cstep = ember.compile(step, backend="c")
    for seed in (5, 6):
        res = []
        for fn in (step, cstep):
            ember.manual_seed(seed)
            outs = []
            for _ in range(2):
                x = a.detach().requires_grad_(True)
                y = fn(x, gy)
                outs.append((y.detach(), x.grad))
            res.append(outs)
        for (yw, gw), (yg, gg) in zip(*res):
            assert_bits(yg, yw)
            assert_bits(gg, gw)
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_uniform_bit_exact(dt):
    def f(x):
        return x + ember.rand(3, 17, dtype=dt) * 2 - ember.empty(3, 17, dtype=dt).uniform_(-2, 5)

    x = ember.zeros(3, 17, dtype=dt)
    builds = cbackend.BUILDS[0]
    want, got = _twice(f, (x,))
    assert cbackend.BUILDS[0] - builds == 1
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks
    for w, g in zip(want, got):
        assert_bits(g, w)


def test_explicit_generator_advances():
    x = _input(ember.float32, (7, 7))
    gen = ember.Generator().manual_seed(99)

    def f(x):
        return F.dropout(x, p=0.4, training=True, generator=gen)

    cf = ember.compile(f, backend="c")
    builds = cbackend.BUILDS[0]
    gen.manual_seed(99)
    want = [f(x) for _ in range(3)]
    gen.manual_seed(99)
    got = [cf(x) for _ in range(3)]
    gen.manual_seed(2**63 + 1)  # a new seed is a runtime argument too
    want.append(f(x))
    gen.manual_seed(2**63 + 1)
    got.append(cf(x))
    assert cbackend.BUILDS[0] - builds == 1
    assert cbackend.last_compiled().stats.externs == 0
    for w, g in zip(want, got):
        assert_bits(g, w)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("form", ["floats", "tensors"])
def test_normal(dt, form):
    """float32/float16/bfloat16 bit for bit; float64 within 4 ulp (glibc's log/cos/sin vs
    NumPy's, as the prelude's own normal test), with mean 0 so nothing cancels."""
    f64 = dt == ember.float64
    std = (ember.arange(1, 3 * 17 + 1, dtype=dt) / 8).reshape(3, 17)
    mean = ember.zeros(3, 17, dtype=dt) if f64 else ember.full((3, 17), -0.75, dtype=dt)

    def f(mean, std):
        if form == "floats":
            return ember.normal(0.0 if f64 else 0.5, 2.0, size=(3, 17), dtype=dt) * 2
        return ember.normal(mean, std) * 2

    builds = cbackend.BUILDS[0]
    want, got = _twice(f, (mean, std))
    assert cbackend.BUILDS[0] - builds == 1
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks
    for w, g in zip(want, got):
        if f64:
            np.testing.assert_array_max_ulp(g.numpy(), w.numpy(), maxulp=4)
        else:
            assert_bits(g, w)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_bernoulli_bit_exact(dt):
    p = (ember.arange(0, 4 * 11, dtype=ember.float32) / 43).reshape(4, 11).to(dt)

    def f(p):
        return ember.bernoulli(p * 1) + 1

    builds = cbackend.BUILDS[0]
    want, got = _twice(f, (p,))
    assert cbackend.BUILDS[0] - builds == 1
    cg = cbackend.last_compiled()
    assert cg.stats.externs == 0, cg.stats.fallbacks
    for w, g in zip(want, got):
        assert_bits(g, w)


@pytest.mark.parametrize("bad", [1.5, -0.25, float("nan")])
def test_bernoulli_out_of_range_raises_eagers_error(bad):
    p = ember.full((3, 5), 0.5)

    def f(p):
        return ember.bernoulli(p) * 2

    cf = ember.compile(f, backend="c")
    cf(p)  # builds the C graph
    assert cbackend.last_compiled().stats.externs == 0
    q = p.clone()
    q[1, 2] = bad
    with pytest.raises(ember.errors.EmberRuntimeError) as want:
        f(q)
    with pytest.raises(ember.errors.EmberRuntimeError) as got:
        cf(q)
    assert str(got.value) == str(want.value)


def test_dropout_kernel_vectorizes():
    """The generated dropout loop (Philox inlined per element) is vectorized by gcc with the
    backend's flags (gcc's -fopt-info-vec report names the kernel's loop line)."""
    from ember.compiler.c.codegen import prelude as cprelude
    x = ember.randn(1 << 12)
    src = cbackend.codegen(lambda x: F.dropout(x * 2, 0.1), x)
    lines = src.splitlines()
    start = max(j for j, ln in enumerate(lines) if ln.startswith("/* mul dropout */"))
    loop = next(j for j in range(start, len(lines)) if "for (int64_t i = 0;" in lines[j]) + 1
    _, info = cprelude.build_test_lib(src, opt_info=True)
    assert any(f":{loop}:" in ln and "loop vectorized" in ln for ln in info.splitlines()), info


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_dropout_dynamic_sizes_and_p(dt):
    """Under dynamic=True the sizes and p are runtime scalars too (the scale 1 / (1 - p) is then
    rounded to the dtype in C): still bit for bit, one build for every call below."""
    def f(x, p):
        return F.dropout(x, p, training=True)

    cf = ember.compile(f, backend="c", dynamic=True)
    builds = None
    for k, (shape, p) in enumerate([((4, 6), 0.3), ((5, 3), 0.7), ((2, 9), 0.1),
                                    ((3, 3), 1.0)]):
        x = _input(dt, shape, seed=k)
        ember.manual_seed(40 + k)
        want = f(x, p)
        ember.manual_seed(40 + k)
        got = cf(x, p)
        assert_bits(got, want)
        if builds is None:
            builds = cbackend.BUILDS[0]
        assert cbackend.last_compiled().stats.externs == 0
    assert cbackend.BUILDS[0] == builds


def test_dropout_next_to_gemm_reduction_and_softmax():
    """A group holding a random op stays a plain kernel (its flat index is the plain loop's):
    not a GEMM epilogue, a reduction's prologue or a row kernel's producer; the neighbours'
    own C kernels (different summation order) keep the comparison to a tolerance, the dropped
    elements must be the same ones."""
    rs = np.random.RandomState(5)
    x = ember.tensor(rs.standard_normal((6, 8)))
    w = ember.tensor(rs.standard_normal((8, 10)))

    def f(x, w):
        h = F.dropout(x @ w, 0.3, training=True)
        s = F.dropout(F.softmax(x, -1), 0.2, training=True)
        r = F.dropout(x * 2, 0.4, training=True).sum(-1)
        return h, s, r, F.softmax(F.dropout(x, 0.5, training=True), -1)

    want, got = _twice(f, (x, w), calls=2)
    assert cbackend.last_compiled().stats.externs == 0, cbackend.last_compiled().stats.fallbacks
    for ws, gs in zip(want, got):
        for a, b in zip(ws, gs):
            a, b = a.numpy(), b.numpy()
            np.testing.assert_array_equal(a == 0, b == 0)
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
