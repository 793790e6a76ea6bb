"""The OpInfo table machinery: one entry per user-facing op with sample inputs.

An ``OpInfo`` names a function ``fn(lib, *args, **kwargs)`` that is run once with ``lib=ember``
and once with ``lib=torch`` on the same sample inputs (NumPy arrays turned into each library's
tensors), so one lambda serves both: ``lambda lib, x, y: lib.add(x, y)`` or
``lambda lib, x: x.exp()``.

Each family of ops has its own module (``ops_pointwise.py``, ``ops_reduction.py``, ...) that
defines ``OPINFOS: list[OpInfo]``; ``ALL_OPINFOS`` gathers them.  Drivers:
``test_values.py`` (values and dtypes against torch), ``test_grads.py`` (gradients against
torch and against finite differences), ``test_errors.py`` (error types and messages), and
``test_registry.py`` (every registered OpDef is reached by some sample); they and the compiler's
conformance tests take cases and samples from ``harness.py``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

import ember

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("uint8", "int8", "int16", "int32", "int64")
ALL = ("bool",) + INTS + FLOATS
FLOAT32_64 = ("float32", "float64")
SIGNED_INTS = ("int8", "int16", "int32", "int64")

# (rtol, atol) per dtype, torch.testing's defaults
TOLS = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


@dataclass
class Sample:
    """Positional args (arrays become tensors; anything else is passed as is) and kwargs."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""
    grad: bool = True           # include in gradient tests
    noncontig: bool = False     # arrays were made non-contiguous

    def __repr__(self) -> str:
        return self.desc or f"Sample({len(self.args)} args)"


@dataclass
class ErrorCase:
    """``fn(ember, *args)`` must raise ``exc`` with a message matching ``match``."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    exc: type = Exception
    match: str = ""
    desc: str = ""


@dataclass
class OpInfo:
    name: str
    fn: Callable[..., Any]
    samples: Callable[[str, np.random.Generator], Iterable[Sample]]
    dtypes: Sequence[str] = FLOAT32_64
    grad: bool = True                    # differentiable w.r.t. float array args
    grad_dtypes: Sequence[str] = ("float64",)
    fd_check: bool = True                # finite-difference gradcheck in float64
    errors: Callable[[], Iterable[ErrorCase]] = lambda: ()
    tols: dict = field(default_factory=dict)      # dtype -> (rtol, atol) overrides
    # every output is a sum of products of two inputs' elements (conv, matmul, linear): float32/
    # float64 values compare within dot_tolerance (from each output's reduction length)
    sum_of_products: bool = False
    compare: Callable[[Any, Any], None] | None = None  # custom compare(ember_out, torch_out)
    random: bool = False                 # output is random: only shapes/dtypes compared
    skip_torch: str = ""                 # reason torch cannot be the oracle (compare differently)
    xfail: dict = field(default_factory=dict)  # dtype -> reason (strict xfail vs torch)
    no_samples: dict = field(default_factory=dict)  # dtype -> why a kind has no sample there

    def rng(self, dtype: str) -> np.random.Generator:
        return np.random.default_rng(zlib.crc32(f"{self.name}/{dtype}".encode()))


# ------------------------------------------------------------------------ sample helpers
def np_dtype(name: str) -> np.dtype:
    return getattr(ember, name).np


def make(shape: Sequence[int], dtype: str, rng: np.random.Generator, low: float = -3.0,
         high: float = 3.0, noncontig: bool = False, exclude_zero: bool = False) -> np.ndarray:
    """A random array; ``noncontig`` returns a strided view with the same values' layout."""
    shape = tuple(shape)
    full = tuple(s * 2 for s in shape) if noncontig and shape else shape
    if dtype == "bool":
        arr = rng.random(full) < 0.5
    elif dtype in INTS:
        lo = max(int(low), 0) if dtype == "uint8" else int(low)
        hi = max(int(high), lo + 1)
        arr = rng.integers(lo, hi + 1, size=full).astype(np_dtype(dtype))
    else:
        arr = rng.uniform(low, high, size=full)
        if exclude_zero:
            arr = np.where(np.abs(arr) < 0.1, 0.5, arr)
        arr = arr.astype(np_dtype(dtype))
    if exclude_zero and dtype in INTS + ("bool",):
        arr = np.where(arr == 0, np.ones_like(arr), arr)
    arr = np.asarray(arr)
    if noncontig and shape:
        arr = arr[tuple(slice(None, None, 2) for _ in shape)]
    return arr


def standard_shapes() -> list[tuple]:
    """0-d, empty, 1-d, 2-d and 3-d shapes used by most samples."""
    return [(), (0,), (5,), (3, 4), (2, 3, 4)]


# ------------------------------------------------------------------------ conversions
def to_ember(x: Any, requires_grad: bool = False) -> Any:
    if isinstance(x, np.ndarray):
        t = ember.from_numpy(x.copy() if not x.flags.writeable else x)
        if requires_grad:
            t = t.detach().requires_grad_(True)
        return t
    if isinstance(x, (list, tuple)) and x and all(isinstance(i, np.ndarray) for i in x):
        return type(x)(to_ember(i, requires_grad) for i in x)
    return x


def to_torch(x: Any, torch: Any, requires_grad: bool = False) -> Any:
    if isinstance(x, np.ndarray):
        if x.dtype == ember.bfloat16.np:
            t = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
        else:
            # torch.from_numpy refuses some layouts; keep strides with as_strided
            t = torch.from_numpy(np.array(x, copy=True, order="C"))
            if not x.flags.c_contiguous and x.size and all(s >= 0 for s in x.strides):
                base = torch.empty(_span(x), dtype=t.dtype)
                v = base.as_strided(x.shape, tuple(s // x.itemsize for s in x.strides))
                v.copy_(t)
                t = v
        if requires_grad:
            t = t.detach().requires_grad_(True)
        return t
    if isinstance(x, (list, tuple)) and x and all(isinstance(i, np.ndarray) for i in x):
        return type(x)(to_torch(i, torch, requires_grad) for i in x)
    if isinstance(x, ember.dtype):
        return getattr(torch, x.name)
    return x


def _span(x: np.ndarray) -> int:
    return 1 + sum((n - 1) * (s // x.itemsize) for n, s in zip(x.shape, x.strides))


def convert_kwargs(kwargs: dict, torch: Any) -> dict:
    return {k: to_torch(v, torch) for k, v in kwargs.items()}


def to_numpy(x: Any) -> np.ndarray:
    """An ember or torch tensor as a NumPy array (bf16/f16 widened to float32)."""
    if isinstance(x, ember.Tensor):
        a = x.detach()._data
        if a.dtype in (np.float16, ember.bfloat16.np):
            a = a.astype(np.float32)
        return np.asarray(a)
    t = x.detach()
    if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
        t = t.float()
    return t.numpy()


def dtype_name(x: Any) -> str:
    return str(x.dtype).replace("torch.", "").replace("ember.", "")


def dot_tolerance(op: OpInfo, sample: Sample, torch: Any, dtype: str) -> np.ndarray:
    """Per-element bound on |ember - torch| for a ``sum_of_products`` op in ``dtype``.

    An output y = sum of K products x_i w_i (a bias counts as one more term) computed in
    floating point, in any order, with or without fma, is within gamma_K * S of the exact
    value, with S = sum |x_i w_i|, gamma_K = K u / (1 - K u) and u = eps / 2 (Higham, Accuracy
    and Stability of Numerical Algorithms, 2nd ed., section 3.1); two such results differ by at
    most 2 gamma_K S, about K eps S.  This is PyTorch OpInfo's practice of scaling a matmul or
    conv tolerance with the reduction length, made exact per element: K = C_in/groups *
    prod(kernel) for an interior conv output, fewer at a padded border.  K and S come from the
    op itself in float64: ``fn(ones)`` counts the terms, ``fn(|args|)`` sums their magnitudes.
    A wrong kernel element or a missing term changes an output by |x_i w_i|, orders of
    magnitude above the bound (tests/opinfo/test_tolerances.py)."""
    def conv(a: Any, f: Callable[[np.ndarray], np.ndarray]) -> Any:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            return to_torch(np.asarray(f(a.astype(np.float64))), torch)
        return to_torch(a, torch)

    kw = convert_kwargs(sample.kwargs, torch)
    s = op.fn(torch, *[conv(a, np.abs) for a in sample.args], **kw).numpy()
    k = op.fn(torch, *[conv(a, np.ones_like) for a in sample.args], **kw).numpy()
    u = float(np.finfo(np_dtype(dtype)).eps) / 2
    return 2 * (k * u / (1 - k * u)) * s


def assert_close(actual: Any, expected: Any, dtype: str, tols: dict | None = None,
                 what: str = "", bound: np.ndarray | None = None) -> None:
    """Compare an ember result with a torch result: structure, shape, dtype and values
    (within ``bound`` per element where given: see ``dot_tolerance``)."""
    if isinstance(expected, (tuple, list)) and not hasattr(expected, "dtype"):
        assert isinstance(actual, (tuple, list)), f"{what}: expected a sequence, got {actual!r}"
        assert len(actual) == len(expected), f"{what}: {len(actual)} vs {len(expected)} outputs"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, dtype, tols, f"{what}[{i}]")
        return
    if not hasattr(expected, "dtype"):
        # Python scalar (item(), size, ...)
        assert type(actual) is type(expected) or (
            isinstance(actual, (int, float)) and isinstance(expected, (int, float))
        ), f"{what}: {type(actual)} vs {type(expected)}"
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6, err_msg=what)
        return
    assert isinstance(actual, ember.Tensor), f"{what}: expected an ember Tensor, got {actual!r}"
    assert tuple(actual.shape) == tuple(expected.shape), (
        f"{what}: shape {tuple(actual.shape)} vs torch {tuple(expected.shape)}")
    assert dtype_name(actual) == dtype_name(expected), (
        f"{what}: dtype {dtype_name(actual)} vs torch {dtype_name(expected)}")
    a, e = to_numpy(actual), to_numpy(expected)
    out_dtype = dtype_name(expected)
    rtol, atol = (tols or {}).get(out_dtype, TOLS.get(out_dtype, (0, 0)))
    if a.dtype.kind in "biu":  # to_numpy widened float16/bfloat16 to float32
        np.testing.assert_array_equal(a, e, err_msg=what)
    elif bound is not None:
        _assert_within(a, e, np.broadcast_to(bound, e.shape), what)
    else:
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def _assert_within(a: np.ndarray, e: np.ndarray, bound: np.ndarray, what: str) -> None:
    """|a - e| <= bound elementwise where both are finite; non-finite values must match."""
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    finite = np.isfinite(a64) & np.isfinite(e64) & np.isfinite(bound)
    np.testing.assert_array_equal(a[~finite], e[~finite], err_msg=what)
    err = np.abs(a64 - e64)[finite]
    bad = np.flatnonzero(err > bound[finite])
    if bad.size:
        i = bad[np.argmax(err[bad] / np.maximum(bound[finite][bad], 1e-300))]
        raise AssertionError(
            f"{what}: {bad.size} of {err.size} elements differ by more than the reduction "
            f"bound; worst: ember {a64[finite][i]!r}, torch {e64[finite][i]!r}, |diff| "
            f"{err[i]:.3g} > bound {bound[finite][i]:.3g}")
