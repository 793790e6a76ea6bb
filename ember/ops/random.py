"""Random primitives (kind ``random``): each draws words ``offset ..`` of the Philox stream keyed
by ``seed`` (both are params, so a replay or the compiled C code draws the same bits).  How
words become numbers is specified in ``docs/random.md`` and implemented in ``ops/_philox.py``.

``words(op, ...)`` helpers say how many words a call consumes; the frontend reserves that many
from a ``Generator`` before binding.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeError, DTypeRuntimeError, EmberRuntimeError, ShapeError
from ember.ops import _philox as ph
from ember.ops.registry import OpDef, bind, register

_RANDOM = frozenset({"random"})
_NONDIFF = frozenset({"random", "nondifferentiable"})


def _numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _check_float(op: str, dtype: dt.dtype) -> None:
    if not dtype.is_floating_point:
        raise DTypeError(f"[{op}] expected a floating dtype, got {dtype.name}")


def _round(values: np.ndarray, dtype: dt.dtype, shape: tuple) -> np.ndarray:
    """Doubles rounded to ``dtype`` (one rounding, as the C code does)."""
    return values.astype(dtype.np).reshape(shape)


# ------------------------------------------------------------------------------- uniform
def uniform_words(n: int, dtype: dt.dtype) -> int:
    return n * ph.words_per_uniform(dtype.name)


def _uniform_meta(*, shape: tuple, dtype: dt.dtype, low: float, high: float, seed: int,
                  offset: int) -> tuple:
    _check_float("uniform", dtype)
    return tuple(shape), dtype


def _uniform_eager(*, shape: tuple, dtype: dt.dtype, low: float, high: float, seed: int,
                   offset: int) -> np.ndarray:
    n = _numel(shape)
    u = ph.unit_uniform(ph.random_words(seed, offset, uniform_words(n, dtype)), dtype.name)
    return _round(low + (high - low) * u, dtype, shape)


UNIFORM = register(OpDef(
    "uniform", "random", _uniform_meta, _uniform_eager, tags=_NONDIFF,
    doc="Uniform [low, high) values: low + (high - low) * u in double, rounded once.",
))


# ------------------------------------------------------------------------------- normal
def normal_words(n: int, dtype: dt.dtype) -> int:
    return ph.normal_words(n, dtype.name)


def _normal_meta(mean, std, *, shape: tuple, dtype: dt.dtype, seed: int,  # noqa: ANN001
                 offset: int) -> tuple:
    _check_float("normal", dtype)
    for name, x in (("mean", mean), ("std", std)):
        if hasattr(x, "shape"):
            if tuple(x.shape) != tuple(shape) or x.dtype is not dtype:
                raise ShapeError(f"[normal] primitive {name} must have shape {tuple(shape)} and "
                                 f"dtype {dtype.name}; got {tuple(x.shape)} {x.dtype.name}")
    return tuple(shape), dtype


def _normal_eager(mean, std, *, shape: tuple, dtype: dt.dtype, seed: int,  # noqa: ANN001
                  offset: int) -> np.ndarray:
    n = _numel(shape)
    z = ph.standard_normal(ph.random_words(seed, offset, normal_words(n, dtype)), n,
                           dtype.name).reshape(shape)
    m = np.asarray(mean).astype(np.float64)
    s = np.asarray(std).astype(np.float64)
    return _round(m + s * z, dtype, shape)


def _zero_grads(ctx, g):  # noqa: ANN001
    # PyTorch defines the gradient of a sample w.r.t. its distribution's parameters as zero
    return tuple(g.new_zeros(tuple(s)) if need and s is not None else None
                 for need, s in zip(ctx.needs_input_grad, ctx.input_shapes))


NORMAL = register(OpDef(
    "normal", "random", _normal_meta, _normal_eager, _zero_grads, tags=_RANDOM,
    doc="mean + std * z, z ~ N(0, 1) by Box-Muller; mean/std are floats or tensors of `shape`.",
))


# ------------------------------------------------------------------------------- exponential
def _exponential_meta(*, shape: tuple, dtype: dt.dtype, lambd: float, seed: int,
                      offset: int) -> tuple:
    _check_float("exponential", dtype)
    return tuple(shape), dtype


def _exponential_eager(*, shape: tuple, dtype: dt.dtype, lambd: float, seed: int,
                       offset: int) -> np.ndarray:
    n = _numel(shape)
    u = ph.unit_open_closed(ph.random_words(seed, offset, uniform_words(n, dtype)), dtype.name)
    return _round(-np.log(u) / lambd, dtype, shape)


EXPONENTIAL = register(OpDef(
    "exponential", "random", _exponential_meta, _exponential_eager, tags=_NONDIFF,
    doc="-log(u) / lambd with u uniform on (0, 1].",
))


# ------------------------------------------------------------------------------- cauchy / lognormal
def _cauchy_meta(*, shape: tuple, dtype: dt.dtype, median: float, sigma: float, seed: int,
                 offset: int) -> tuple:
    _check_float("cauchy", dtype)
    return tuple(shape), dtype


def _cauchy_eager(*, shape: tuple, dtype: dt.dtype, median: float, sigma: float, seed: int,
                  offset: int) -> np.ndarray:
    n = _numel(shape)
    u = ph.unit_uniform(ph.random_words(seed, offset, uniform_words(n, dtype)), dtype.name)
    return _round(median + sigma * np.tan(np.pi * (u - 0.5)), dtype, shape)


CAUCHY = register(OpDef(
    "cauchy", "random", _cauchy_meta, _cauchy_eager, tags=_NONDIFF,
    doc="median + sigma * tan(pi * (u - 0.5)) with u uniform on [0, 1).",
))


def _log_normal_meta(*, shape: tuple, dtype: dt.dtype, mean: float, std: float, seed: int,
                     offset: int) -> tuple:
    _check_float("log_normal", dtype)
    return tuple(shape), dtype


def _log_normal_eager(*, shape: tuple, dtype: dt.dtype, mean: float, std: float, seed: int,
                      offset: int) -> np.ndarray:
    n = _numel(shape)
    z = ph.standard_normal(ph.random_words(seed, offset, normal_words(n, dtype)), n, dtype.name)
    return _round(np.exp(mean + std * z), dtype, shape)


LOG_NORMAL = register(OpDef(
    "log_normal", "random", _log_normal_meta, _log_normal_eager, tags=_NONDIFF,
    doc="exp(mean + std * z) with z drawn as for `normal`.",
))


# ------------------------------------------------------------------------------- geometric
def _geometric_meta(*, shape: tuple, dtype: dt.dtype, p: float, seed: int,
                    offset: int) -> tuple:
    return tuple(shape), dtype


def _geometric_eager(*, shape: tuple, dtype: dt.dtype, p: float, seed: int,
                     offset: int) -> np.ndarray:
    # u on the open interval (0, 1): (w + 0.5) * 2**-32; trials until the first success
    u = (ph.random_words(seed, offset, _numel(shape)).astype(np.float64) + 0.5) * 2.0 ** -32
    k = np.maximum(np.ceil(np.log(u) / np.log1p(-p)), 1.0)
    return k.astype(dtype.np).reshape(shape)


GEOMETRIC = register(OpDef(
    "geometric", "random", _geometric_meta, _geometric_eager, tags=_NONDIFF,
    doc="max(1, ceil(log(u) / log1p(-p))) with u = (w + 0.5) * 2**-32.",
))


# ------------------------------------------------------------------------------- randint
def randint_words(n: int, low: int, high: int) -> int:
    return n if high - low <= (1 << 32) else 2 * n


def _randint_meta(*, shape: tuple, dtype: dt.dtype, low: int, high: int, seed: int,
                  offset: int) -> tuple:
    if low >= high:
        raise EmberRuntimeError(f"[randint] random_ expects 'from' to be less than 'to', but got "
                                f"from={low} >= to={high}")
    return tuple(shape), dtype


def _randint_eager(*, shape: tuple, dtype: dt.dtype, low: int, high: int, seed: int,
                   offset: int) -> np.ndarray:
    n = _numel(shape)
    span = high - low
    w = ph.random_words(seed, offset, randint_words(n, low, high))
    r = (w.astype(np.uint64) if span <= (1 << 32) else ph.uint64_pairs(w)) % np.uint64(span)
    # low + r in two's complement (exact for every int64 range)
    v = (r + np.uint64(low % (1 << 64))).view(np.int64)
    if dtype.is_floating_point:
        return v.astype(dtype.np).reshape(shape)
    return v.astype(dtype.np).reshape(shape)


RANDINT = register(OpDef(
    "randint", "random", _randint_meta, _randint_eager, tags=_NONDIFF,
    doc="low + (w mod (high - low)); one word per value, two (a uint64) for spans over 2**32.",
))


# ------------------------------------------------------------------------------- randperm
def randperm_words(n: int) -> int:
    return 2 * n


def _randperm_meta(*, n: int, dtype: dt.dtype, seed: int, offset: int) -> tuple:
    if n < 0:
        raise EmberRuntimeError(f"[randperm] Trying to create tensor with negative dimension "
                                f"{n}: [{n}]")
    return (n,), dtype


def _randperm_eager(*, n: int, dtype: dt.dtype, seed: int, offset: int) -> np.ndarray:
    keys = ph.uint64_pairs(ph.random_words(seed, offset, randperm_words(n)))
    return np.argsort(keys, kind="stable").astype(dtype.np)


RANDPERM = register(OpDef(
    "randperm", "random", _randperm_meta, _randperm_eager, tags=_NONDIFF,
    doc="The stable argsort of n uint64 keys.",
))


# ------------------------------------------------------------------------------- bernoulli
def _bernoulli_meta(p, *, dtype: dt.dtype, seed: int, offset: int) -> tuple:  # noqa: ANN001
    if not p.dtype.is_floating_point:
        raise DTypeError(f"[bernoulli] probabilities must have a floating dtype, got "
                         f"{p.dtype.name}")
    return tuple(p.shape), dtype


def _bernoulli_eager(p: np.ndarray, *, dtype: dt.dtype, seed: int, offset: int) -> np.ndarray:
    pd = p.astype(np.float64)
    if pd.size and not ((pd >= 0) & (pd <= 1)).all():
        raise EmberRuntimeError("[bernoulli] Expected p_in >= 0 && p_in <= 1 to be true, but "
                                "got false; probabilities must lie in [0, 1]")
    u = ph.unit32(ph.random_words(seed, offset, p.size)).reshape(p.shape)
    return (u < pd).astype(dtype.np)


BERNOULLI = register(OpDef(
    "bernoulli", "random", _bernoulli_meta, _bernoulli_eager, _zero_grads, tags=_RANDOM,
    doc="1 where w * 2**-32 < p, else 0.",
))


# ------------------------------------------------------------------------------- multinomial
def multinomial_words(n_dist: int, n_cat: int, num_samples: int, replacement: bool) -> int:
    return n_dist * (num_samples if replacement else n_cat)


def _multinomial_meta(p, *, num_samples: int, replacement: bool, seed: int,  # noqa: ANN001
                      offset: int) -> tuple:
    if len(p.shape) not in (1, 2):
        raise EmberRuntimeError("[multinomial] prob_dist must be 1 or 2 dim")
    if not p.dtype.is_floating_point:
        raise DTypeError(f"[multinomial] only supports floating-point dtypes for input, got: "
                         f"{p.dtype.name}")
    if num_samples <= 0:
        raise EmberRuntimeError("[multinomial] cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > p.shape[-1]:
        raise EmberRuntimeError("[multinomial] cannot sample n_sample > prob_dist.size(-1) "
                                "samples without replacement")
    return tuple(p.shape[:-1]) + (num_samples,), dt.int64


def _multinomial_eager(p: np.ndarray, *, num_samples: int, replacement: bool, seed: int,
                       offset: int) -> np.ndarray:
    rows = p.reshape(-1, p.shape[-1]).astype(np.float64)
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise EmberRuntimeError("[multinomial] probability tensor contains either `inf`, `nan` "
                                "or element < 0")
    total = rows.sum(axis=1)
    if (total <= 0).any():
        raise EmberRuntimeError("[multinomial] invalid multinomial distribution (sum of "
                                "probabilities <= 0)")
    n_dist, n_cat = rows.shape
    w = ph.random_words(seed, offset,
                        multinomial_words(n_dist, n_cat, num_samples, replacement))
    if replacement:
        # inverse CDF: the first category whose normalized cumulative sum exceeds u
        u = ph.unit32(w).reshape(n_dist, num_samples)
        cdf = np.cumsum(rows, axis=1)
        cdf /= cdf[:, -1:]
        out = np.stack([np.searchsorted(c, x, side="right") for c, x in zip(cdf, u)])
        out = np.minimum(out, n_cat - 1)
    else:
        # exponential races: the k smallest E_i / p_i (E_i = -log u_i) are a weighted sample
        # without replacement; zero-probability categories come last
        e = -np.log(ph.unit_open_closed(w, "float32")).reshape(n_dist, n_cat)
        with np.errstate(divide="ignore", invalid="ignore"):
            keys = np.where(rows > 0, e / np.where(rows > 0, rows, 1.0), np.inf)
        out = np.argsort(keys, axis=1, kind="stable")[:, :num_samples]
    return out.astype(np.int64).reshape(p.shape[:-1] + (num_samples,))


MULTINOMIAL = register(OpDef(
    "multinomial", "random", _multinomial_meta, _multinomial_eager, tags=_NONDIFF,
    doc="Inverse-CDF sampling (with replacement) or exponential races (without).",
))


# ------------------------------------------------------------------------------- dropout
def _dropout_meta(x, *, p: float, seed: int, offset: int) -> tuple:  # noqa: ANN001
    if not x.dtype.is_floating_point:
        raise DTypeRuntimeError(f"[dropout] result type Float can't be cast to the desired "
                                f"output type {x.dtype.name}; dropout needs a floating input")
    return tuple(x.shape), x.dtype


def dropout_keep(seed: int, offset: int, shape: tuple, p: float) -> np.ndarray:
    """The keep mask: element ``i`` is kept where ``w_i * 2**-32 < 1 - p``."""
    return ph.unit32(ph.random_words(seed, offset, _numel(shape))).reshape(shape) < 1.0 - p


def _dropout_eager(x: np.ndarray, *, p: float, seed: int, offset: int) -> np.ndarray:
    keep = dropout_keep(seed, offset, x.shape, p)
    # PyTorch scales by 1 / (1 - p) rounded to the input dtype, then multiplies
    scale = np.asarray(1.0 / (1.0 - p) if p < 1 else 0.0).astype(x.dtype)
    noise = np.where(keep, scale, np.zeros((), x.dtype))
    if x.dtype in (np.float16, dt.bfloat16.np):
        return (x.astype(np.float32) * noise.astype(np.float32)).astype(x.dtype)
    return x * noise


def _dropout_vjp(ctx, g):  # noqa: ANN001
    # dropout is linear in its input: the gradient is the same mask and scale applied to g
    return (bind(DROPOUT, g, **ctx.params),)


DROPOUT = register(OpDef(
    "dropout", "random", _dropout_meta, _dropout_eager, _dropout_vjp, tags=_RANDOM,
    doc="x * mask / (1 - p) with the mask drawn from the Philox stream.",
))
