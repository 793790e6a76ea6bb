"""OpInfo entries for the structure ops: tril/triu (+ indices, in-place), broadcast_to /
broadcast_tensors / broadcast_shapes, meshgrid, diag / diag_embed / trace, repeat_interleave,
rot90, diff and kron."""

from __future__ import annotations

import warnings

import numpy as np

import ember
from tests.opinfo.core import ALL, FLOATS, INTS, ErrorCase, OpInfo, Sample, make

F32 = np.float32
I64 = np.int64
NUMERIC = INTS + FLOATS  # everything but bool


def _z(*shape, dtype=F32):
    return np.zeros(shape, dtype)


# ---------------------------------------------------------------------------------- tril/triu
def _tri_samples(dtype, rng):
    x = make((4, 5), dtype, rng)
    for k in (0, 1, -1, 3, -3, 10, -10):
        yield Sample((x,), {"diagonal": k}, desc=f"diagonal={k}")
    yield Sample((x,), desc="default")
    yield Sample((make((2, 3, 3, 4), dtype, rng),), {"diagonal": -1}, desc="batched")
    yield Sample((make((5, 2), dtype, rng),), {"diagonal": 1}, desc="tall")
    yield Sample((make((0, 3), dtype, rng),), desc="empty")
    yield Sample((make((2, 0, 3), dtype, rng),), {"diagonal": 1}, desc="empty batch")
    yield Sample((make((4, 3), dtype, rng, noncontig=True),), {"diagonal": -1},
                 desc="noncontig", noncontig=True)
    yield Sample((make((3, 4), dtype, rng).T,), desc="transposed")


def _tri_errors(op):
    return lambda: [
        ErrorCase((_z(3),), exc=RuntimeError,
                  match=rf"\[{op}\] {op}: input tensor must have at least 2 dimensions"),
        ErrorCase((np.zeros((), F32),), exc=RuntimeError, match=rf"\[{op}\] .*at least 2"),
    ]


def _tri_inplace(name):
    def fn(t, x, **kw):
        y = x.clone()  # in-place on a non-leaf, so its gradient flows back to x
        getattr(y, name)(**kw)
        return y
    return fn


def _tri_indices_samples(dtype, rng):
    for row, col in [(3, 4), (4, 3), (1, 1), (0, 4), (3, 0), (5, 5)]:
        for off in (0, 1, -1, 2, -4, 10, -10):
            yield Sample((), {"row": row, "col": col, "offset": off},
                         desc=f"{row}x{col} offset={off}", grad=False)


def _tri_indices_dtype_samples(dtype, rng):
    for d in ("int32", "int64"):
        yield Sample((), {"row": 4, "col": 3, "offset": -1, "dtype": getattr(ember, d)},
                     desc=d, grad=False)


def _tri_indices_fn(name):
    return lambda t, **kw: getattr(t, name)(**kw)  # convert_kwargs maps the dtype for torch


def _tri_indices_errors(name):
    return lambda: [
        ErrorCase((), {"row": -1, "col": 4}, exc=RuntimeError,
                  match=rf"\[{name}\] row must be non-negative, got-1"),
        ErrorCase((), {"row": 3, "col": -4}, exc=RuntimeError,
                  match=rf"\[{name}\] col must be non-negative, got-4"),
        ErrorCase((), {"row": 3, "col": 4, "dtype": ember.float32}, exc=NotImplementedError,
                  match=rf"\[{name}\] \"{name}\" not implemented for 'Float'"),
        ErrorCase((), {"row": 3, "col": 4, "dtype": ember.int16}, exc=NotImplementedError,
                  match=r"not implemented for 'Short'"),
    ]


# ---------------------------------------------------------------------------------- broadcast
def _broadcast_to_samples(dtype, rng):
    yield Sample((make((3, 1), dtype, rng),), {"size": (2, 3, 4)}, desc="expand + new dims")
    yield Sample((make((3, 4), dtype, rng),), {"size": (3, 4)}, desc="same shape")
    yield Sample((make((), dtype, rng),), {"size": (2, 2)}, desc="0-d")
    yield Sample((make((1,), dtype, rng),), {"size": (0,)}, desc="to empty")
    yield Sample((make((3, 1), dtype, rng),), {"size": (-1, 5)}, desc="-1 keeps size")
    yield Sample((make((1, 3), dtype, rng, noncontig=True),), {"size": (4, 3)},
                 desc="noncontig", noncontig=True)


def _broadcast_to_errors():
    return [
        ErrorCase((_z(2, 3),), {"size": (3, 3)}, exc=RuntimeError, match=r"\[expand\]"),
        ErrorCase((_z(2, 3),), {"size": (3,)}, exc=RuntimeError, match=r"\[expand\]"),
    ]


def _broadcast_tensors_samples(dtype, rng):
    yield Sample((make((3, 1), dtype, rng), make((4,), dtype, rng)), desc="two")
    yield Sample((make((), dtype, rng), make((2, 3), dtype, rng), make((1, 3), dtype, rng)),
                 desc="three with 0-d")
    yield Sample((make((2, 3), dtype, rng),), desc="one")
    yield Sample((), desc="none", grad=False)
    yield Sample((make((0, 1), dtype, rng), make((3,), dtype, rng)), desc="empty")
    yield Sample((make((3, 1), dtype, rng, noncontig=True), make((1, 2), dtype, rng)),
                 desc="noncontig", noncontig=True)


def _broadcast_tensors_errors():
    return [
        ErrorCase((_z(2, 3), _z(3, 2)), exc=RuntimeError,
                  match=r"\[broadcast_tensors\] The size of tensor a \(3\) must match the "
                        r"size of tensor b \(2\) at non-singleton dimension 1"),
        ErrorCase((_z(2), 3), exc=TypeError,
                  match=r"\[broadcast_tensors\] expected Tensor as element 1 in argument 0, "
                        r"but got int"),
        ErrorCase(([_z(2), _z(2)],), exc=TypeError,
                  match=r"\[broadcast_tensors\] expected Tensor as element 0 in argument 0, "
                        r"but got list"),
    ]


def _shapes_samples(dtype, rng):
    yield Sample(((2, 1), (3,)), desc="tuples", grad=False)
    yield Sample((3, (2, 1)), desc="int and tuple", grad=False)
    yield Sample(((2, 0), (1,)), desc="zero size", grad=False)
    yield Sample((), desc="none", grad=False)
    yield Sample(([1, 4], (5, 1, 1), ()), desc="lists", grad=False)


def _compare_size(actual, expected):
    assert isinstance(actual, ember.Size), type(actual)
    assert tuple(actual) == tuple(expected), (actual, expected)


def _shapes_errors():
    return [
        ErrorCase(((2, 3), (3, 2)), exc=RuntimeError,
                  match=r"\[broadcast_shapes\] Attempting to broadcast a dimension of length 2 "
                        r"at -1! Mismatching argument at index 1 had \(3, 2\)"),
        ErrorCase(((2, -1),), exc=ValueError,
                  match=r"\[broadcast_shapes\] Attempting to broadcast a dimension with "
                        r"negative length!"),
    ]


# ---------------------------------------------------------------------------------- meshgrid
def _meshgrid_samples(dtype, rng):
    for ix in ("ij", "xy"):
        yield Sample((make((3,), dtype, rng), make((4,), dtype, rng)), {"indexing": ix},
                     desc=f"two {ix}")
        yield Sample((make((2,), dtype, rng), make((), dtype, rng), make((3,), dtype, rng)),
                     {"indexing": ix}, desc=f"three with 0-d {ix}")
        yield Sample((make((3,), dtype, rng),), {"indexing": ix}, desc=f"one {ix}")
        yield Sample((make((0,), dtype, rng), make((2,), dtype, rng)), {"indexing": ix},
                     desc=f"empty {ix}")
    yield Sample((make((3,), dtype, rng, noncontig=True), make((2,), dtype, rng)),
                 {"indexing": "xy"}, desc="noncontig", noncontig=True)


def _meshgrid_errors():
    return [
        ErrorCase((_z(2, 2),), {"indexing": "ij"}, exc=RuntimeError,
                  match=r"\[meshgrid\] torch.meshgrid: Expected 0D or 1D tensor"),
        ErrorCase((_z(2), _z(3, dtype=I64)), {"indexing": "ij"}, exc=RuntimeError,
                  match=r"\[meshgrid\] meshgrid expects all tensors to have the same dtype"),
        ErrorCase((_z(2),), {"indexing": "foo"}, exc=RuntimeError,
                  match=r"\[meshgrid\] torch.meshgrid: indexing must be one of \"xy\" or \"ij\", "
                        r"but received: foo"),
        ErrorCase((), {"indexing": "ij"}, exc=RuntimeError,
                  match=r"\[meshgrid\] meshgrid expects a non-empty TensorList"),
    ]


def _meshgrid_default(t, x, y):
    """No indexing: PyTorch warns and uses 'ij'; ember must warn the same way."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = t.meshgrid(x, y)
    if t is not ember:  # torch warns once per process (TORCH_WARN_ONCE), so only ember is checked
        return out
    msgs = [str(m.message) for m in w if issubclass(m.category, UserWarning)]
    assert any("it will be required to pass the indexing argument" in m for m in msgs), msgs
    return out


# ---------------------------------------------------------------------------------- diagonals
def _diag_samples(dtype, rng):
    v = make((4,), dtype, rng)
    m = make((3, 5), dtype, rng)
    for k in (0, 1, -2, 7, -7):
        yield Sample((v,), {"diagonal": k}, desc=f"1-d diagonal={k}")
        yield Sample((m,), {"diagonal": k}, desc=f"2-d diagonal={k}")
    yield Sample((make((0,), dtype, rng),), desc="empty 1-d")
    yield Sample((make((0, 3), dtype, rng),), {"diagonal": 1}, desc="empty 2-d")
    yield Sample((make((4, 4), dtype, rng, noncontig=True),), {"diagonal": -1},
                 desc="noncontig 2-d", noncontig=True)
    yield Sample((make((3,), dtype, rng, noncontig=True),), desc="noncontig 1-d",
                 noncontig=True)


def _diag_errors():
    return [
        ErrorCase((_z(2, 2, 2),), exc=RuntimeError,
                  match=r"\[diag\] diag\(\): Supports 1D or 2D tensors. Got 3D"),
        ErrorCase((np.zeros((), F32),), exc=RuntimeError,
                  match=r"\[diag\] diag\(\): Supports 1D or 2D tensors. Got 0D"),
    ]


def _diag_embed_samples(dtype, rng):
    x = make((2, 3), dtype, rng)
    yield Sample((x,), desc="default")
    yield Sample((x,), {"offset": 1}, desc="offset 1")
    yield Sample((x,), {"offset": -2, "dim1": 0, "dim2": 2}, desc="dims 0, 2")
    yield Sample((x,), {"offset": 1, "dim1": -1, "dim2": 0}, desc="dims swapped")
    yield Sample((make((4,), dtype, rng),), {"offset": -1}, desc="1-d")
    yield Sample((make((2, 0), dtype, rng),), desc="empty")
    yield Sample((make((3, 2), dtype, rng, noncontig=True),), {"dim1": 1, "dim2": 2},
                 desc="noncontig", noncontig=True)


def _diag_embed_errors():
    return [
        ErrorCase((_z(2, 3),), {"offset": 1, "dim1": 0, "dim2": 0}, exc=RuntimeError,
                  match=r"\[diag_embed\] diagonal dimensions cannot be identical 0, 0"),
        ErrorCase((_z(2, 3),), {"dim1": 3}, exc=IndexError,
                  match=r"\[diag_embed\] Dimension out of range"),
    ]


def _trace_samples(dtype, rng):
    yield Sample((make((3, 3), dtype, rng),), desc="square")
    yield Sample((make((2, 5), dtype, rng),), desc="wide")
    yield Sample((make((5, 2), dtype, rng),), desc="tall")
    yield Sample((make((0, 3), dtype, rng),), desc="empty")
    yield Sample((make((4, 4), dtype, rng, noncontig=True),), desc="noncontig", noncontig=True)


def _trace_errors():
    return [
        ErrorCase((_z(3),), exc=RuntimeError,
                  match=r"\[trace\] trace: expected a matrix, but got tensor with dim 1"),
        ErrorCase((_z(2, 2, dtype=np.bool_),), exc=NotImplementedError,
                  match=r"\[trace\] \"trace\" not implemented for 'Bool'"),
    ]


# ---------------------------------------------------------------------------------- repeats
def _ri_samples(dtype, rng):
    x = make((2, 3), dtype, rng)
    yield Sample((x, 2), desc="int flattened")
    yield Sample((x, 3), {"dim": 1}, desc="int dim 1")
    yield Sample((x, 2), {"dim": -2}, desc="int dim -2")
    yield Sample((x, 0), {"dim": 0}, desc="zero repeats")
    yield Sample((x, np.array([1, 0, 2], I64)), {"dim": 1, "output_size": 3},
                 desc="output_size")
    yield Sample((x, np.array([1, 0, 2], I64)), {"dim": 1}, desc="tensor repeats")
    yield Sample((x, np.array([3, 1], np.int32)), {"dim": 0}, desc="int32 tensor repeats")
    yield Sample((x, np.array(2, I64)), {"dim": 1}, desc="0-d tensor repeats")
    yield Sample((x, np.array([2], I64)), {"dim": 1}, desc="1-element tensor repeats")
    yield Sample((x, np.array([1, 2, 0, 1, 1, 3], I64)), desc="tensor repeats flattened")
    yield Sample((make((), dtype, rng), 3), desc="0-d input")
    yield Sample((make((), dtype, rng), np.array([3], I64)), desc="0-d input tensor repeats")
    yield Sample((make((0, 2), dtype, rng), 2), {"dim": 0}, desc="empty")
    yield Sample((make((3, 2), dtype, rng, noncontig=True), np.array([2, 1, 1], I64)),
                 {"dim": 0}, desc="noncontig", noncontig=True)


def _ri_fn(t, x, repeats, **kw):
    return t.repeat_interleave(x, repeats, **kw)


def _ri_errors():
    x = _z(3)
    return [
        ErrorCase((x, np.array([1, 2], I64)), exc=RuntimeError,
                  match=r"\[repeat_interleave\] repeats must have the same size as input along "
                        r"dim, but got repeats.size\(0\) = 2 and input.size\(0\) = 3"),
        ErrorCase((x, -1), exc=RuntimeError,
                  match=r"\[repeat_interleave\] Repeats must be non-negative"),
        ErrorCase((x, np.array([1, -2, 1], I64)), exc=RuntimeError,
                  match=r"\[repeat_interleave\] repeats can not be negative"),
        ErrorCase((x, np.array([1.0, 2.0, 1.0], F32)), exc=NotImplementedError,
                  match=r"\"repeat_interleave_cpu\" not implemented for 'Float'"),
        ErrorCase((_z(2, 3), np.array([[1]], I64)), {"dim": 1}, exc=RuntimeError,
                  match=r"\[repeat_interleave\] repeats must be 0-dim or 1-dim tensor"),
        ErrorCase((_z(2, 3), 2), {"dim": 2}, exc=IndexError,
                  match=r"\[repeat_interleave\] Dimension out of range"),
        ErrorCase((x, np.array([1, 2, 1], I64)), {"output_size": 5}, exc=RuntimeError,
                  match=r"\[repeat_interleave\] allocated size does not match required size"),
        ErrorCase((np.zeros((), F32), 2), {"dim": 0}, exc=IndexError,
                  match=r"\[repeat_interleave\] Dimension specified as 0 but tensor has no"),
    ]


def _ri_counts_samples(dtype, rng):
    yield Sample((np.array([1, 2, 0, 3], np.dtype(dtype)),), desc="counts", grad=False)
    yield Sample((np.array([], np.dtype(dtype)),), desc="empty", grad=False)
    yield Sample((np.array([0, 0], np.dtype(dtype)),), desc="zeros", grad=False)


def _ri_counts_errors():
    return [
        ErrorCase((np.array([1.0, 2.0], F32),), exc=NotImplementedError,
                  match=r"\"repeat_interleave_cpu\" not implemented for 'Float'"),
        ErrorCase((np.array([[1, 2]], I64),), exc=RuntimeError,
                  match=r"\[repeat_interleave\] repeat_interleave only accept 1D vector"),
        ErrorCase((np.array([1, -2], I64),), exc=RuntimeError,
                  match=r"\[repeat_interleave\] repeats can not be negative"),
    ]


# ---------------------------------------------------------------------------------- rot90
def _rot90_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    for k in (0, 1, 2, 3, -1, 5, -6):
        yield Sample((x,), {"k": k}, desc=f"k={k}")
    yield Sample((x,), desc="default")
    yield Sample((x,), {"k": 1, "dims": (1, 0)}, desc="dims reversed")
    y = make((2, 3, 4), dtype, rng)
    yield Sample((y,), {"k": -1, "dims": (2, 0)}, desc="3-d dims (2, 0)")
    yield Sample((y,), {"k": 3, "dims": (-1, -2)}, desc="3-d negative dims")
    yield Sample((make((0, 3), dtype, rng),), desc="empty")
    yield Sample((make((3, 2), dtype, rng, noncontig=True),), {"k": 1}, desc="noncontig",
                 noncontig=True)


def _rot90_errors():
    return [
        ErrorCase((_z(2, 3),), {"dims": (0, 0)}, exc=RuntimeError,
                  match=r"\[rot90\] expected rotation dims to be different, but got dim0 = 0 "
                        r"and dim1 = 0"),
        ErrorCase((_z(2, 3),), {"dims": (0, -2)}, exc=RuntimeError,
                  match=r"\[rot90\] expected rotation dims to be different"),
        ErrorCase((_z(2),), exc=RuntimeError,
                  match=r"\[rot90\] expected total dims >= 2, but got total dims = 1"),
        ErrorCase((_z(2, 3),), {"dims": (0, 1, 2)}, exc=RuntimeError,
                  match=r"\[rot90\] expected total rotation dims == 2, but got dims = 3"),
        ErrorCase((_z(2, 3),), {"dims": (0, 5)}, exc=IndexError,
                  match=r"\[rot90\] Dimension out of range"),
    ]


# ---------------------------------------------------------------------------------- diff
def _diff_samples(dtype, rng):
    x = make((3, 5), dtype, rng)
    yield Sample((x,), desc="default")
    yield Sample((x,), {"n": 2}, desc="n=2")
    yield Sample((x,), {"n": 1, "dim": 0}, desc="dim 0")
    yield Sample((x,), {"n": 0}, desc="n=0")
    yield Sample((x,), {"n": 5}, desc="n = size")
    yield Sample((x,), {"n": 7, "dim": 0}, desc="n > size")
    yield Sample((make((6,), dtype, rng),), {"n": 3}, desc="1-d n=3")
    yield Sample((make((0, 2), dtype, rng),), {"dim": 0}, desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), desc="noncontig",
                 noncontig=True)


def _diff_pa_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, make((3, 2), dtype, rng), make((3, 1), dtype, rng)), desc="both")
    yield Sample((x, make((1, 4), dtype, rng), None), {"dim": 0, "n": 2}, desc="prepend dim 0")
    yield Sample((x, None, make((3, 3), dtype, rng)), {"n": 3}, desc="append")


def _diff_pa_fn(t, x, prepend, append, **kw):
    return t.diff(x, prepend=prepend, append=append, **kw)


def _diff_promote_samples(dtype, rng):
    x = make((4,), dtype, rng)
    yield Sample((x, make((2,), "float32", rng), None), desc="float32 prepend")
    yield Sample((x, None, make((1,), "int64", rng)), desc="int64 append")


def _diff_errors():
    return [
        ErrorCase((np.zeros((), F32),), exc=RuntimeError,
                  match=r"\[diff\] diff expects input to be at least one-dimensional"),
        ErrorCase((_z(3),), {"n": -1}, exc=RuntimeError,
                  match=r"\[diff\] order must be non-negative but got -1"),
        ErrorCase((_z(3, 2),), {"prepend": ember.zeros(2)}, exc=RuntimeError,
                  match=r"\[diff\] diff expects prepend or append to be the same dimension"),
        ErrorCase((_z(3, 2),), {"append": 2.0}, exc=TypeError,
                  match=r"\[diff\] diff\(\): argument 'append' must be Tensor, not float"),
        ErrorCase((_z(3, 2),), {"dim": 2}, exc=IndexError, match=r"\[diff\] Dimension out"),
    ]


# ---------------------------------------------------------------------------------- kron
def _kron_samples(dtype, rng):
    yield Sample((make((2, 3), dtype, rng), make((4, 1), dtype, rng)), desc="2-d x 2-d")
    yield Sample((make((2,), dtype, rng), make((3,), dtype, rng)), desc="1-d x 1-d")
    yield Sample((make((2,), dtype, rng), make((2, 3), dtype, rng)), desc="1-d x 2-d")
    yield Sample((make((2, 1, 2), dtype, rng), make((3, 2), dtype, rng)), desc="3-d x 2-d")
    yield Sample((make((), dtype, rng), make((2, 3), dtype, rng)), desc="0-d x 2-d")
    yield Sample((make((), dtype, rng), make((), dtype, rng)), desc="0-d x 0-d")
    yield Sample((make((0, 2), dtype, rng), make((2, 2), dtype, rng)), desc="empty")
    yield Sample((make((2, 2), dtype, rng, noncontig=True), make((2, 3), dtype, rng)),
                 desc="noncontig", noncontig=True)


def _kron_promote_samples(dtype, rng):
    yield Sample((make((2,), dtype, rng), make((2, 3), "float32", rng)), desc="x float32")
    yield Sample((make((2, 2), dtype, rng), make((2,), "int8", rng)), desc="x int8")


def _double_backward(op):
    """The first gradient of ``sum(op(x) ** 2)`` taken with ``create_graph``: its own gradient
    (checked by test_grads) exercises the double backward of ``op``."""
    def fn(t, x, *args, **kw):
        y = x if x.requires_grad else x.detach().requires_grad_(True)
        (g,) = t.autograd.grad((op(t, y, *args, **kw) ** 2).sum(), y, create_graph=True)
        return g
    return fn


def _double_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng),), {"diagonal": -1}, desc="2-d")
    yield Sample((make((2, 3, 3), dtype, rng),), {"diagonal": 1}, desc="batched")


OPINFOS = [
    OpInfo("tril", lambda t, x, **kw: t.tril(x, **kw), _tri_samples, dtypes=ALL,
           errors=_tri_errors("tril")),
    OpInfo("triu", lambda t, x, **kw: t.triu(x, **kw), _tri_samples, dtypes=ALL,
           errors=_tri_errors("triu")),
    OpInfo("tril_method", lambda t, x, **kw: x.tril(**kw), _tri_samples,
           dtypes=("float32", "int64")),
    OpInfo("triu_method", lambda t, x, **kw: x.triu(**kw), _tri_samples,
           dtypes=("float32", "bool")),
    OpInfo("tril_", _tri_inplace("tril_"), _tri_samples, dtypes=ALL),
    OpInfo("triu_", _tri_inplace("triu_"), _tri_samples, dtypes=ALL),
    OpInfo("tril_double_backward", _double_backward(lambda t, x, **kw: t.tril(x, **kw)),
           _double_samples, dtypes=("float32", "float64")),
    OpInfo("triu_double_backward", _double_backward(lambda t, x, **kw: t.triu(x, **kw)),
           _double_samples, dtypes=("float32", "float64")),
    OpInfo("tril_indices", _tri_indices_fn("tril_indices"), _tri_indices_samples,
           dtypes=("int64",), grad=False, errors=_tri_indices_errors("tril_indices")),
    OpInfo("triu_indices", _tri_indices_fn("triu_indices"), _tri_indices_samples,
           dtypes=("int64",), grad=False, errors=_tri_indices_errors("triu_indices")),
    OpInfo("tril_indices_dtype", _tri_indices_fn("tril_indices"), _tri_indices_dtype_samples,
           dtypes=("int64",), grad=False),
    OpInfo("triu_indices_dtype", _tri_indices_fn("triu_indices"), _tri_indices_dtype_samples,
           dtypes=("int64",), grad=False),
    OpInfo("broadcast_to", lambda t, x, size: t.broadcast_to(x, size), _broadcast_to_samples,
           dtypes=ALL, errors=_broadcast_to_errors),
    OpInfo("broadcast_to_method", lambda t, x, size: x.broadcast_to(size),
           _broadcast_to_samples, dtypes=("float32", "int64")),
    OpInfo("broadcast_tensors", lambda t, *xs: t.broadcast_tensors(*xs),
           _broadcast_tensors_samples, dtypes=ALL, errors=_broadcast_tensors_errors),
    OpInfo("broadcast_shapes", lambda t, *s: t.broadcast_shapes(*s), _shapes_samples,
           dtypes=("float32",), grad=False, compare=_compare_size, errors=_shapes_errors),
    OpInfo("meshgrid", lambda t, *xs, **kw: t.meshgrid(*xs, **kw), _meshgrid_samples,
           dtypes=ALL, errors=_meshgrid_errors),
    OpInfo("meshgrid_list", lambda t, *xs, **kw: t.meshgrid(list(xs), **kw), _meshgrid_samples,
           dtypes=("float32", "int64")),
    OpInfo("meshgrid_default", _meshgrid_default,
           lambda d, r: [Sample((make((2,), d, r), make((3,), d, r)))], dtypes=("float32",)),
    OpInfo("diag", lambda t, x, **kw: t.diag(x, **kw), _diag_samples, dtypes=ALL,
           errors=_diag_errors),
    OpInfo("diag_method", lambda t, x, **kw: x.diag(**kw), _diag_samples,
           dtypes=("float32", "bool")),
    OpInfo("diag_embed", lambda t, x, **kw: t.diag_embed(x, **kw), _diag_embed_samples,
           dtypes=ALL, errors=_diag_embed_errors),
    OpInfo("trace", lambda t, x: t.trace(x), _trace_samples, dtypes=NUMERIC,
           errors=_trace_errors),
    OpInfo("trace_method", lambda t, x: x.trace(), _trace_samples, dtypes=("float32", "int8")),
    OpInfo("repeat_interleave", _ri_fn, _ri_samples, dtypes=ALL, errors=_ri_errors),
    OpInfo("repeat_interleave_method", lambda t, x, r, **kw: x.repeat_interleave(r, **kw),
           _ri_samples, dtypes=("float32", "bool")),
    OpInfo("repeat_interleave_counts", lambda t, r: t.repeat_interleave(r),
           _ri_counts_samples, dtypes=("int32", "int64"), grad=False, errors=_ri_counts_errors),
    OpInfo("rot90", lambda t, x, **kw: t.rot90(x, **kw), _rot90_samples, dtypes=ALL,
           errors=_rot90_errors),
    OpInfo("rot90_method", lambda t, x, **kw: x.rot90(**kw), _rot90_samples,
           dtypes=("float32",)),
    OpInfo("diff", lambda t, x, **kw: t.diff(x, **kw), _diff_samples, dtypes=ALL,
           errors=_diff_errors),
    OpInfo("diff_prepend_append", _diff_pa_fn, _diff_pa_samples, dtypes=ALL),
    OpInfo("diff_promote", _diff_pa_fn, _diff_promote_samples, dtypes=ALL, grad=False),
    OpInfo("diff_method", lambda t, x, **kw: x.diff(**kw), _diff_samples,
           dtypes=("float32", "uint8")),
    OpInfo("kron", lambda t, a, b: t.kron(a, b), _kron_samples, dtypes=ALL),
    OpInfo("kron_method", lambda t, a, b: a.kron(b), _kron_samples, dtypes=("float32",)),
    OpInfo("kron_double_backward", _double_backward(lambda t, a, b: t.kron(a, b)),
           lambda d, r: [Sample((make((2, 3), d, r), make((2, 2), d, r)))],
           dtypes=("float32", "float64")),
    OpInfo("repeat_interleave_double_backward",
           _double_backward(lambda t, x, r, **kw: t.repeat_interleave(x, r, **kw)),
           lambda d, r: [Sample((make((2, 3), d, r), np.array([2, 0, 1], I64)), {"dim": 1})],
           dtypes=("float32", "float64")),
    OpInfo("kron_promote", lambda t, a, b: t.kron(a, b), _kron_promote_samples, dtypes=ALL,
           grad=False),
]
