"""OpInfo entries for copying layout ops: cat/stack and friends, flip, roll, repeat/tile."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ALL, ErrorCase, OpInfo, Sample, make

F32 = np.float32


def _z(*shape, dtype=F32):
    return np.zeros(shape, dtype)


# ---------------------------------------------------------------------------------- cat
def _cat_samples(dtype, rng):
    yield Sample((make((2, 3), dtype, rng), make((4, 3), dtype, rng)), {}, desc="dim 0")
    yield Sample((make((2, 3), dtype, rng), make((2, 1), dtype, rng), make((2, 0), dtype, rng)),
                 {"dim": -1}, desc="dim -1, three inputs, one empty")
    yield Sample((make((2, 3, 4), dtype, rng),), {"dim": 1}, desc="single input")
    yield Sample((make((3,), dtype, rng), make((0,), dtype, rng), make((2,), dtype, rng)), {},
                 desc="1-d with empty")
    yield Sample((make((2, 3), dtype, rng), make((0,), dtype, rng)), {"dim": 1},
                 desc="legacy (0,) skipped", grad=False)
    yield Sample((make((3, 2), dtype, rng, noncontig=True), make((3, 2), dtype, rng)),
                 {"dim": 1}, desc="noncontig", noncontig=True)


def _cat_promote_samples(dtype, rng):
    a = make((2, 3), dtype, rng)
    for other in ("bool", "int64", "float16", "float32", "float64", "uint8", "bfloat16"):
        yield Sample((a, make((1, 3), other, rng)), desc=f"vs {other}", grad=False)
    yield Sample((make((0,), "float64", rng), a), desc="skipped (0,) still promotes", grad=False)


def _cat_errors():
    return [
        ErrorCase((_z(2, 3), _z(2, 4)), {}, exc=RuntimeError,
                  match=r"\[cat\] Sizes of tensors must match except in dimension 0. Expected "
                        r"size 3 but got size 4 for tensor number 1 in the list.*\(2, 3\), "
                        r"\(2, 4\)"),
        ErrorCase((_z(2, 3), _z(2, 3, 1)), {}, exc=RuntimeError,
                  match=r"\[cat\] Tensors must have same number of dimensions: got 2 and 3"),
        ErrorCase((np.zeros((), F32),), {}, exc=RuntimeError,
                  match=r"\[cat\] zero-dimensional tensor \(at position 0\) cannot be "
                        r"concatenated"),
        ErrorCase((_z(2, 3),), {"dim": 2}, exc=IndexError,
                  match=r"\[cat\] Dimension out of range"),
        ErrorCase((), {}, exc=ValueError, match=r"\[cat\].*expected a non-empty list"),
    ]


def _stack_samples(dtype, rng):
    yield Sample((make((2, 3), dtype, rng), make((2, 3), dtype, rng)), {}, desc="dim 0")
    yield Sample((make((2, 3), dtype, rng), make((2, 3), dtype, rng)), {"dim": -1},
                 desc="dim -1")
    yield Sample((make((2, 3), dtype, rng), make((2, 3), dtype, rng)), {"dim": 1}, desc="dim 1")
    yield Sample((make((), dtype, rng), make((), dtype, rng), make((), dtype, rng)), {},
                 desc="0-d")
    yield Sample((make((0, 2), dtype, rng),), {}, desc="empty")
    yield Sample((make((3, 2), dtype, rng, noncontig=True), make((3, 2), dtype, rng)),
                 {"dim": 2}, desc="noncontig", noncontig=True)


def _stack_errors():
    return [
        ErrorCase((_z(2, 3), _z(3, 2)), {}, exc=RuntimeError,
                  match=r"\[stack\] stack expects each tensor to be equal size, but got \[2, 3\] "
                        r"at entry 0 and \[3, 2\] at entry 1"),
        ErrorCase((), {}, exc=RuntimeError, match=r"\[stack\] stack expects a non-empty"),
        ErrorCase((_z(2, 3),), {"dim": 3}, exc=IndexError, match=r"\[stack\] Dimension out"),
    ]


def _stack_like_samples(dtype, rng):
    for shapes in [[(3,), (2,)], [(2, 3), (2, 3)], [(), ()], [(2, 1, 3), (2, 2, 3)],
                   [(2, 1), (2, 1)]]:
        yield Sample(tuple(make(s, dtype, rng) for s in shapes), desc=f"{shapes}")


def _vstack_samples(dtype, rng):
    for shapes in [[(3,), (3,)], [(2, 3), (1, 3)], [(), ()], [(2, 3, 1), (1, 3, 1)]]:
        yield Sample(tuple(make(s, dtype, rng) for s in shapes), desc=f"{shapes}")


def _dstack_samples(dtype, rng):
    for shapes in [[(3,), (3,)], [(2, 3), (2, 3)], [(), ()], [(2, 3, 1), (2, 3, 2)]]:
        yield Sample(tuple(make(s, dtype, rng) for s in shapes), desc=f"{shapes}")


def _column_stack_samples(dtype, rng):
    for shapes in [[(3,), (3,)], [(3, 2), (3,)], [(), ()]]:
        yield Sample(tuple(make(s, dtype, rng) for s in shapes), desc=f"{shapes}")


def _hstack_errors():
    return [ErrorCase((), {}, exc=RuntimeError, match=r"\[hstack\] hstack expects a non-empty")]


def _atleast_samples(dtype, rng):
    for shape in [(), (3,), (2, 3), (2, 3, 4), (0,)]:
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}")


# ---------------------------------------------------------------------------------- flip/roll
def _flip_samples(dtype, rng):
    x = make((2, 3, 4), dtype, rng)
    yield Sample((x,), {"dims": (0,)}, desc="dim 0")
    yield Sample((x,), {"dims": (-1, 0)}, desc="two dims")
    yield Sample((x,), {"dims": ()}, desc="no dims")
    yield Sample((make((), dtype, rng),), {"dims": (0,)}, desc="0-d")
    yield Sample((make((0, 3), dtype, rng),), {"dims": (1,)}, desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"dims": (1,)}, desc="noncontig",
                 noncontig=True)


def _flip_errors():
    return [
        ErrorCase((_z(2, 3),), {"dims": (0, -2)}, exc=RuntimeError,
                  match=r"\[flip\] dim 0 appears multiple times in the list of dims"),
        ErrorCase((_z(2, 3),), {"dims": (2,)}, exc=IndexError, match=r"\[flip\] Dimension out"),
    ]


def _lr_samples(dtype, rng):
    for shape in [(3, 4), (2, 3, 4), (0, 2)]:
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}")


def _ud_samples(dtype, rng):
    for shape in [(3,), (3, 4), (0,)]:
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}")


def _fliplr_errors():
    return [ErrorCase((_z(3),), exc=RuntimeError, match=r"\[fliplr\] Input must be >= 2-d.")]


def _flipud_errors():
    return [ErrorCase((np.zeros((), F32),), exc=RuntimeError,
                      match=r"\[flipud\] Input must be >= 1-d.")]


def _roll_samples(dtype, rng):
    x = make((3, 4), dtype, rng)
    yield Sample((x,), {"shifts": 1}, desc="flattened")
    yield Sample((x,), {"shifts": -5}, desc="flattened negative")
    yield Sample((x,), {"shifts": 2, "dims": 1}, desc="int dim")
    yield Sample((x,), {"shifts": (1, -7), "dims": (0, -1)}, desc="two dims")
    yield Sample((x,), {"shifts": (1, 2), "dims": (1, 1)}, desc="same dim twice")
    yield Sample((make((), dtype, rng),), {"shifts": 3}, desc="0-d")
    yield Sample((make((0, 3), dtype, rng),), {"shifts": 1, "dims": 1}, desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"shifts": 1, "dims": 0},
                 desc="noncontig", noncontig=True)


def _roll_errors():
    x = _z(2, 3)
    return [
        ErrorCase((x,), {"shifts": (1, 2), "dims": (0,)}, exc=RuntimeError,
                  match=r"\[roll\] shifts and dimensions must align. shifts: 2, dims:1"),
        ErrorCase((x,), {"shifts": 1, "dims": 2}, exc=IndexError, match=r"\[roll\] Dimension"),
    ]


# ---------------------------------------------------------------------------------- repeat
def _repeat_samples(dtype, rng):
    x = make((2, 3), dtype, rng)
    yield Sample((x,), {"sizes": (2, 3)}, desc="2-d")
    yield Sample((x,), {"sizes": (2, 1, 2)}, desc="extra lead dim")
    yield Sample((x,), {"sizes": (0, 2)}, desc="zero repeat")
    yield Sample((make((), dtype, rng),), {"sizes": (3,)}, desc="0-d")
    yield Sample((make((), dtype, rng),), {"sizes": ()}, desc="0-d no sizes")
    yield Sample((make((3, 2), dtype, rng, noncontig=True),), {"sizes": (1, 2)},
                 desc="noncontig", noncontig=True)


def _repeat_errors():
    return [
        ErrorCase((_z(2, 3),), {"sizes": (2,)}, exc=RuntimeError,
                  match=r"\[repeat\] Number of dimensions of repeat dims can not be smaller "
                        r"than number of dimensions of tensor"),
        ErrorCase((_z(2, 3),), {"sizes": (2, -1)}, exc=RuntimeError,
                  match=r"\[repeat\].*negative"),
    ]


def _tile_samples(dtype, rng):
    x = make((2, 3), dtype, rng)
    yield Sample((x,), {"dims": (2,)}, desc="fewer reps than dims")
    yield Sample((x,), {"dims": (2, 1, 2)}, desc="more reps")
    yield Sample((x,), {"dims": ()}, desc="no reps")
    yield Sample((make((), dtype, rng),), {"dims": (2, 2)}, desc="0-d")


def _star(fn):
    """An OpInfo fn taking the tensors positionally (so each gets a gradient) and passing them
    to ``fn`` as a list."""
    return lambda t, *xs, **kw: fn(t)(list(xs), **kw)


OPINFOS = [
    OpInfo("cat", _star(lambda t: t.cat), _cat_samples, dtypes=ALL, errors=_cat_errors),
    OpInfo("concat", _star(lambda t: t.concat), _cat_samples, dtypes=("float32", "int64")),
    OpInfo("concatenate", _star(lambda t: t.concatenate), _cat_samples,
           dtypes=("float32", "bool")),
    OpInfo("cat_promote", _star(lambda t: t.cat), _cat_promote_samples, dtypes=ALL, grad=False),
    OpInfo("cat_out", lambda t, x, y: t.cat([x, y], 1, out=t.empty(
        (x.shape[0], x.shape[1] + y.shape[1]), dtype=x.dtype)),
           lambda d, r: [Sample((make((2, 3), d, r), make((2, 1), d, r)), grad=False)],
           dtypes=ALL, grad=False),
    OpInfo("stack_out", lambda t, x, y: t.stack([x, y], out=t.empty((2, *x.shape),
                                                                    dtype=x.dtype)),
           lambda d, r: [Sample((make((2, 3), d, r), make((2, 3), d, r)), grad=False)],
           dtypes=("float32", "int64"), grad=False),
    OpInfo("stack", _star(lambda t: t.stack), _stack_samples, dtypes=ALL, errors=_stack_errors),
    OpInfo("hstack", _star(lambda t: t.hstack), _stack_like_samples, dtypes=ALL,
           errors=_hstack_errors),
    OpInfo("vstack", _star(lambda t: t.vstack), _vstack_samples, dtypes=ALL),
    OpInfo("row_stack", _star(lambda t: t.row_stack), _vstack_samples,
           dtypes=("float32", "int64")),
    OpInfo("dstack", _star(lambda t: t.dstack), _dstack_samples, dtypes=ALL),
    OpInfo("column_stack", _star(lambda t: t.column_stack), _column_stack_samples, dtypes=ALL),
    OpInfo("atleast_1d", lambda t, x: t.atleast_1d(x), _atleast_samples, dtypes=ALL),
    OpInfo("atleast_2d", lambda t, x: t.atleast_2d(x), _atleast_samples, dtypes=ALL),
    OpInfo("atleast_3d", lambda t, x: t.atleast_3d(x), _atleast_samples, dtypes=ALL),
    OpInfo("atleast_3d_many", lambda t, x, y: t.atleast_3d(x, y),
           lambda d, r: [Sample((make((2,), d, r), make((2, 3), d, r)))], dtypes=("float32",)),
    OpInfo("flip", lambda t, x, dims: t.flip(x, dims), _flip_samples, dtypes=ALL,
           errors=_flip_errors),
    OpInfo("flip_method", lambda t, x, dims: x.flip(*dims) if len(dims) > 1 else x.flip(dims),
           lambda d, r: [s for s in _flip_samples(d, r) if s.kwargs["dims"]],
           dtypes=("float32", "int64")),
    OpInfo("fliplr", lambda t, x: t.fliplr(x), _lr_samples, dtypes=ALL, errors=_fliplr_errors),
    OpInfo("flipud", lambda t, x: t.flipud(x), _ud_samples, dtypes=ALL, errors=_flipud_errors),
    OpInfo("roll", lambda t, x, **kw: t.roll(x, **kw), _roll_samples, dtypes=ALL,
           errors=_roll_errors),
    OpInfo("repeat", lambda t, x, sizes: x.repeat(*sizes) if sizes else x.repeat(()),
           _repeat_samples, dtypes=ALL, errors=_repeat_errors),
    OpInfo("tile", lambda t, x, dims: t.tile(x, dims), _tile_samples, dtypes=ALL),
]
