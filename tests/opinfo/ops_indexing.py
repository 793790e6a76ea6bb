"""OpInfo entries for indexing: getitem/setitem, gather/scatter, index_*, masks, nonzero."""

from __future__ import annotations

import numpy as np

import ember
from tests.opinfo.core import ALL, FLOATS, INTS, ErrorCase, OpInfo, Sample, make

I64 = np.int64


def conv_index(lib, idx):
    """NumPy arrays inside an index expression become ``lib`` tensors."""
    if isinstance(idx, np.ndarray):
        return lib.from_numpy(idx.copy())
    if isinstance(idx, tuple):
        return tuple(conv_index(lib, i) for i in idx)
    return idx


def _a(*v, dtype=I64):
    return np.array(v, dtype=dtype)


# index expressions on a (2, 3, 4) tensor: (description, index, has float-grad sense)
GETITEM_INDICES = [
    ("int", 1),
    ("negative int", -1),
    ("tuple of ints", (1, 2)),
    ("all ints (0-d view)", (1, 2, 3)),
    ("slice", slice(0, 1)),
    ("slice with step", (slice(None), slice(0, 3, 2))),
    ("slice step 3 out of range stop", (slice(None), slice(None), slice(1, 10, 3))),
    ("negative slice bounds", (slice(-1, None), slice(-2, -1))),
    ("empty slice", slice(2, 1)),
    ("ellipsis", (Ellipsis, 1)),
    ("ellipsis middle", (0, Ellipsis, 2)),
    ("None", (None, 1)),
    ("None and ellipsis", (None, Ellipsis, None)),
    ("two ellipses", (0, Ellipsis, 1, Ellipsis)),
    ("int list", [1, 0, 1]),
    ("int array dup", _a(0, 0, 1)),
    ("negative array", _a(-1, -2)),
    ("2-d int array", _a([0, 1], [1, 1])),
    ("empty int array", np.zeros(0, I64)),
    ("int32 array", _a(1, 0, dtype=np.int32)),
    ("two arrays adjacent", (slice(None), _a(0, 2, 2), _a(1, 3, 3))),
    ("arrays separated by slice", (_a(0, 1), slice(None), _a(1, 2))),
    ("arrays broadcast", (_a([0], [1]), _a(0, 1, 2))),
    ("int then array (select first)", (0, slice(None), _a(1, 2))),
    ("array, int, array", (_a(0, 1), 1, _a(1, 2))),
    ("array, None, array", (_a(0, 1), None, _a(1, 2))),
    ("0-d int tensor", np.array(1, I64)),
    ("0-d tensor mixed", (np.array(1, I64), slice(None), _a(0, 1))),
    ("bool mask 1-d", _a(True, False, dtype=np.bool_)),
    ("bool mask 2-d", _a([True, False, True], [False, False, True], dtype=np.bool_)),
    ("bool mask after slice", (slice(None), _a(True, False, True, dtype=np.bool_))),
    ("bool mask all False", (slice(None), np.zeros(3, np.bool_))),
    ("mask and array", (_a(True, True, dtype=np.bool_), slice(None), _a(1, 2))),
    ("python True", True),
    ("python False", (False, 1)),
    ("0-d bool tensor", np.array(True)),
    ("list of lists as tuple", [[0, 1], [1, 0]]),
]


def _getitem_samples(dtype, rng):
    x = make((2, 3, 4), dtype, rng)
    for desc, idx in GETITEM_INDICES:
        yield Sample((x, idx), desc=desc)
    yield Sample((make((2, 3, 4), dtype, rng, noncontig=True), (1, slice(None, None, 2))),
                 desc="non-contiguous basic", noncontig=True)
    yield Sample((make((2, 3, 4), dtype, rng, noncontig=True), (_a(1, 0, 1), slice(1, 3))),
                 desc="non-contiguous advanced", noncontig=True)
    yield Sample((make((), dtype, rng), Ellipsis), desc="0-d ellipsis")
    yield Sample((make((), dtype, rng), None), desc="0-d None")
    yield Sample((make((), dtype, rng), np.array(True)), desc="0-d bool mask")
    yield Sample((make((0, 3), dtype, rng), (slice(None), 1)), desc="empty input")
    yield Sample((make((0, 3), dtype, rng), _a(0, 2)[None, :].repeat(0, 0)), desc="empty rows")


def _getitem_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, 5), exc=IndexError,
                  match=r"index 5 is out of bounds for dimension 0 with size 3"),
        ErrorCase((x, (0, -5)), exc=IndexError,
                  match=r"index -5 is out of bounds for dimension 1 with size 4"),
        ErrorCase((x, _a(0, 3)), exc=IndexError,
                  match=r"index 3 is out of bounds for dimension 0 with size 3"),
        ErrorCase((x, (0, 0, 0)), exc=IndexError, match=r"too many indices for tensor of dim"),
        ErrorCase((np.zeros((), np.float32), 0), exc=IndexError,
                  match=r"invalid index of a 0-dim tensor"),
        ErrorCase((x, 1.0), exc=IndexError, match=r"only integers, slices.*\(got float\)"),
        ErrorCase((x, np.array([1.0])), exc=IndexError,
                  match=r"tensors used as indices must be long, int, byte or bool tensors"),
        ErrorCase((x, np.array([1], np.int16)), exc=IndexError,
                  match=r"tensors used as indices must be"),
        ErrorCase((x, slice(None, None, -1)), exc=ValueError,
                  match=r"step must be greater than zero"),
        ErrorCase((x, slice(None, None, 0)), exc=ValueError, match=r"slice step cannot be zero"),
        ErrorCase((x, np.array([True, False])), exc=IndexError,
                  match=r"The shape of the mask \[2\] at index 0 does not match the shape of "
                        r"the indexed tensor \[3, 4\] at index 0"),
        ErrorCase((x, (_a(0, 1), _a(0, 1, 2))), exc=IndexError,
                  match=r"shape mismatch: indexing tensors could not be broadcast together with "
                        r"shapes \[2\], \[3\]"),
        ErrorCase((x, (Ellipsis, Ellipsis, 0)), exc=IndexError, match=r"too many indices"),
    ]


def _setitem(t, x, idx, value):
    y = x.clone()
    y[conv_index(t, idx)] = value
    return y


def _setitem_view(t, x, idx, value):
    """Writes through a non-leaf's basic view: the value and the base both get grads."""
    y = x * 1
    v = y[idx[0]]
    v[conv_index(t, idx[1])] = value
    return y


SETITEM_CASES = [
    ("int, tensor value", 1, (4,)),
    ("int, broadcast row", 0, (1, 4)),
    ("slice step", (slice(None), slice(0, 4, 2)), (3, 1)),
    ("ellipsis", (Ellipsis, 1), (3,)),
    ("0-d value", (slice(1, 3), 2), ()),
    ("None", (None, 0), (4,)),
    ("leading ones stripped", 0, (1, 1, 4)),
    ("int list", [0, 2], (2, 4)),
    ("dup list (last wins)", _a(2, 0), (1, 4)),
    ("two arrays", (_a(0, 1, 2), _a(3, 2, 1)), (3,)),
    ("array after slice", (slice(1, None), _a(0, 1)), (2, 1)),
    ("int then array", (0, _a(0, 1)), (2,)),
    ("bool mask", _a(True, False, True, dtype=np.bool_), (4,)),
    ("2-d bool mask", _a([True, False, True, False], [False] * 4, [True] * 4,
                         dtype=np.bool_), ()),
    ("0-d int tensor", np.array(1), (4,)),
]


def _setitem_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    for desc, idx, vshape in SETITEM_CASES:
        yield Sample((x, idx, make(vshape, dtype, rng)), desc=desc)
    yield Sample((x, (1, 2), 2), desc="python int value", grad=False)
    yield Sample((make((3, 4), dtype, rng, noncontig=True), _a(0, 2), make((4,), dtype, rng)),
                 desc="non-contiguous target", noncontig=True)
    yield Sample((x, _a(True, True, False, dtype=np.bool_), 1), desc="mask scalar", grad=False)
    if dtype in FLOATS:
        yield Sample((x, 0, 2.5), desc="python float value", grad=False)


def _setitem_cast_samples(dtype, rng):
    """A basic target casts the value to its dtype (advanced targets require equal dtypes)."""
    x = make((3, 4), dtype, rng)
    for other in ("float32", "int64", "bool", "float64"):
        yield Sample((x, 1, make((4,), other, rng)), desc=f"value {other}", grad=False)
    yield Sample((x, (slice(None), 1), 2.7), desc="float scalar", grad=False)
    yield Sample((x, _a(0, 1), 2.7), desc="float scalar, advanced", grad=False)


def _setitem_view_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, (1, 2), make((), dtype, rng)), desc="y[1][2] = v")
    yield Sample((x, (slice(0, 2), (slice(None), _a(0, 3))), make((2, 2), dtype, rng)),
                 desc="y[:2][:, [0, 3]]")
    yield Sample((x, (0, slice(None)), make((4,), dtype, rng)), desc="y[0][:] = v")


def _setitem_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, 5, 1.0), exc=IndexError, match=r"index 5 is out of bounds for dimension 0"),
        ErrorCase((x, _a(5), 1.0), exc=IndexError,
                  match=r"index 5 is out of bounds for dimension 0 with size 3"),
        ErrorCase((x, 0, np.zeros(2, np.float32)), exc=RuntimeError,
                  match=r"The expanded size of the tensor \(4\) must match the existing size "
                        r"\(2\)"),
        ErrorCase((x, _a(0, 1), np.zeros((2, 4), np.float64)), exc=RuntimeError,
                  match=r"Index put requires the source and destination dtypes match, got "
                        r"Float for the destination and Double for the source"),
        ErrorCase((x, _a(True, False, True, dtype=np.bool_), np.zeros(3, np.float32)),
                  exc=RuntimeError, match=r"shape mismatch: value tensor of shape \[3\] cannot "
                                          r"be broadcast to indexing result of shape \[2, 4\]"),
    ]


# ---------------------------------------------------------------------------- gather/scatter
def _perm_index(rng, shape, dim, n):
    """An index of ``shape`` with distinct values < n along ``dim`` (deterministic scatter)."""
    keys = rng.random(tuple(n if d == dim else s for d, s in enumerate(shape)))
    perm = np.argsort(keys, axis=dim)
    return np.take(perm, np.arange(shape[dim]), axis=dim).astype(I64)


def _gather_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, 1, rng.integers(0, 4, (3, 5))), desc="dim 1, dup")
    yield Sample((x, 0, rng.integers(0, 3, (2, 4))), desc="dim 0, index smaller")
    yield Sample((x, -1, rng.integers(0, 4, (2, 2)).astype(np.int32)), desc="int32 index")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), 0, rng.integers(0, 3, (3, 3))),
                 desc="non-contiguous", noncontig=True)
    yield Sample((make((), dtype, rng), 0, np.array(0, I64)), desc="0-d")
    yield Sample((make((), dtype, rng), 0, _a(0, 0)), desc="0-d input, 1-d index")
    yield Sample((x, 1, np.zeros((3, 0), I64)), desc="empty index")
    yield Sample((make((2, 3, 4), dtype, rng), 1, rng.integers(0, 3, (2, 5, 4))), desc="3-d")


def _gather_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, 1, _a([5])), exc=RuntimeError,
                  match=r"index 5 is out of bounds for dimension 1 with size 4"),
        ErrorCase((x, 1, _a(0, 1)), exc=RuntimeError,
                  match=r"Index tensor must have the same number of dimensions as input"),
        ErrorCase((x, 1, np.zeros((4, 5), I64)), exc=RuntimeError,
                  match=r"Size does not match at dimension 0 expected index \[4, 5\] to be no "
                        r"larger than self \[3, 4\] apart from dimension 1"),
        ErrorCase((x, 1, np.zeros((3, 4), np.float32)), exc=RuntimeError,
                  match=r"gather\(\): Expected dtype int32/int64 for index"),
        ErrorCase((x, 2, np.zeros((3, 4), I64)), exc=IndexError,
                  match=r"Dimension out of range"),
    ]


def _scatter_samples(dtype, rng):
    x = make((3, 5), dtype, rng)
    yield Sample((x, 1, _perm_index(rng, (3, 3), 1, 5), make((3, 3), dtype, rng)),
                 desc="dim 1")
    # PyTorch's ScatterBackward0 cannot give src a grad when src is larger than index
    yield Sample((x, 0, _perm_index(rng, (2, 5), 0, 3), make((3, 5), dtype, rng)),
                 desc="dim 0, src larger than index", grad=False)
    yield Sample((make((3, 5), dtype, rng, noncontig=True), -1,
                  _perm_index(rng, (3, 2), 1, 5), make((3, 2), dtype, rng, noncontig=True)),
                 desc="negative dim, non-contiguous", noncontig=True)
    yield Sample((make((), dtype, rng), 0, np.array(0, I64), make((), dtype, rng)), desc="0-d")
    yield Sample((x, 1, np.zeros((3, 0), I64), make((3, 0), dtype, rng)), desc="empty index")


def _scatter_value_samples(dtype, rng):
    x = make((3, 5), dtype, rng)
    yield Sample((x, 1, rng.integers(0, 5, (3, 3)), 2), desc="int value (dups ok)")
    if dtype in FLOATS:
        yield Sample((x, 0, rng.integers(0, 3, (2, 5)), -1.5), desc="float value")
    yield Sample((make((), dtype, rng), 0, np.array(0, I64), 1), desc="0-d")


def _scatter_add_samples(dtype, rng):
    x = make((3, 5), dtype, rng)
    yield Sample((x, 1, rng.integers(0, 5, (3, 6)), make((3, 6), dtype, rng)),
                 desc="duplicates accumulate")
    # PyTorch's ScatterAddBackward0 cannot give src a grad when src is larger than index
    yield Sample((x, 0, rng.integers(0, 3, (2, 4)), make((3, 5), dtype, rng)),
                 desc="src larger", grad=False)
    yield Sample((make((3, 5), dtype, rng, noncontig=True), 0, rng.integers(0, 3, (4, 5)),
                  make((4, 5), dtype, rng, noncontig=True)), desc="non-contiguous",
                 noncontig=True)
    yield Sample((make((), dtype, rng), 0, np.array(0, I64), make((), dtype, rng)), desc="0-d")
    yield Sample((x, 1, np.zeros((3, 0), I64), make((3, 0), dtype, rng)), desc="empty index")


def _scatter_reduce_samples(reduce, include_self):
    def gen(dtype, rng):
        low, high = (0.5, 2.0) if reduce == "prod" else (-3, 3)
        x = make((3, 5), dtype, rng, low, high)
        grad = reduce in ("sum", "mean", "prod") or hasattr(ember.Tensor, "eq")
        if dtype in FLOATS and reduce in ("amax", "amin"):
            # distinct values: the grad of ties splits evenly, fine but not what we test here
            base = rng.permutation(40).astype(np.float64).reshape(8, 5)[:3] / 8
            x = base.astype(x.dtype)
        src = make((3, 6), dtype, rng, low, high)
        if dtype in FLOATS and reduce in ("amax", "amin"):
            src = (rng.permutation(40)[:18].reshape(3, 6) / 8 + 0.01).astype(x.dtype)
        yield Sample((x, 1, rng.integers(0, 5, (3, 6)), src), desc="dups", grad=grad)
        yield Sample((x, 0, rng.integers(0, 3, (2, 5)), make((2, 5), dtype, rng, low, high)),
                     desc="dim 0", grad=grad)
        yield Sample((make((), dtype, rng, low, high), 0, np.array(0, I64),
                      make((), dtype, rng, low, high)), desc="0-d", grad=grad)
    return gen


def _scatter_reduce_errors():
    return [
        ErrorCase((np.zeros(3, np.bool_), 0, _a(0), np.ones(1, np.bool_)), {"r": "mean"},
                  exc=NotImplementedError, match=r"not implemented for 'Bool'"),
        ErrorCase((np.zeros((3, 4), np.float32), 1, _a([0]), np.zeros((1, 1), np.float32)),
                  {"r": "foo"}, exc=RuntimeError,
                  match=r"reduce argument must be either sum, prod, mean, amax or amin, got foo"),
    ]


def _scatter_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, 1, _a([0]), np.zeros((1, 1), np.float32)), {"reduce": "mean"},
                  exc=RuntimeError, match=r"reduce argument must be either add or multiply"),
        ErrorCase((x, 1, _a([7]), np.zeros((1, 1), np.float32)), exc=RuntimeError,
                  match=r"index 7 is out of bounds for dimension 1 with size 4"),
        ErrorCase((x, 1, _a([0]), np.zeros((1, 1), np.float64)), exc=RuntimeError,
                  match=r"Expected self.dtype to be equal to src.dtype"),
        ErrorCase((x, 1, np.zeros((2, 2), I64), np.zeros((1, 1), np.float32)),
                  exc=RuntimeError, match=r"to be no larger size than src \[1, 1\]"),
        ErrorCase((x, 1, np.zeros((1, 1), I64), np.zeros((), np.float32)), exc=RuntimeError,
                  match=r"Index tensor must have the same number of dimensions as src tensor"),
    ]


# ---------------------------------------------------------------------------- index_*
def _index_select_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, 0, _a(2, 0, 2)), desc="dim 0, dup")
    yield Sample((x, -1, _a(3, 1, dtype=np.int32)), desc="dim -1 int32")
    yield Sample((x, 0, np.array(1, I64)), desc="0-d index")
    yield Sample((x, 1, np.zeros(0, I64)), desc="empty index")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), 1, _a(3, 0)), desc="non-contiguous",
                 noncontig=True)
    yield Sample((make((), dtype, rng), 0, _a(0)), desc="0-d input")


def _index_select_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, 0, _a(3)), exc=IndexError, match=r"index out of range in self"),
        ErrorCase((x, 0, _a([0, 1])), exc=IndexError, match=r"Index is supposed to be a vector"),
        ErrorCase((x, 0, np.array([0.0])), exc=RuntimeError,
                  match=r"Expected dtype int32 or int64 for index"),
    ]


def _index_add_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, 0, _a(0, 2, 0), make((3, 4), dtype, rng)), desc="dim 0 dup accumulates")
    yield Sample((x, 1, _a(3, 1), make((3, 2), dtype, rng)), desc="dim 1")
    yield Sample((x, 1, np.zeros(0, I64), make((3, 0), dtype, rng)), desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), 0, _a(1),
                  make((1, 4), dtype, rng, noncontig=True)), desc="non-contiguous",
                 noncontig=True)
    yield Sample((make((), dtype, rng), 0, np.array(0, I64), make((), dtype, rng)), desc="0-d")


def _index_copy_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, 0, _a(2, 0), make((2, 4), dtype, rng)), desc="dim 0")
    yield Sample((x, 1, _a(3, 1), make((3, 2), dtype, rng)), desc="dim 1")
    yield Sample((make((), dtype, rng), 0, _a(0), make((1,), dtype, rng)), desc="0-d")


def _index_fill_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, 0, _a(2, 0, 2), 1), desc="int value, dup index")
    yield Sample((x, 1, _a(3), make((), dtype, rng)), desc="0-d tensor value")
    yield Sample((x, 1, _a(-1, 0), make((), dtype, rng)), desc="negative index", grad=False)
    yield Sample((x, 1, np.zeros(0, I64), 0), desc="empty")
    yield Sample((make((), dtype, rng), 0, np.array(0, I64), 1), desc="0-d")
    if dtype in FLOATS:
        yield Sample((x, 0, _a(1), -2.5), desc="float value")


def _index_put_samples(accumulate):
    def gen(dtype, rng):
        x = make((3, 4), dtype, rng)
        yield Sample((x, (_a(0, 2),), make((2, 4), dtype, rng)), {"accumulate": accumulate},
                     desc="one index")
        yield Sample((x, (_a(0, 0, 1), _a(1, 1, 3)), make((3,), dtype, rng)),
                     {"accumulate": accumulate}, desc="dup pairs", grad=accumulate)
        yield Sample((x, (_a(-1, 0),), make((), dtype, rng)), {"accumulate": accumulate},
                     desc="broadcast 0-d value")
        yield Sample((x, (_a([True, False, True, False], [False] * 4, [True] * 4,
                             dtype=np.bool_),), make((6,), dtype, rng)),
                     {"accumulate": accumulate}, desc="bool mask")
        yield Sample((make((3, 4), dtype, rng, noncontig=True), (_a(1), _a(2)),
                      make((1,), dtype, rng)), {"accumulate": accumulate}, desc="noncontig",
                     noncontig=True)
    return gen


def _index_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, 0, _a(0, 5), np.zeros((2, 4), np.float32)), exc=RuntimeError,
                  match=r"index 5 is out of bounds for dimension 0 with size 3"),
        ErrorCase((x, 0, _a(0), np.zeros((1, 4), np.float64)), exc=RuntimeError,
                  match=r"self \(Float\) and source \(Double\) must have the same scalar type"),
        ErrorCase((x, 0, _a(0, 0), np.zeros((2, 3), np.float32)), exc=RuntimeError,
                  match=r"source tensor shape must match self tensor shape"),
        ErrorCase((x, 0, _a([0]), np.zeros((1, 4), np.float32)), exc=IndexError,
                  match=r"index_add_\(\): Index is supposed to be a vector, but got dim: 2"),
        ErrorCase((x, 1, _a(-1), np.zeros((3, 1), np.float32)), exc=RuntimeError,
                  match=r"index -1 is out of bounds for dimension 1 with size 4"),
    ]


# ---------------------------------------------------------------------------- masks
def _mask(shape, rng):
    return rng.random(shape) < 0.5


def _masked_fill_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, _mask((3, 4), rng), 2), desc="int value")
    yield Sample((x, _mask((4,), rng), make((), dtype, rng)), desc="0-d tensor value, bcast")
    yield Sample((x, _mask((2, 3, 4), rng), 1), desc="mask broadcasts input")
    yield Sample((x, _mask((3, 4), rng), make((), "float64", rng, 0, 3)), desc="0-d float64 value",
                 grad=False)
    yield Sample((make((3, 4), dtype, rng, noncontig=True), _mask((3, 1), rng), 0),
                 desc="non-contiguous", noncontig=True)
    yield Sample((make((), dtype, rng), np.array(True), 3), desc="0-d")
    yield Sample((make((0, 4), dtype, rng), _mask((0, 4), rng), 3), desc="empty")
    if dtype in FLOATS:
        yield Sample((x, _mask((3, 4), rng), -1.5), desc="float value")
    if dtype in INTS:
        yield Sample((x, _mask((3, 4), rng), 2.7), desc="float value truncates")


def _masked_fill_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, np.ones(4, I64), 1), exc=RuntimeError,
                  match=r"masked_fill_ only supports boolean masks, but got mask with dtype "
                        r"long int"),
        ErrorCase((x, np.ones(4, np.bool_), np.zeros(1, np.float32)), exc=RuntimeError,
                  match=r"only supports a 0-dimensional value tensor, but got tensor with 1 "
                        r"dimension\(s\)"),
        ErrorCase((np.zeros(3, np.uint8), np.ones(3, np.bool_), 300), exc=RuntimeError,
                  match=r"value cannot be converted to type uint8_t without overflow"),
        ErrorCase((np.zeros(3, np.uint8), np.ones(3, np.bool_), -1.5), exc=RuntimeError,
                  match=r"value cannot be converted to type uint8_t without overflow"),
        ErrorCase((np.zeros(3, np.float16), np.ones(3, np.bool_), 1e6), exc=RuntimeError,
                  match=r"value cannot be converted to type c10::Half without overflow"),
    ]


def _masked_select_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, _mask((3, 4), rng)), desc="same shape")
    yield Sample((x, _mask((4,), rng)), desc="broadcast mask")
    yield Sample((make((4,), dtype, rng), _mask((3, 4), rng)), desc="broadcast input")
    yield Sample((x, np.zeros((3, 4), np.bool_)), desc="none selected")
    yield Sample((make((), dtype, rng), np.array(True)), desc="0-d")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), _mask((3, 4), rng)),
                 desc="non-contiguous", noncontig=True)


def _masked_scatter_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, _mask((3, 4), rng), make((12,), dtype, rng)), desc="1-d source")
    yield Sample((x, _mask((4,), rng), make((4, 5), dtype, rng)), desc="broadcast, 2-d source")
    yield Sample((make((), dtype, rng), np.array(True), make((2,), dtype, rng)), desc="0-d")


def _nonzero_samples(dtype, rng):
    for shape in [(), (0,), (5,), (3, 4), (2, 3, 4)]:
        yield Sample((make(shape, dtype, rng, -1, 1),), desc=f"{shape}")
    yield Sample((make((3, 4), dtype, rng, -1, 1, noncontig=True),), desc="non-contiguous",
                 noncontig=True)
    yield Sample((np.zeros((2, 2), ember.dtypes.by_name(dtype).np),), desc="all zero")


def _take_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, _a([0, 11], [-1, 5])), desc="2-d index, negative")
    yield Sample((x, _a(3, 3, 3)), desc="duplicates")
    yield Sample((make((), dtype, rng), _a(0, 0)), desc="0-d input")
    yield Sample((x, np.zeros(0, I64)), desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), _a(1, 7)), desc="non-contiguous",
                 noncontig=True)


def _take_along_dim_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x, rng.integers(0, 4, (3, 2))), {"dim": 1}, desc="dim 1")
    yield Sample((x, rng.integers(-3, 3, (2, 1))), {"dim": 0}, desc="broadcast indices")
    yield Sample((x, rng.integers(0, 4, (1, 5))), {"dim": 1}, desc="broadcast input rows")
    yield Sample((x, rng.integers(0, 12, (5,))), {}, desc="dim None")


def _take_along_dim_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, np.zeros((3, 1), np.int32)), {"dim": 1}, exc=RuntimeError,
                  match=r"dtype of indices should be Long but got Int"),
        ErrorCase((x, np.zeros((1, 1, 1), I64)), {"dim": 0}, exc=RuntimeError,
                  match=r"input and indices should have the same number of dimensions"),
        ErrorCase((x, np.zeros((1, 2), I64)), {"dim": 0}, exc=RuntimeError,
                  match=r"The size of tensor a \(4\) must match the size of tensor b \(2\)"),
    ]


def _index_copy_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, 0, _a(0, dtype=np.int32), np.zeros((1, 4), np.float32)), exc=RuntimeError,
                  match=r"index_copy_\(\): Expected a long tensor for index, but got Int"),
        ErrorCase((x, 1, _a(-1), np.zeros((3, 1), np.float32)), exc=IndexError,
                  match=r"index_copy_\(\): index -1 is out of bounds for dimension 1 with size "
                        r"4"),
        ErrorCase((x, 0, _a(0), np.zeros((1, 4), np.float64)), exc=RuntimeError,
                  match=r"self and source expected to have the same dtype"),
    ]


def _index_fill_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, 0, _a(0, dtype=np.int32), 1), exc=IndexError,
                  match=r"index_fill_\(\): Expected dtype int64 for index"),
        ErrorCase((x, 0, _a([0]), 1), exc=RuntimeError, match=r"Index has to be a vector/scalar"),
        ErrorCase((x, 1, _a(-5), 1), exc=IndexError,
                  match=r"index -5 is out of bounds for dimension 1 with size 4"),
        ErrorCase((x, 0, _a(0), np.zeros(1, np.float32)), exc=RuntimeError,
                  match=r"index_fill_ only supports a 0-dimensional value tensor"),
        ErrorCase((np.zeros(3, np.int8), 0, _a(0), 200), exc=RuntimeError,
                  match=r"value cannot be converted to type int8_t without overflow"),
    ]


def _index_put_errors():
    x = np.zeros((3, 4), np.float32)
    return [
        ErrorCase((x, (np.array([0], np.int16),), np.zeros((), np.float32)), exc=IndexError,
                  match=r"tensors used as indices must be long, int, byte or bool tensors"),
        ErrorCase((x, (_a(4),), np.zeros((), np.float32)), exc=IndexError,
                  match=r"index 4 is out of bounds for dimension 0 with size 3"),
        ErrorCase((x, (_a(0),), np.zeros((), np.float64)), exc=RuntimeError,
                  match=r"Index put requires the source and destination dtypes match"),
    ]


def _take_errors():
    x = np.zeros((3, 4), np.float32)
    return [ErrorCase((x, _a(12)), exc=IndexError,
                      match=r"out of range: tried to access index 12 on a tensor of 12 "
                            r"elements")]


def _inplace(method):
    def fn(t, x, *args, **kwargs):
        y = x.clone()
        out = getattr(y, method)(*[conv_index(t, a) if isinstance(a, tuple) else a
                                   for a in args], **kwargs)
        assert out is y
        return y
    return fn


NO_BF16_GRAD = ("float64",)

OPINFOS = [
    OpInfo("getitem", lambda t, x, idx: x[conv_index(t, idx)], _getitem_samples, dtypes=ALL,
           errors=_getitem_errors),
    OpInfo("setitem", _setitem, _setitem_samples, dtypes=ALL, errors=_setitem_errors),
    OpInfo("setitem_cast", _setitem, _setitem_cast_samples, dtypes=ALL, grad=False),
    OpInfo("setitem_through_view", _setitem_view, _setitem_view_samples, dtypes=FLOATS),
    OpInfo("gather", lambda t, x, d, i: t.gather(x, d, i), _gather_samples, dtypes=ALL,
           errors=_gather_errors),
    OpInfo("scatter", lambda t, x, d, i, s, **kw: x.scatter(d, i, s, **kw), _scatter_samples,
           dtypes=ALL, errors=_scatter_errors),
    OpInfo("scatter_value", lambda t, x, d, i, v: t.scatter(x, d, i, value=v),
           _scatter_value_samples, dtypes=ALL),
    OpInfo("scatter_", _inplace("scatter_"), _scatter_samples, dtypes=ALL),
    OpInfo("scatter_add", lambda t, x, d, i, s: t.scatter_add(x, d, i, s),
           _scatter_add_samples, dtypes=ALL),
    OpInfo("scatter_add_", _inplace("scatter_add_"), _scatter_add_samples, dtypes=FLOATS),
    OpInfo("scatter_reduce_add", lambda t, x, d, i, s: x.scatter(d, i, s, reduce="add"),
           _scatter_add_samples, dtypes=ALL, grad=False),
    OpInfo("scatter_reduce_multiply",
           lambda t, x, d, i, s: x.scatter(d, i, s, reduce="multiply"),
           _scatter_reduce_samples("prod", True), dtypes=ALL, grad=False),
    *[OpInfo(f"scatter_reduce_{r}_{'self' if inc else 'noself'}",
             lambda t, x, d, i, s, r=r, inc=inc: x.scatter_reduce(d, i, s, r, include_self=inc),
             _scatter_reduce_samples(r, inc), dtypes=INTS + FLOATS if r == "mean" else ALL,
             errors=_scatter_reduce_errors if (r, inc) == ("sum", True) else lambda: (),
             grad=r in ("sum", "mean", "prod") or hasattr(ember.Tensor, "eq"))
      for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)],
    OpInfo("index_select", lambda t, x, d, i: t.index_select(x, d, i), _index_select_samples,
           dtypes=ALL, errors=_index_select_errors),
    OpInfo("index_add", lambda t, x, d, i, s: t.index_add(x, d, i, s), _index_add_samples,
           dtypes=ALL, errors=_index_errors),
    OpInfo("index_add_alpha", lambda t, x, d, i, s: x.index_add(d, i, s, alpha=2),
           _index_add_samples, dtypes=INTS + FLOATS),
    OpInfo("index_add_", _inplace("index_add_"), _index_add_samples, dtypes=FLOATS),
    OpInfo("index_copy", lambda t, x, d, i, s: x.index_copy(d, i, s), _index_copy_samples,
           dtypes=ALL, errors=_index_copy_errors),
    OpInfo("index_copy_", _inplace("index_copy_"), _index_copy_samples, dtypes=FLOATS),
    OpInfo("index_fill", lambda t, x, d, i, v: x.index_fill(d, i, v), _index_fill_samples,
           dtypes=ALL, errors=_index_fill_errors),
    OpInfo("index_fill_", _inplace("index_fill_"), _index_fill_samples, dtypes=FLOATS),
    OpInfo("index_put", lambda t, x, idx, v, **kw: x.index_put(conv_index(t, idx), v, **kw),
           _index_put_samples(False), dtypes=ALL, errors=_index_put_errors),
    OpInfo("index_put_accumulate",
           lambda t, x, idx, v, **kw: t.index_put(x, conv_index(t, idx), v, **kw),
           _index_put_samples(True), dtypes=ALL),
    OpInfo("index_put_", _inplace("index_put_"), _index_put_samples(True), dtypes=FLOATS),
    OpInfo("masked_fill", lambda t, x, m, v: t.masked_fill(x, m, v), _masked_fill_samples,
           dtypes=ALL, errors=_masked_fill_errors),
    OpInfo("masked_fill_", _inplace("masked_fill_"),
           lambda d, r: [s for s in _masked_fill_samples(d, r)
                         if s.desc != "mask broadcasts input"], dtypes=ALL),
    OpInfo("masked_select", lambda t, x, m: t.masked_select(x, m), _masked_select_samples,
           dtypes=ALL),
    OpInfo("masked_scatter", lambda t, x, m, s: x.masked_scatter(m, s), _masked_scatter_samples,
           dtypes=ALL),
    OpInfo("masked_scatter_", _inplace("masked_scatter_"),
           lambda d, r: [s for s in _masked_scatter_samples(d, r)
                         if s.desc != "broadcast, 2-d source"], dtypes=FLOATS),
    OpInfo("scatter_reduce_", _inplace("scatter_reduce_"),
           lambda d, r: [Sample(s.args + ("mean",), {"include_self": False}, desc=s.desc)
                         for s in _scatter_reduce_samples("mean", False)(d, r)],
           dtypes=FLOATS),
    OpInfo("nonzero", lambda t, x: t.nonzero(x), _nonzero_samples, dtypes=ALL, grad=False),
    OpInfo("nonzero_as_tuple", lambda t, x: x.nonzero(as_tuple=True), _nonzero_samples,
           dtypes=ALL, grad=False),
    OpInfo("argwhere", lambda t, x: t.argwhere(x), _nonzero_samples, dtypes=ALL, grad=False),
    OpInfo("take", lambda t, x, i: t.take(x, i), _take_samples, dtypes=ALL,
           errors=_take_errors),
    OpInfo("take_along_dim", lambda t, x, i, **kw: t.take_along_dim(x, i, **kw),
           _take_along_dim_samples, dtypes=ALL, errors=_take_along_dim_errors),
]
