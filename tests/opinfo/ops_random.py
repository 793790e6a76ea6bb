"""OpInfo entries for random ops: outputs are random, so only shapes and dtypes are compared
with torch (``random=True``); distributions and determinism are tested in
``tests/test_random.py``."""

from __future__ import annotations

import numpy as np

import ember
from tests.opinfo.core import FLOATS, INTS, ErrorCase, OpInfo, Sample, make

SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4)]


def _dt(name: str) -> ember.dtype:
    return getattr(ember, name)


def _size_samples(dtype, rng):
    d = _dt(dtype)
    yield Sample((3, 4), {"dtype": d}, desc="varargs")
    yield Sample(((2, 3, 4),), {"dtype": d}, desc="tuple")
    yield Sample(([5],), {"dtype": d}, desc="list")
    yield Sample(((),), {"dtype": d}, desc="0-d")
    yield Sample((0, 3), {"dtype": d}, desc="empty")
    yield Sample((2,), {"dtype": d, "requires_grad": True}, desc="requires_grad")


def _default_dtype_samples(dtype, rng):
    yield Sample((2, 3), desc="default dtype")
    yield Sample((4,), {"device": "cpu"}, desc="device")


def _like_samples(dtype, rng):
    for shape in SHAPES:
        yield Sample((make(shape, dtype, rng),), desc=f"like {shape}")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), desc="noncontig", noncontig=True)
    yield Sample((make((3,), "float32", rng),), {"dtype": _dt(dtype)}, desc="dtype kw")


def _randint_samples(dtype, rng):
    d = _dt(dtype)
    hi = 2 if dtype == "bool" else 100
    yield Sample((hi, (3, 4)), {"dtype": d}, desc="high, size")
    yield Sample((0, hi, (5,)), {"dtype": d}, desc="low, high, size")
    yield Sample((1, hi, ()), {"dtype": d}, desc="0-d")
    yield Sample((hi, (0, 2)), {"dtype": d}, desc="empty")
    if dtype in ("int64", "float64"):
        yield Sample((-(2 ** 40), 2 ** 40, (6,)), {"dtype": d}, desc="span > 2**32")


def _randint_default_samples(dtype, rng):
    yield Sample((10, (3,)), desc="int64 default")
    yield Sample((-5, 5), {"size": (2, 2)}, desc="size kw")


def _randint_like_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng), 10), desc="high")
    yield Sample((make((5,), dtype, rng), 2, 9), desc="low, high")
    yield Sample((make((), dtype, rng), 3), desc="0-d")


def _randperm_samples(dtype, rng):
    d = _dt(dtype)
    for n in (0, 1, 7, 100):
        yield Sample((n,), {"dtype": d}, desc=f"n={n}")


def _normal_samples(dtype, rng):
    d = _dt(dtype)
    yield Sample((make((3, 4), dtype, rng), make((3, 4), dtype, rng, 0.1, 2.0)),
                 desc="tensor, tensor")
    yield Sample((make((2, 1), dtype, rng), make((3,), dtype, rng, 0.1, 2.0)),
                 desc="broadcast")
    yield Sample((make((5,), dtype, rng), 2.0), desc="tensor, float")
    yield Sample((1.5, make((2, 3), dtype, rng, 0.1, 2.0)), desc="float, tensor")
    yield Sample((make((), dtype, rng), make((), dtype, rng, 0.1, 2.0)), desc="0-d")
    yield Sample((0.0, 1.0, (3, 2)), {"dtype": d}, desc="float, float, size", grad=False)
    yield Sample((2.0, 0.5, [4]), {"dtype": d}, desc="size list", grad=False)
    yield Sample((make((3, 4), dtype, rng, noncontig=True), 1.0), desc="noncontig",
                 noncontig=True)


def _bernoulli_samples(dtype, rng):
    for shape in SHAPES:
        yield Sample((make(shape, dtype, rng, 0.0, 1.0),), desc=f"probs {shape}")
    yield Sample((make((3, 4), dtype, rng, 0.0, 1.0, noncontig=True),), desc="noncontig",
                 noncontig=True)


def _bernoulli_p_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng),), {"p": 0.3}, desc="p=0.3")
    yield Sample((make((0,), dtype, rng),), {"p": 1.0}, desc="empty")


def _multinomial_samples(dtype, rng):
    yield Sample((make((5,), dtype, rng, 0.1, 1.0), 3), desc="1-d without replacement")
    yield Sample((make((5,), dtype, rng, 0.1, 1.0), 8, True), desc="1-d with replacement")
    yield Sample((make((4, 6), dtype, rng, 0.0, 1.0), 6), desc="2-d all categories")
    yield Sample((make((4, 6), dtype, rng, 0.1, 1.0), 10), {"replacement": True},
                 desc="2-d kw")


def _inplace_samples(dtype, rng):
    for shape in SHAPES:
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), desc="noncontig", noncontig=True)


def _dropout_samples(dtype, rng):
    for shape in SHAPES:
        yield Sample((make(shape, dtype, rng),), {"p": 0.3}, desc=f"{shape}")
    yield Sample((make((3, 4), dtype, rng),), desc="default p")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"p": 0.5}, desc="noncontig",
                 noncontig=True)
    yield Sample((make((3, 4), dtype, rng),), {"p": 1.0}, desc="p=1")


def _feature_dropout_samples(dtype, rng):
    yield Sample((make((2, 3, 4), dtype, rng),), {"p": 0.5}, desc="batched")
    yield Sample((make((3, 4), dtype, rng),), {"p": 0.5}, desc="unbatched")


def _feature2d_samples(dtype, rng):
    yield Sample((make((2, 3, 4, 5), dtype, rng),), {"p": 0.5}, desc="batched")


def _random_errors():
    return [
        ErrorCase((3,), {"dtype": ember.int64}, exc=NotImplementedError,
                  match=r"\[rand\] .*not implemented for 'Long'"),
    ]


def _randn_errors():
    return [
        ErrorCase((3,), {"dtype": ember.int32}, exc=NotImplementedError,
                  match=r"\[randn\] .*not implemented for 'Int'"),
        ErrorCase((-1, 2), exc=RuntimeError, match=r"\[randn\] .*negative dimension"),
    ]


def _randint_errors():
    return [
        ErrorCase((5, 2, (3,)), exc=RuntimeError,
                  match=r"\[randint\] .*from=5 >= to=2"),
        ErrorCase((0, 300, (2,)), {"dtype": ember.uint8}, exc=RuntimeError,
                  match=r"\[randint\] to - 1 is out of bounds for uint8"),
        ErrorCase((5,), exc=TypeError, match=r"\[randint\]"),
    ]


def _normal_errors():
    return [
        ErrorCase((0.0, -1.0, (2,)), exc=RuntimeError, match=r"\[normal\] .*std >= 0.0"),
        ErrorCase((np.zeros(2, np.float32), -np.ones(2, np.float32)), exc=RuntimeError,
                  match=r"\[normal\] .*all elements of std >= 0.0"),
        ErrorCase((np.zeros(2, np.float32), np.ones(3, np.float32)), exc=RuntimeError,
                  match=r"\[normal\] The size of tensor a \(2\) must match"),
        ErrorCase((np.zeros(2, np.int64), 1.0), exc=NotImplementedError,
                  match=r"\[normal\] .*not implemented for 'Long'"),
    ]


def _bernoulli_errors():
    return [
        ErrorCase((np.full(3, 1.5, np.float32),), exc=RuntimeError,
                  match=r"\[bernoulli\] Expected p_in >= 0 && p_in <= 1"),
        ErrorCase((np.ones(3, np.int64),), exc=NotImplementedError,
                  match=r"\[bernoulli\] .*not implemented for 'Long'"),
    ]


def _multinomial_errors():
    f = np.float32
    return [
        ErrorCase((np.array([0, -1, 0], f), 1), exc=RuntimeError,
                  match=r"\[multinomial\] probability tensor contains"),
        ErrorCase((np.zeros(3, f), 1), exc=RuntimeError,
                  match=r"\[multinomial\] invalid multinomial distribution"),
        ErrorCase((np.ones((2, 2, 2), f), 1), exc=RuntimeError,
                  match=r"\[multinomial\] prob_dist must be 1 or 2 dim"),
        ErrorCase((np.ones(3, f), 4), exc=RuntimeError,
                  match=r"\[multinomial\] cannot sample n_sample > prob_dist"),
        ErrorCase((np.ones(3, f), 0), exc=RuntimeError,
                  match=r"\[multinomial\] cannot sample n_sample <= 0"),
    ]


def _dropout_errors():
    return [
        ErrorCase((np.ones(3, np.float32),), {"p": -0.1}, exc=ValueError,
                  match=r"\[dropout\] dropout probability has to be between 0 and 1"),
        ErrorCase((np.ones(3, np.float32),), {"p": 1.1}, exc=ValueError,
                  match=r"\[dropout\] dropout probability has to be between 0 and 1"),
        ErrorCase((np.ones(3, np.int64),), {"p": 0.5}, exc=RuntimeError,
                  match=r"\[dropout\] result type Float can't be cast"),
    ]


def _F(lib):  # noqa: N802
    return lib.nn.functional


def _randint_fn(t, *args, **kw):
    return t.randint(*args, **kw)


OPINFOS = [
    OpInfo("rand", lambda t, *s, **kw: t.rand(*s, **kw), _size_samples, dtypes=FLOATS,
           random=True, grad=False, errors=_random_errors),
    OpInfo("rand_default", lambda t, *s, **kw: t.rand(*s, **kw), _default_dtype_samples,
           dtypes=("float32",), random=True, grad=False),
    OpInfo("randn", lambda t, *s, **kw: t.randn(*s, **kw), _size_samples, dtypes=FLOATS,
           random=True, grad=False, errors=_randn_errors),
    OpInfo("randn_default", lambda t, *s, **kw: t.randn(*s, **kw), _default_dtype_samples,
           dtypes=("float32",), random=True, grad=False),
    OpInfo("rand_like", lambda t, x, **kw: t.rand_like(x, **kw), _like_samples, dtypes=FLOATS,
           random=True, grad=False),
    OpInfo("randn_like", lambda t, x, **kw: t.randn_like(x, **kw), _like_samples,
           dtypes=FLOATS, random=True, grad=False),
    OpInfo("randint", _randint_fn, _randint_samples, dtypes=("bool",) + INTS + FLOATS,
           random=True, grad=False, errors=_randint_errors),
    OpInfo("randint_default", _randint_fn, _randint_default_samples, dtypes=("int64",),
           random=True, grad=False),
    OpInfo("randint_like", lambda t, x, *a: t.randint_like(x, *a), _randint_like_samples,
           dtypes=INTS + FLOATS, random=True, grad=False),
    OpInfo("randperm", lambda t, n, **kw: t.randperm(n, **kw), _randperm_samples,
           dtypes=("int64", "int32", "float32", "float64"), random=True, grad=False),
    OpInfo("normal", lambda t, *a, **kw: t.normal(*a, **kw), _normal_samples, dtypes=FLOATS,
           random=True, fd_check=False, errors=_normal_errors),
    OpInfo("bernoulli", lambda t, p: t.bernoulli(p), _bernoulli_samples, dtypes=FLOATS,
           random=True, fd_check=False, errors=_bernoulli_errors),
    OpInfo("bernoulli_p", lambda t, x, p: x.bernoulli(p), _bernoulli_p_samples,
           dtypes=FLOATS, random=True, grad=False),
    OpInfo("multinomial", lambda t, *a, **kw: t.multinomial(*a, **kw), _multinomial_samples,
           dtypes=("float32", "float64", "bfloat16"), random=True, grad=False,
           errors=_multinomial_errors),
    OpInfo("uniform_", lambda t, x: x.clone().uniform_(-2, 3), _inplace_samples,
           dtypes=FLOATS, random=True, grad=False),
    OpInfo("normal_", lambda t, x: x.clone().normal_(1.0, 2.0), _inplace_samples,
           dtypes=FLOATS, random=True, grad=False),
    OpInfo("exponential_", lambda t, x: x.clone().exponential_(2.0), _inplace_samples,
           dtypes=FLOATS, random=True, grad=False),
    OpInfo("cauchy_", lambda t, x: x.clone().cauchy_(1.0, 2.0), _inplace_samples,
           dtypes=FLOATS, random=True, grad=False),
    OpInfo("log_normal_", lambda t, x: x.clone().log_normal_(0.5, 0.25), _inplace_samples,
           dtypes=FLOATS, random=True, grad=False),
    OpInfo("geometric_", lambda t, x: x.clone().geometric_(0.3), _inplace_samples,
           dtypes=INTS + FLOATS, random=True, grad=False),
    OpInfo("random_", lambda t, x: x.clone().random_(0, 10), _inplace_samples,
           dtypes=INTS + FLOATS, random=True, grad=False),
    OpInfo("random_to", lambda t, x: x.clone().random_(7), _inplace_samples,
           dtypes=INTS + FLOATS, random=True, grad=False),
    OpInfo("bernoulli_", lambda t, x: x.clone().bernoulli_(0.3), _inplace_samples,
           dtypes=("bool",) + INTS + FLOATS, random=True, grad=False),
    OpInfo("bernoulli_tensor_", lambda t, x: x.clone().bernoulli_(t.full_like(x, 0.5)),
           _inplace_samples, dtypes=FLOATS, random=True, grad=False),
    OpInfo("dropout", lambda t, x, **kw: _F(t).dropout(x, **kw), _dropout_samples,
           dtypes=FLOATS, random=True, grad=False, errors=_dropout_errors),
    OpInfo("dropout1d", lambda t, x, **kw: _F(t).dropout1d(x, **kw), _feature_dropout_samples,
           dtypes=("float32", "float64"), random=True, grad=False),
    OpInfo("dropout2d", lambda t, x, **kw: _F(t).dropout2d(x, **kw), _feature2d_samples,
           dtypes=("float32", "float64"), random=True, grad=False),
    OpInfo("alpha_dropout", lambda t, x, **kw: _F(t).alpha_dropout(x, training=True, **kw),
           _dropout_samples, dtypes=("float32", "float64"), random=True, grad=False),
]
