"""Random tensor creation and in-place sampling: rand, randn, randint, randperm, normal,
bernoulli, multinomial, ``Tensor.uniform_`` / ``normal_`` / ``random_`` / ``exponential_`` /
``bernoulli_``, and the generator functions (``manual_seed``, ``seed``, ...).

Each call reserves the words it draws from a ``Generator`` (the default one unless
``generator=`` is given) and binds a ``random`` primitive with that ``(seed, offset)``.
"""

from __future__ import annotations

from typing import Any, Sequence

from ember import dtypes as dt
from ember import random as _random
from ember._frontend.core import broadcast_shapes, expand_to, is_scalar, py_scalar, to_dtype
from ember._frontend.creation import _DTYPE_NAMES, supports_out
from ember._frontend.inplace import commit_inplace
from ember._frontend.shape import size_args
from ember.device import check_device, check_pin
from ember.errors import DTypeError, EmberNotImplementedError, EmberRuntimeError, EmberTypeError
from ember.ops import random as R
from ember.ops.registry import bind
from ember.random import (  # noqa: F401  (re-exported as ember.<name>)
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from ember.tensor import Tensor, tensor_method

__all__ = [
    "Generator", "bernoulli", "default_generator", "get_rng_state", "initial_seed",
    "manual_seed", "multinomial", "normal", "rand", "rand_like", "randint", "randint_like",
    "randn", "randn_like", "randperm", "seed", "set_rng_state",
]

_TYPE_NAMES = _DTYPE_NAMES   # PyTorch's names in its kernel errors: 'Float', 'Long', ...


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _sizes(size: tuple, kw: Any, op: str) -> tuple:
    if kw is not None:
        if size:
            raise EmberTypeError(f"[{op}] got the size both positionally and as size=")
        size = (kw,)
    shape = size_args(size, op)
    if any(s < 0 for s in shape):
        raise EmberRuntimeError(f"[{op}] Trying to create tensor with negative dimension "
                                f"{min(shape)}: {list(shape)}")
    return shape


def _float_dtype(dtype: dt.dtype | None, op: str, kernel: str) -> dt.dtype:
    d = dtype or dt.get_default_dtype()
    if not d.is_floating_point:
        raise EmberNotImplementedError(f"[{op}] \"{kernel}\" not implemented for "
                                       f"'{_TYPE_NAMES[d.name]}'")
    return d


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ------------------------------------------------------------------------------- core draws
def _uniform(shape: tuple, d: dt.dtype, low: float, high: float,
             generator: Generator | None) -> Tensor:
    s, off = _random.resolve(generator)._consume(R.uniform_words(_numel(shape), d))
    return bind(R.UNIFORM, shape=shape, dtype=d, low=float(low), high=float(high), seed=s,
                offset=off)


def _normal(mean: Any, std: Any, shape: tuple, d: dt.dtype,
            generator: Generator | None) -> Tensor:
    s, off = _random.resolve(generator)._consume(R.normal_words(_numel(shape), d))
    return bind(R.NORMAL, mean, std, shape=shape, dtype=d, seed=s, offset=off)


def _randint(shape: tuple, d: dt.dtype, low: int, high: int, generator: Generator | None,
             op: str) -> Tensor:
    if low >= high:
        raise EmberRuntimeError(f"[{op}] random_ expects 'from' to be less than 'to', but got "
                                f"from={low} >= to={high}")
    if d.category in (0, 1):
        info = dt.iinfo(d) if d is not dt.bool else None
        lo, hi = (0, 1) if info is None else (info.min, info.max)
        if low < lo or high - 1 > hi:
            what = "from" if low < lo else "to - 1"
            raise EmberRuntimeError(f"[{op}] {what} is out of bounds for {d.name}")
    s, off = _random.resolve(generator)._consume(R.randint_words(_numel(shape), low, high))
    return bind(R.RANDINT, shape=shape, dtype=d, low=low, high=high, seed=s, offset=off)


# ------------------------------------------------------------------------------- creation
@supports_out("rand")
def rand(*size: Any, generator: Generator | None = None,
         dtype: dt.dtype | None = None, layout: Any = None, device: Any = None,
         requires_grad: bool = False, pin_memory: bool = False, **kwargs: Any) -> Tensor:
    """Uniform samples on [0, 1) (``ember.rand(2, 3)``)."""
    check_pin(pin_memory, "rand")
    check_device(device, "rand")
    shape = _sizes(size, kwargs.pop("size", None), "rand")
    _no_extra(kwargs, "rand")
    d = _float_dtype(dtype, "rand", "check_uniform_bounds")
    return _finish(_uniform(shape, d, 0.0, 1.0, generator), requires_grad)


@supports_out("randn")
def randn(*size: Any, generator: Generator | None = None,
          dtype: dt.dtype | None = None, layout: Any = None, device: Any = None,
          requires_grad: bool = False, pin_memory: bool = False, **kwargs: Any) -> Tensor:
    """Standard normal samples (``ember.randn(2, 3)``)."""
    check_pin(pin_memory, "randn")
    check_device(device, "randn")
    shape = _sizes(size, kwargs.pop("size", None), "randn")
    _no_extra(kwargs, "randn")
    d = _float_dtype(dtype, "randn", "normal_kernel_cpu")
    return _finish(_normal(0.0, 1.0, shape, d, generator), requires_grad)


def _no_extra(kwargs: dict, op: str) -> None:
    if kwargs:
        raise EmberTypeError(f"[{op}] got unexpected keyword arguments {sorted(kwargs)}")


def rand_like(input: Tensor, *, dtype: dt.dtype | None = None, layout: Any = None,
              device: Any = None, requires_grad: bool = False, memory_format: Any = None,
              generator: Generator | None = None, pin_memory: bool = False) -> Tensor:
    """``rand`` with ``input``'s shape and (by default) dtype."""
    check_pin(pin_memory, "rand_like")
    return rand(tuple(input.shape), dtype=dtype or input.dtype, device=device,
                requires_grad=requires_grad, generator=generator)


def randn_like(input: Tensor, *, dtype: dt.dtype | None = None, layout: Any = None,
               device: Any = None, requires_grad: bool = False, memory_format: Any = None,
               generator: Generator | None = None, pin_memory: bool = False) -> Tensor:
    """``randn`` with ``input``'s shape and (by default) dtype."""
    check_pin(pin_memory, "randn_like")
    return randn(tuple(input.shape), dtype=dtype or input.dtype, device=device,
                 requires_grad=requires_grad, generator=generator)


@supports_out("randint")
def randint(*args: Any, size: Any = None, generator: Generator | None = None,
            dtype: dt.dtype | None = None, layout: Any = None, device: Any = None,
            requires_grad: bool = False, pin_memory: bool = False, low: Any = None,
            high: Any = None) -> Tensor:
    """Integers uniform on [low, high): ``randint(high, size)`` or ``randint(low, high, size)``
    (int64 unless ``dtype`` says otherwise)."""
    check_pin(pin_memory, "randint")
    check_device(device, "randint")
    pos = list(args)
    if size is None and pos and isinstance(pos[-1], (tuple, list)):
        size = pos.pop()
    if high is None and pos:
        high = pos.pop()
    if low is None:
        low = pos.pop() if pos else 0
    if pos or high is None or size is None:
        raise EmberTypeError("[randint] expected randint(high, size) or randint(low, high, size)")
    shape = _sizes((), size, "randint")
    d = dtype or dt.int64
    t = _randint(shape, d, int(py_scalar(low)), int(py_scalar(high)), generator, "randint")
    return _finish(t, requires_grad)


def randint_like(input: Tensor, low: Any = 0, high: Any = None, *,
                 dtype: dt.dtype | None = None, layout: Any = None, device: Any = None,
                 requires_grad: bool = False, memory_format: Any = None,
                 generator: Generator | None = None, pin_memory: bool = False) -> Tensor:
    """``randint`` with ``input``'s shape and dtype: ``randint_like(x, high)`` or
    ``randint_like(x, low, high)``."""
    check_pin(pin_memory, "randint_like")
    if high is None:
        low, high = 0, low
    return randint(int(low), int(high), tuple(input.shape), dtype=dtype or input.dtype,
                   device=device, requires_grad=requires_grad, generator=generator)


@supports_out("randperm")
def randperm(n: int, *, generator: Generator | None = None,
             dtype: dt.dtype | None = None, layout: Any = None, device: Any = None,
             requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A random permutation of ``0 .. n - 1`` (int64 by default)."""
    check_pin(pin_memory, "randperm")
    check_device(device, "randperm")
    n = int(n)
    d = dtype or dt.int64
    s, off = _random.resolve(generator)._consume(R.randperm_words(max(n, 0)))
    return _finish(bind(R.RANDPERM, n=n, dtype=d, seed=s, offset=off), requires_grad)


# ------------------------------------------------------------------------------- normal
def _check_std(std: Any, op: str = "normal") -> None:
    if isinstance(std, Tensor):
        if std.numel() and bool((std._data < 0).any()):
            raise EmberRuntimeError(f"[{op}] normal expects all elements of std >= 0.0")
    elif std < 0:
        raise EmberRuntimeError(f"[{op}] normal expects std >= 0.0, but found std {std:g}")


@supports_out("normal")
def normal(mean: Any = 0.0, std: Any = 1.0, size: Sequence[int] | None = None, *,
           generator: Generator | None = None, dtype: dt.dtype | None = None,
           layout: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """Samples of N(mean, std^2): ``normal(mean_t, std_t)``, ``normal(mean_t, std=1.)``,
    ``normal(mean, std_t)``, or ``normal(mean, std, size)``; tensor arguments broadcast."""
    check_pin(pin_memory, "normal")
    check_device(device, "normal")
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    _check_std(std)
    if not mt and not st:
        if size is None:
            raise EmberTypeError("[normal] normal(float mean, float std) needs a size")
        shape = _sizes((), size, "normal")
        d = _float_dtype(dtype, "normal", "normal_kernel_cpu")
        out_t = _normal(float(py_scalar(mean)), float(py_scalar(std)), shape, d, generator)
        return _finish(out_t, requires_grad)
    tensors = [x for x in (mean, std) if isinstance(x, Tensor)]
    d = tensors[0].dtype if len(tensors) == 1 else dt.promote_types(mean.dtype, std.dtype)
    if not d.is_floating_point:
        raise EmberNotImplementedError(f"[normal] \"normal_kernel_cpu\" not implemented for "
                                       f"'{_TYPE_NAMES[d.name]}'")
    shape = broadcast_shapes("normal", *[tuple(x.shape) for x in tensors])
    args = [expand_to(to_dtype(x, d), shape) if isinstance(x, Tensor)
            else float(py_scalar(x)) for x in (mean, std)]
    return _normal(args[0], args[1], shape, d, generator)


# ------------------------------------------------------------------------------- bernoulli
@tensor_method("bernoulli")
@supports_out("bernoulli", has_dtype=False)
def bernoulli(input: Tensor, p: float | None = None, *,
              generator: Generator | None = None) -> Tensor:
    """0/1 samples with probabilities ``input`` (or ``p`` for every element), in ``input``'s
    dtype."""
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"[bernoulli] expected a Tensor, got {type(input).__name__}")
    if p is not None:
        probs = _scalar_probs(input, p)
        return _bernoulli(probs, input.dtype, generator)
    if not input.dtype.is_floating_point:
        raise EmberNotImplementedError(f"[bernoulli] \"bernoulli_tensor_cpu_p_\" not "
                                       f"implemented for '{_TYPE_NAMES[input.dtype.name]}'")
    return _bernoulli(input, input.dtype, generator)


def _scalar_probs(like: Tensor, p: float) -> Tensor:
    from ember._frontend.creation import full
    if not 0 <= p <= 1:
        raise EmberRuntimeError(f"[bernoulli] bernoulli_ expects p to be in [0, 1], but got "
                                f"p={p}")
    return full(tuple(like.shape), float(p), dtype=dt.float64)


def _bernoulli(probs: Tensor, d: dt.dtype, generator: Generator | None) -> Tensor:
    s, off = _random.resolve(generator)._consume(probs.numel())
    return bind(R.BERNOULLI, probs, dtype=d, seed=s, offset=off)


@tensor_method("multinomial")
@supports_out("multinomial", has_dtype=False)
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> Tensor:
    """``num_samples`` category indices per row of the (unnormalized) probabilities
    ``input`` (1-d or 2-d)."""
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"[multinomial] expected a Tensor, got {type(input).__name__}")
    n_cat = input.shape[-1] if input.ndim else 0
    n_dist = _numel(input.shape[:-1]) if input.ndim else 0
    words = R.multinomial_words(n_dist, n_cat, max(int(num_samples), 0), bool(replacement))
    s, off = _random.resolve(generator)._consume(words)
    return bind(R.MULTINOMIAL, input, num_samples=int(num_samples),
                replacement=bool(replacement), seed=s, offset=off)


# ------------------------------------------------------------------------------- in place
def uniform_(self: Tensor, a: float = 0.0, to: float = 1.0, *,
             generator: Generator | None = None, **kwargs: Any) -> Tensor:
    """Fill with samples uniform on [from, to) (``from`` by position or as ``**{"from": x}``,
    as in PyTorch)."""
    a = kwargs.pop("from", a)
    _no_extra(kwargs, "uniform_")
    a, b = float(py_scalar(a)), float(py_scalar(to))
    if a > b:
        raise EmberRuntimeError(f"[uniform_] uniform_ expects to return a [from, to) range, but "
                                f"found from={a} > to={b}")
    d = _float_dtype(self.dtype, "uniform_", "check_uniform_bounds")
    return commit_inplace(self, _uniform(tuple(self.shape), d, a, b, generator), "uniform_")


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill with samples of N(mean, std^2)."""
    std = float(py_scalar(std))
    _check_std(std, "normal_")
    d = _float_dtype(self.dtype, "normal_", "normal_kernel_cpu")
    out = _normal(float(py_scalar(mean)), std, tuple(self.shape), d, generator)
    return commit_inplace(self, out, "normal_")


def exponential_(self: Tensor, lambd: float = 1.0, *,
                 generator: Generator | None = None) -> Tensor:
    """Fill with samples of the exponential distribution with rate ``lambd``."""
    lambd = float(py_scalar(lambd))
    if not lambd > 0:
        raise EmberRuntimeError(f"[exponential_] exponential_ expects lambda > 0.0, but found "
                                f"lambda={lambd:g}")
    d = _continuous_dtype(self.dtype, "exponential_", "Exponential")
    shape = tuple(self.shape)
    s, off = _random.resolve(generator)._consume(R.uniform_words(_numel(shape), d))
    out = bind(R.EXPONENTIAL, shape=shape, dtype=d, lambd=lambd, seed=s, offset=off)
    return commit_inplace(self, out, "exponential_")


def _continuous_dtype(d: dt.dtype, op: str, what: str) -> dt.dtype:
    if not d.is_floating_point:
        raise EmberRuntimeError(f"[{op}] {what} distribution is a continuous probability "
                                f"distribution. dtype must be a floating point but you "
                                f"specified {_TYPE_NAMES[d.name]}")
    return d


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill with samples of the Cauchy distribution."""
    median, sigma = float(py_scalar(median)), float(py_scalar(sigma))
    if not sigma > 0:
        raise EmberRuntimeError(f"[cauchy_] cauchy_ expects sigma > 0.0, but found "
                                f"sigma={sigma:g}")
    d = _continuous_dtype(self.dtype, "cauchy_", "Cauchy")
    shape = tuple(self.shape)
    s, off = _random.resolve(generator)._consume(R.uniform_words(_numel(shape), d))
    out = bind(R.CAUCHY, shape=shape, dtype=d, median=median, sigma=sigma, seed=s, offset=off)
    return commit_inplace(self, out, "cauchy_")


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *,
                generator: Generator | None = None) -> Tensor:
    """Fill with ``exp(N(mean, std^2))`` samples."""
    mean, std = float(py_scalar(mean)), float(py_scalar(std))
    if not std > 0:
        raise EmberRuntimeError(f"[log_normal_] log_normal_ expects std > 0.0, but found "
                                f"std={std:g}")
    d = _float_dtype(self.dtype, "log_normal_", "log_normal_cpu")
    shape = tuple(self.shape)
    s, off = _random.resolve(generator)._consume(R.normal_words(_numel(shape), d))
    out = bind(R.LOG_NORMAL, shape=shape, dtype=d, mean=mean, std=std, seed=s, offset=off)
    return commit_inplace(self, out, "log_normal_")


def geometric_(self: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (>= 1)."""
    p = float(py_scalar(p))
    if not 0 < p < 1:
        raise EmberRuntimeError(f"[geometric_] geometric_ expects p to be in (0, 1), but got "
                                f"p={p:g}")
    shape = tuple(self.shape)
    s, off = _random.resolve(generator)._consume(_numel(shape))
    out = bind(R.GEOMETRIC, shape=shape, dtype=self.dtype, p=p, seed=s, offset=off)
    return commit_inplace(self, out, "geometric_")


def random_(self: Tensor, from_: int | None = None, to: int | None = None, *,
            generator: Generator | None = None, **kwargs: Any) -> Tensor:
    """Fill with integers uniform on [from, to); ``random_(to)`` means [0, to); ``random_()``
    covers the dtype's range (floats: [0, 2**mantissa])."""
    if "from" in kwargs:
        from_ = kwargs.pop("from")
    _no_extra(kwargs, "random_")
    if from_ is not None and to is None:
        from_, to = 0, from_
    low = 0 if from_ is None else int(from_)
    high = _default_high(self.dtype) if to is None else int(to)
    out = _randint(tuple(self.shape), self.dtype, low, high, generator, "random_")
    return commit_inplace(self, out, "random_")


def _default_high(d: dt.dtype) -> int:
    if d is dt.bool:
        return 2
    if d.is_floating_point:
        return (1 << {"float16": 11, "bfloat16": 8, "float32": 24}.get(d.name, 53)) + 1
    return dt.iinfo(d).max + 1


def bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill with 0/1 samples with probability ``p`` (a float or a broadcastable tensor)."""
    if isinstance(p, Tensor):
        if not p.dtype.is_floating_point:
            raise DTypeError(f"[bernoulli_] expected floating probabilities, got {p.dtype.name}")
        probs = expand_to(p, broadcast_shapes("bernoulli_", tuple(p.shape), tuple(self.shape)))
    elif is_scalar(p):
        probs = _scalar_probs(self, float(py_scalar(p)))
    else:
        raise EmberTypeError(f"[bernoulli_] p must be a float or a Tensor, got "
                             f"{type(p).__name__}")
    return commit_inplace(self, _bernoulli(probs, self.dtype, generator), "bernoulli_")


for _name, _fn in (("uniform_", uniform_), ("normal_", normal_),
                   ("exponential_", exponential_), ("random_", random_),
                   ("bernoulli_", bernoulli_), ("cauchy_", cauchy_),
                   ("log_normal_", log_normal_), ("geometric_", geometric_)):
    setattr(Tensor, _name, _fn)
