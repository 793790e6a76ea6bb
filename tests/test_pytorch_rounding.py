"""Bit-for-bit agreement with PyTorch's CPU kernels where the order of roundings matters.

``add``/``sub`` with ``alpha`` and ``addcmul`` round once (PyTorch's vectorized loops use an
fma: ``fma(alpha, y, x)``, ``fma(value * t1, t2, x)``), ``addcdiv`` is ``x + (value * t1) / t2``
and ``2.0 / t`` is ``reciprocal(t) * 2.0`` (``Tensor.__rdiv__``).  Each is checked on 20,000
random values (several exponents) against torch, and the compiled C against eager.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops._fma import fma

torch = pytest.importorskip("torch")

N = 20_000


def _data(dtype: str, seed: int, positive: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N) * np.exp2(rng.integers(-12, 12, N))
    return (np.abs(x) + 0.25 if positive else x).astype(dtype)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    bad = np.flatnonzero(got.view(f"u{got.itemsize}") != want.view(f"u{want.itemsize}"))
    assert bad.size == 0, f"{bad.size} of {got.size} differ, first at {bad[:3]}: " \
        f"{got[bad[:3]]} vs {want[bad[:3]]}"


def _e(a: np.ndarray) -> ember.Tensor:
    return ember.from_numpy(a.copy())


def _t(a: np.ndarray):  # noqa: ANN202
    return torch.from_numpy(a.copy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("alpha", [0.1, -2.5e-3, 1.7, 3])
def test_add_sub_with_alpha_round_once(dtype, alpha):
    x, y = _data(dtype, 1), _data(dtype, 2)
    _same_bits(ember.add(_e(x), _e(y), alpha=alpha).numpy(),
               torch.add(_t(x), _t(y), alpha=alpha).numpy())
    _same_bits(ember.sub(_e(x), _e(y), alpha=alpha).numpy(),
               torch.sub(_t(x), _t(y), alpha=alpha).numpy())
    _same_bits(ember.rsub(_e(x), _e(y), alpha=alpha).numpy(),
               torch.rsub(_t(x), _t(y), alpha=alpha).numpy())
    # a scalar other, a strided view, in place
    _same_bits(_e(x).add(0.7, alpha=alpha).numpy(), _t(x).add(0.7, alpha=alpha).numpy())
    _same_bits(_e(x)[::2].sub(_e(y)[1::2], alpha=alpha).numpy(),
               _t(x)[::2].sub(_t(y)[1::2], alpha=alpha).numpy())
    a, b = _e(x), _t(x)
    a.add_(_e(y), alpha=alpha)
    b.add_(_t(y), alpha=alpha)
    _same_bits(a.numpy(), b.numpy())
    a.sub_(_e(x), alpha=alpha)
    b.sub_(_t(x), alpha=alpha)
    _same_bits(a.numpy(), b.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("value", [0.1, -1.3e-3, 0.999, 1])
def test_addcmul_and_addcdiv_match(dtype, value):
    x, a, b = _data(dtype, 3), _data(dtype, 4), _data(dtype, 5, positive=True)
    _same_bits(ember.addcmul(_e(x), _e(a), _e(b), value=value).numpy(),
               torch.addcmul(_t(x), _t(a), _t(b), value=value).numpy())
    _same_bits(ember.addcdiv(_e(x), _e(a), _e(b), value=value).numpy(),
               torch.addcdiv(_t(x), _t(a), _t(b), value=value).numpy())
    e, t = _e(x), _t(x)
    e.addcmul_(_e(a), _e(b), value=value).addcdiv_(_e(a), _e(b), value=value)
    t.addcmul_(_t(a), _t(b), value=value).addcdiv_(_t(a), _t(b), value=value)
    _same_bits(e.numpy(), t.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("s", [2.0, 0.1, 3, -7.5])
def test_scalar_over_tensor_is_reciprocal_times_scalar(dtype, s):
    src = _data("float32", 6, positive=True)
    t = torch.from_numpy(src).to(getattr(torch, dtype))
    e = ember.from_numpy(src).to(getattr(ember, dtype))
    got, want = s / e, s / t
    assert got.dtype == getattr(ember, dtype)
    _same_bits(got.float().numpy(), want.float().numpy())


def test_scalar_over_integer_tensor_and_grad_fns():
    i = np.arange(1, 200, dtype=np.int64)
    _same_bits((3 / ember.from_numpy(i)).numpy(), (3 / torch.from_numpy(i)).numpy())
    x = ember.randn(5, requires_grad=True)
    tx = torch.randn(5, requires_grad=True)
    for f in (lambda m, v: 2.0 / v, lambda m, v: m.add(v, v, alpha=0.5),
              lambda m, v: m.sub(v, v, alpha=0.5), lambda m, v: v.add(1.0, alpha=2)):
        assert f(ember, x).grad_fn.name() == f(torch, tx).grad_fn.name()


@pytest.mark.parametrize("alpha", [0.3, -2])
def test_alpha_gradients_match_torch(alpha):
    x, y = _data("float64", 7)[:12], _data("float64", 8)[:12]
    ex, ey = (ember.from_numpy(v.copy()).requires_grad_() for v in (x, y))
    tx, ty = (torch.from_numpy(v.copy()).requires_grad_() for v in (x, y))
    (ember.sub(ex, ey, alpha=alpha) * ember.add(ex, ey, alpha=alpha)).sum().backward()
    (torch.sub(tx, ty, alpha=alpha) * torch.add(tx, ty, alpha=alpha)).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ey.grad.numpy(), ty.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_c_gives_the_same_bits_as_eager(dtype):
    x, y, b = (ember.from_numpy(_data(dtype, s, positive=s == 11)) for s in (9, 10, 11))

    def f(x, y, b):
        return (x.add(y, alpha=0.1), x.sub(y, alpha=1.7), ember.addcmul(x, y, b, value=0.3),
                ember.addcdiv(x, y, b, value=0.3), 2.0 / b, ember.lerp(x, y, 0.3),
                ember.lerp(x, y, 0.8), ember.rsub(x, 2.0, alpha=0.7))

    got = ember.compile(f, backend="c")(x, y, b)
    from ember.compiler.c import backend as cbackend
    assert cbackend.last_compiled().stats.externs == 0
    for g, w in zip(got, f(x, y, b)):
        _same_bits(g.numpy(), w.numpy())


def test_fma_special_values():
    sp = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, 3.0e38, 1e-40, 1.5]
    for dtype in ("float32", "float64"):
        a, b, c = (v.ravel().astype(dtype) for v in np.meshgrid(sp, sp, sp))
        with np.errstate(all="ignore"):
            want = torch.addcmul(_t(c), _t(a), _t(b)).numpy()
        got = fma(a, b, c)
        assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("weight", [0.1, 0.3, 0.5, 0.9, -0.2])
def test_lerp_rounds_once(dtype, weight):
    s, e = _data(dtype, 12), _data(dtype, 13)
    _same_bits(ember.lerp(_e(s), _e(e), weight).numpy(),
               torch.lerp(_t(s), _t(e), weight).numpy())
    w = np.random.default_rng(14).uniform(-0.5, 1.5, N).astype(dtype)
    _same_bits(ember.lerp(_e(s), _e(e), _e(w)).numpy(), torch.lerp(_t(s), _t(e), _t(w)).numpy())


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_fast_path_gives_the_general_paths_bits(name, monkeypatch):
    """The NumPy fast path of Adam/AdamW rounds as the ops it stands for (lerp_, addcmul_,
    add with alpha: one fma each)."""
    import ember.optim.adam as adam_mod
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((16, 33)).astype(np.float32)
    grads = [rng.standard_normal((16, 33)).astype(np.float32) for _ in range(4)]

    def run():
        p = ember.tensor(w0.copy(), requires_grad=True)
        opt = getattr(ember.optim, name)([p], lr=1e-2, weight_decay=0.05)
        for g in grads:
            p.grad = ember.tensor(g.copy())
            opt.step()
        return p.detach().numpy().copy()

    fast = run()
    monkeypatch.setattr(adam_mod, "_fast_ok", lambda *a, **k: False)
    _same_bits(fast, run())


def test_fma_float32_where_rounding_twice_would_differ():
    """c + a*b just below a float32 midpoint, at a float64 distance that rounds onto it: a sum
    in float64 then rounded to float32 rounds twice (ties to even: up); one rounding: down."""
    c = np.float32([1 + 2**-23, -(1 + 2**-23)])
    a = np.float32([1 + 2**-15, 1 + 2**-15])
    b = np.float32([2**-24 * (1 - 2**-15), -(2**-24) * (1 - 2**-15)])
    twice = (c.astype(np.float64) + a.astype(np.float64) * b).astype(np.float32)
    want = torch.addcmul(_t(c), _t(a), _t(b)).numpy()
    assert not np.array_equal(twice, want)
    _same_bits(fma(a, b, c), want)
    _same_bits(ember.addcmul(_e(c), _e(a), _e(b)).numpy(), want)
