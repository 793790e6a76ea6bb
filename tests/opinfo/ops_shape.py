"""OpInfo entries for views: reshape/view, squeeze, transpose, narrow/select, split, strided
views.  (Copying layout ops are in ``ops_movement.py``.)"""

from __future__ import annotations

import warnings

import numpy as np

from tests.opinfo.core import ALL, ErrorCase, OpInfo, Sample, make

F32 = np.float32


def _z(*shape):
    return np.zeros(shape, F32)


def _reshape_samples(dtype, rng):
    yield Sample((make((2, 3, 4), dtype, rng),), {"shape": (6, 4)}, desc="(2,3,4)->(6,4)")
    yield Sample((make((2, 3, 4), dtype, rng),), {"shape": (-1,)}, desc="flatten -1")
    yield Sample((make((), dtype, rng),), {"shape": (1, 1)}, desc="0-d")
    yield Sample((make((0, 3), dtype, rng),), {"shape": (3, 0)}, desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"shape": (12,)}, desc="noncontig",
                 noncontig=True)


def _view_samples(dtype, rng):
    for s in _reshape_samples(dtype, rng):
        if not s.noncontig:
            yield s


def _expand_samples(dtype, rng):
    yield Sample((make((3, 1), dtype, rng),), {"shape": (3, 4)}, desc="(3,1)->(3,4)")
    yield Sample((make((3,), dtype, rng),), {"shape": (2, 3)}, desc="new lead dim")
    yield Sample((make((), dtype, rng),), {"shape": (2, 2)}, desc="0-d")
    yield Sample((make((1, 4), dtype, rng),), {"shape": (-1, 4)}, desc="-1 keeps size")
    yield Sample((make((3, 1), dtype, rng, noncontig=True),), {"shape": (2, 3, 5)},
                 desc="noncontig", noncontig=True)


def _permute_samples(dtype, rng):
    yield Sample((make((2, 3, 4), dtype, rng),), {"dims": (2, 0, 1)}, desc="3-d")
    yield Sample((make((2, 3, 4), dtype, rng),), {"dims": (-1, 0, -2)}, desc="negative dims")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"dims": (1, 0)}, desc="noncontig")
    yield Sample((make((), dtype, rng),), {"dims": ()}, desc="0-d")


def _view_errors():
    return [
        ErrorCase((_z(2, 3),), {"shape": (4,)}, exc=RuntimeError,
                  match=r"\[view\] shape '\[4\]' is invalid for input of size 6"),
    ]


def _reshape_errors():
    return [
        ErrorCase((_z(2, 3),), {"shape": (4,)}, exc=RuntimeError,
                  match=r"^\[reshape\] shape '\[4\]' is invalid for input of size 6$"),
        ErrorCase((_z(2, 3),), {"shape": (-1, 4)}, exc=RuntimeError,
                  match=r"^\[reshape\] shape '\[-1, 4\]' is invalid for input of size 6$"),
    ]


def _view_noncontig_errors():
    return [ErrorCase((_z(3, 2).T,), {}, exc=RuntimeError,
                      match=r"\[view\] view size is not compatible")]


def _permute_errors():
    return [
        ErrorCase((_z(2, 3),), {"dims": (0, 0)}, exc=RuntimeError, match=r"\[permute\].*duplicate"),
        ErrorCase((_z(2, 3),), {"dims": (0, 2)}, exc=IndexError,
                  match=r"\[permute\] Dimension out of range"),
        ErrorCase((_z(2, 3),), {"dims": (0,)}, exc=RuntimeError, match=r"\[permute\] number"),
    ]


# ---------------------------------------------------------------------------------- flatten
def _flatten_samples(dtype, rng):
    x = make((2, 3, 4), dtype, rng)
    yield Sample((x,), {}, desc="all")
    yield Sample((x,), {"start_dim": 1}, desc="start 1")
    yield Sample((x,), {"start_dim": 0, "end_dim": -2}, desc="end -2")
    yield Sample((x,), {"start_dim": -1}, desc="start==end")
    yield Sample((make((), dtype, rng),), {}, desc="0-d")
    yield Sample((make((2, 0, 3), dtype, rng),), {"start_dim": 1}, desc="empty")
    yield Sample((make((2, 3, 4), dtype, rng, noncontig=True),), {"start_dim": 1},
                 desc="noncontig", noncontig=True)


def _flatten_errors():
    return [
        ErrorCase((_z(2, 3, 4),), {"start_dim": 2, "end_dim": 1}, exc=RuntimeError,
                  match=r"\[flatten\].*start_dim cannot come after end_dim"),
        ErrorCase((_z(2, 3),), {"start_dim": 2}, exc=IndexError,
                  match=r"\[flatten\] Dimension out of range"),
    ]


def _unflatten_samples(dtype, rng):
    x = make((2, 12), dtype, rng)
    yield Sample((x,), {"dim": 1, "sizes": (3, 4)}, desc="dim 1")
    yield Sample((x,), {"dim": -1, "sizes": (2, -1, 3)}, desc="-1 inferred")
    yield Sample((x,), {"dim": 0, "sizes": (1, 2)}, desc="dim 0")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"dim": 1, "sizes": (2, 2)},
                 desc="noncontig", noncontig=True)


def _unflatten_errors():
    return [
        ErrorCase((_z(2, 3),), {"dim": 1, "sizes": (2, 2)}, exc=RuntimeError,
                  match=r"\[unflatten\].*\[2, 2\] don't multiply up to the size of dim 1 \(3\)"),
        ErrorCase((_z(2, 3),), {"dim": 1, "sizes": ()}, exc=RuntimeError,
                  match=r"\[unflatten\].*non-empty"),
    ]


# ---------------------------------------------------------------------------------- squeeze
def _squeeze_samples(dtype, rng):
    x = make((1, 3, 1, 2), dtype, rng)
    yield Sample((x,), {}, desc="all")
    yield Sample((x,), {"dim": 0}, desc="dim 0")
    yield Sample((x,), {"dim": 1}, desc="non-1 dim: no-op")
    yield Sample((x,), {"dim": -2}, desc="negative dim")
    yield Sample((x,), {"dim": (0, 2)}, desc="tuple")
    yield Sample((x,), {"dim": (1, -2)}, desc="tuple mixed")
    yield Sample((make((), dtype, rng),), {}, desc="0-d")
    yield Sample((make((), dtype, rng),), {"dim": 0}, desc="0-d dim 0")
    yield Sample((make((1, 0), dtype, rng),), {}, desc="empty")
    yield Sample((make((3, 1), dtype, rng, noncontig=True),), {"dim": 1}, desc="noncontig",
                 noncontig=True)


def _squeeze_errors():
    return [ErrorCase((_z(2, 1),), {"dim": 2}, exc=IndexError,
                      match=r"\[squeeze\] Dimension out of range"),
            ErrorCase((_z(1, 3),), {"dim": (0, -2)}, exc=RuntimeError,
                      match=r"\[squeeze\] dim 0 appears multiple times in the list of dims")]


def _unsqueeze_samples(dtype, rng):
    x = make((2, 3), dtype, rng)
    for d in (0, 1, 2, -1, -3):
        yield Sample((x,), {"dim": d}, desc=f"dim {d}")
    yield Sample((make((), dtype, rng),), {"dim": 0}, desc="0-d")
    yield Sample((make((), dtype, rng),), {"dim": -1}, desc="0-d -1")
    yield Sample((make((0, 2), dtype, rng),), {"dim": 1}, desc="empty")
    yield Sample((make((2, 3), dtype, rng, noncontig=True),), {"dim": 1}, desc="noncontig",
                 noncontig=True)


def _unsqueeze_errors():
    return [ErrorCase((_z(2, 3),), {"dim": 3}, exc=IndexError,
                      match=r"\[unsqueeze\] Dimension out of range")]


# ---------------------------------------------------------------------------------- transpose
def _transpose_samples(dtype, rng):
    x = make((2, 3, 4), dtype, rng)
    yield Sample((x,), {"dim0": 0, "dim1": 2}, desc="0,2")
    yield Sample((x,), {"dim0": -1, "dim1": 1}, desc="negative")
    yield Sample((x,), {"dim0": 1, "dim1": 1}, desc="same dim")
    yield Sample((make((), dtype, rng),), {"dim0": 0, "dim1": -1}, desc="0-d")
    yield Sample((make((0, 3), dtype, rng),), {"dim0": 0, "dim1": 1}, desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"dim0": 0, "dim1": 1},
                 desc="noncontig", noncontig=True)


def _transpose_errors():
    return [ErrorCase((_z(2, 3),), {"dim0": 0, "dim1": 2}, exc=IndexError,
                      match=r"\[transpose\] Dimension out of range")]


def _t_samples(dtype, rng):
    for shape in [(3, 4), (5,), (), (0, 2)]:
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), desc="noncontig", noncontig=True)


def _t_samples_nonscalar(dtype, rng):
    for s in _t_samples(dtype, rng):
        if s.args[0].ndim:
            yield s


def _t_errors():
    return [ErrorCase((_z(2, 3, 4),), exc=RuntimeError,
                      match=r"\[t\] t\(\) expects a tensor with <= 2 dimensions, but self is 3D")]


def _transpose_all(t, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # >2-d and 0-d .T are deprecated in torch
        return x.T


def _T_samples(dtype, rng):
    for shape in [(3, 4), (2, 3, 4), (5,), ()]:
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}")


def _mT_samples(dtype, rng):
    for shape in [(3, 4), (2, 3, 4), (0, 2, 3)]:
        yield Sample((make(shape, dtype, rng),), desc=f"{shape}")
    yield Sample((make((2, 3, 4), dtype, rng, noncontig=True),), desc="noncontig",
                 noncontig=True)


def _mT_errors():
    return [ErrorCase((_z(3),), exc=RuntimeError,
                      match=r"\[mT\] tensor.mT is only supported on matrices or batches of "
                            r"matrices. Got 1-D tensor.")]


def _movedim_samples(dtype, rng):
    x = make((2, 3, 4, 5), dtype, rng)
    yield Sample((x,), {"source": 0, "destination": -1}, desc="int")
    yield Sample((x,), {"source": (0, 1), "destination": (3, 0)}, desc="tuple")
    yield Sample((x,), {"source": (-1, 1), "destination": (1, 2)}, desc="negative")
    yield Sample((make((), dtype, rng),), {"source": 0, "destination": 0}, desc="0-d")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"source": 1, "destination": 0},
                 desc="noncontig", noncontig=True)


def _movedim_errors():
    x = _z(2, 3)
    return [
        ErrorCase((x,), {"source": (0, 1), "destination": (0,)}, exc=RuntimeError,
                  match=r"\[movedim\].*same number of dims"),
        ErrorCase((x,), {"source": (0, 0), "destination": (0, 1)}, exc=RuntimeError,
                  match=r"\[movedim\] movedim: repeated dim in `source`"),
        ErrorCase((x,), {"source": 2, "destination": 0}, exc=IndexError,
                  match=r"\[movedim\] Dimension out of range"),
    ]


def _view_as_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng), make((12,), dtype, rng)), desc="2-d as 1-d",
                 grad=False)
    yield Sample((make((3, 4), dtype, rng), make((2, 6), dtype, rng)), desc="2-d as 2-d",
                 grad=False)


def _expand_as_samples(dtype, rng):
    yield Sample((make((3, 1), dtype, rng), make((2, 3, 4), dtype, rng)), desc="broadcast",
                 grad=False)
    yield Sample((make((), dtype, rng), make((2, 3), dtype, rng)), desc="0-d", grad=False)


def _as_other_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng), make((2, 6), dtype, rng)), desc="2-d",
                 grad=False)
    yield Sample((make((3, 4), dtype, rng, noncontig=True), make((12,), dtype, rng)),
                 desc="noncontig", noncontig=True, grad=False)


# ---------------------------------------------------------------------------------- slicing
def _narrow_samples(dtype, rng):
    x = make((4, 5), dtype, rng)
    yield Sample((x,), {"dim": 0, "start": 1, "length": 2}, desc="dim 0")
    yield Sample((x,), {"dim": -1, "start": -3, "length": 3}, desc="negative start/dim")
    yield Sample((x,), {"dim": 1, "start": 5, "length": 0}, desc="empty at end")
    yield Sample((make((4, 5), dtype, rng, noncontig=True),), {"dim": 1, "start": 1, "length": 3},
                 desc="noncontig", noncontig=True)


def _narrow_errors():
    x = _z(2, 3)
    return [
        ErrorCase((x,), {"dim": 1, "start": 2, "length": 2}, exc=RuntimeError,
                  match=r"\[narrow\] start \(2\) \+ length \(2\) exceeds dimension size \(3\)"),
        ErrorCase((x,), {"dim": 1, "start": 4, "length": 0}, exc=IndexError,
                  match=r"\[narrow\] start out of range"),
        ErrorCase((x,), {"dim": 1, "start": 0, "length": -1}, exc=RuntimeError,
                  match=r"\[narrow\].*length must be non-negative"),
        ErrorCase((x,), {"dim": 2, "start": 0, "length": 1}, exc=IndexError,
                  match=r"\[narrow\] Dimension out of range"),
    ]


def _select_samples(dtype, rng):
    x = make((3, 4, 2), dtype, rng)
    yield Sample((x,), {"dim": 0, "index": 1}, desc="dim 0")
    yield Sample((x,), {"dim": -1, "index": -1}, desc="negative")
    yield Sample((make((5,), dtype, rng),), {"dim": 0, "index": 2}, desc="1-d -> 0-d")
    yield Sample((make((3, 0), dtype, rng),), {"dim": 0, "index": 2}, desc="empty")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"dim": 1, "index": 3},
                 desc="noncontig", noncontig=True)


def _select_errors():
    x = _z(2, 3)
    return [
        ErrorCase((x,), {"dim": 1, "index": 3}, exc=IndexError,
                  match=r"\[select\] select\(\): index 3 out of range for tensor of size "
                        r"\[2, 3\] at dimension 1"),
        ErrorCase((x,), {"dim": 1, "index": -4}, exc=IndexError, match=r"\[select\].*-4"),
        ErrorCase((np.zeros((), F32),), {"dim": 0, "index": 0}, exc=IndexError,
                  match=r"\[select\] select\(\) cannot be applied to a 0-dim tensor"),
    ]


def _split_samples(dtype, rng):
    x = make((5, 4), dtype, rng)
    yield Sample((x,), {"split_size_or_sections": 2}, desc="int, uneven")
    yield Sample((x,), {"split_size_or_sections": 2, "dim": -1}, desc="int dim -1")
    yield Sample((x,), {"split_size_or_sections": 10}, desc="int larger than dim")
    yield Sample((x,), {"split_size_or_sections": [1, 0, 4]}, desc="sizes with 0")
    yield Sample((make((0, 3), dtype, rng),), {"split_size_or_sections": 0}, desc="empty, 0")
    yield Sample((make((4, 6), dtype, rng, noncontig=True),),
                 {"split_size_or_sections": [2, 4], "dim": 1}, desc="noncontig", noncontig=True)


def _split_errors():
    x = _z(5, 3)
    return [
        ErrorCase((x,), {"split_size_or_sections": [2, 2]}, exc=RuntimeError,
                  match=r"\[split\] split_with_sizes expects split_sizes to sum exactly to 5 "
                        r"\(input tensor's size at dimension 0\), but got split_sizes=\[2, 2\]"),
        ErrorCase((x,), {"split_size_or_sections": 0}, exc=RuntimeError,
                  match=r"\[split\] split_size can only be 0 if dimension size is 0"),
        ErrorCase((x,), {"split_size_or_sections": 1, "dim": 2}, exc=IndexError,
                  match=r"\[split\] Dimension out of range"),
    ]


def _chunk_samples(dtype, rng):
    x = make((6, 5), dtype, rng)
    yield Sample((x,), {"chunks": 3}, desc="even")
    yield Sample((x,), {"chunks": 4}, desc="fewer chunks than asked")
    yield Sample((x,), {"chunks": 2, "dim": -1}, desc="dim -1 uneven")
    yield Sample((x,), {"chunks": 10}, desc="more chunks than elements")
    yield Sample((make((0, 2), dtype, rng),), {"chunks": 3}, desc="empty")


def _chunk_errors():
    return [ErrorCase((_z(3),), {"chunks": 0}, exc=RuntimeError,
                      match=r"\[chunk\] chunk expects `chunks` to be greater than 0, got: 0")]


def _tensor_split_samples(dtype, rng):
    x = make((7, 4), dtype, rng)
    yield Sample((x,), {"indices_or_sections": 3}, desc="sections")
    yield Sample((x,), {"indices_or_sections": 3, "dim": 1}, desc="sections dim 1")
    yield Sample((x,), {"indices_or_sections": [2, 5]}, desc="indices")
    yield Sample((x,), {"indices_or_sections": [-2, 10, 1]}, desc="odd indices")
    yield Sample((make((0, 2), dtype, rng),), {"indices_or_sections": 2}, desc="empty")


def _tensor_split_errors():
    return [ErrorCase((_z(3),), {"indices_or_sections": 0}, exc=RuntimeError,
                      match=r"\[tensor_split\] number of sections must be larger than 0")]


def _unbind_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng),), {}, desc="dim 0")
    yield Sample((make((2, 3, 4), dtype, rng),), {"dim": -1}, desc="dim -1")
    yield Sample((make((3,), dtype, rng),), {}, desc="1-d")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"dim": 1}, desc="noncontig",
                 noncontig=True)


def _unbind_errors():
    return [ErrorCase((_z(2, 3),), {"dim": 2}, exc=IndexError,
                      match=r"\[unbind\] Dimension out of range")]


# ---------------------------------------------------------------------------------- strided
def _as_strided_samples(dtype, rng):
    x = make((4, 5), dtype, rng)
    yield Sample((x,), {"size": (3, 3), "stride": (5, 1)}, desc="sub-matrix")
    yield Sample((x,), {"size": (2, 2), "stride": (1, 2), "storage_offset": 3},
                 desc="offset, transposed")
    yield Sample((x,), {"size": (3, 3), "stride": (1, 1)}, desc="overlapping windows")
    yield Sample((x,), {"size": (4,), "stride": (6,)}, desc="diagonal")
    yield Sample((x,), {"size": (0, 2), "stride": (1, 1)}, desc="empty")
    yield Sample((x,), {"size": (), "stride": (), "storage_offset": 7}, desc="0-d")


def _as_strided_errors():
    return [ErrorCase((_z(2, 3),), {"size": (3, 3), "stride": (1, 1), "storage_offset": 5},
                      exc=RuntimeError,
                      match=r"\[as_strided\] setStorage: sizes \[3, 3\], strides \[1, 1\], "
                            r"storage offset 5, and itemsize 4 requiring a storage size of 40 "
                            r"are out of bounds for storage of size 24")]


def _unfold_samples(dtype, rng):
    x = make((3, 7), dtype, rng)
    yield Sample((x,), {"dimension": 1, "size": 3, "step": 2}, desc="step 2")
    yield Sample((x,), {"dimension": -1, "size": 2, "step": 1}, desc="overlapping")
    yield Sample((x,), {"dimension": 0, "size": 3, "step": 5}, desc="one window")
    yield Sample((x,), {"dimension": 1, "size": 0, "step": 1}, desc="size 0")
    yield Sample((make((), dtype, rng),), {"dimension": 0, "size": 1, "step": 1}, desc="0-d")
    yield Sample((make((4, 6), dtype, rng, noncontig=True),),
                 {"dimension": 1, "size": 2, "step": 2}, desc="noncontig", noncontig=True)


def _unfold_errors():
    x = _z(2, 3)
    return [
        ErrorCase((x,), {"dimension": 1, "size": 4, "step": 1}, exc=RuntimeError,
                  match=r"\[unfold\] maximum size for tensor at dimension 1 is 3 but size is 4"),
        ErrorCase((x,), {"dimension": 1, "size": 2, "step": 0}, exc=RuntimeError,
                  match=r"\[unfold\] step is 0 but must be > 0"),
    ]


def _diagonal_samples(dtype, rng):
    x = make((4, 5), dtype, rng)
    yield Sample((x,), {}, desc="main")
    yield Sample((x,), {"offset": 2}, desc="offset 2")
    yield Sample((x,), {"offset": -3}, desc="offset -3")
    yield Sample((x,), {"offset": 7}, desc="offset beyond: empty")
    yield Sample((make((2, 3, 4), dtype, rng),), {"offset": 1, "dim1": -1, "dim2": 0},
                 desc="3-d dims")
    yield Sample((make((4, 4), dtype, rng, noncontig=True),), {"offset": -1}, desc="noncontig",
                 noncontig=True)


def _diagonal_errors():
    return [ErrorCase((_z(2, 3),), {"dim1": 0, "dim2": -2}, exc=RuntimeError,
                      match=r"\[diagonal\] diagonal dimensions cannot be identical")]


OPINFOS = [
    OpInfo("reshape", lambda t, x, shape: x.reshape(shape), _reshape_samples, dtypes=ALL,
           errors=_reshape_errors),
    OpInfo("view", lambda t, x, shape: x.view(shape), _view_samples, dtypes=ALL,
           errors=_view_errors),
    OpInfo("view_noncontig_error", lambda t, x: x.view(6), lambda d, r: [
        Sample((make((3, 2), d, r),), grad=False)], dtypes=("float32",), grad=False,
        errors=_view_noncontig_errors),
    OpInfo("expand", lambda t, x, shape: x.expand(*shape), _expand_samples, dtypes=ALL),
    OpInfo("permute", lambda t, x, dims: x.permute(dims), _permute_samples, dtypes=ALL,
           errors=_permute_errors),
    OpInfo("clone", lambda t, x: x.clone(), lambda d, r: [Sample((make((3, 4), d, r),))],
           dtypes=ALL),
    OpInfo("to_dtype", lambda t, x, dtype: x.to(dtype),
           lambda d, r: [Sample((make((3, 4), d, r),), {"dtype": t})
                         for t in __import__("ember").dtypes.ALL_DTYPES
                         if not (d in ("float16", "bfloat16", "float32", "float64")
                                 and t.category == 1)],
           dtypes=ALL, fd_check=False),
    OpInfo("flatten", lambda t, x, **kw: t.flatten(x, **kw), _flatten_samples, dtypes=ALL,
           errors=_flatten_errors),
    OpInfo("ravel", lambda t, x: t.ravel(x), _t_samples, dtypes=ALL),
    OpInfo("unflatten", lambda t, x, **kw: x.unflatten(**kw), _unflatten_samples, dtypes=ALL,
           errors=_unflatten_errors),
    OpInfo("squeeze", lambda t, x, **kw: t.squeeze(x, **kw), _squeeze_samples, dtypes=ALL,
           errors=_squeeze_errors),
    OpInfo("unsqueeze", lambda t, x, dim: x.unsqueeze(dim), _unsqueeze_samples, dtypes=ALL,
           errors=_unsqueeze_errors),
    OpInfo("transpose", lambda t, x, **kw: t.transpose(x, **kw), _transpose_samples, dtypes=ALL,
           errors=_transpose_errors),
    OpInfo("swapaxes", lambda t, x, dim0, dim1: x.swapaxes(dim0, dim1), _transpose_samples,
           dtypes=ALL),
    OpInfo("swapdims", lambda t, x, dim0, dim1: t.swapdims(x, dim0, dim1), _transpose_samples,
           dtypes=ALL),
    OpInfo("t", lambda t, x: x.t(), _t_samples, dtypes=ALL, errors=_t_errors),
    OpInfo("T", _transpose_all, _T_samples, dtypes=ALL),
    OpInfo("mT", lambda t, x: x.mT, _mT_samples, dtypes=ALL, errors=_mT_errors),
    OpInfo("mH", lambda t, x: x.mH, _mT_samples, dtypes=ALL),
    OpInfo("movedim", lambda t, x, **kw: t.movedim(x, **kw), _movedim_samples, dtypes=ALL,
           errors=_movedim_errors),
    OpInfo("moveaxis", lambda t, x, source, destination: x.moveaxis(source, destination),
           _movedim_samples, dtypes=ALL),
    OpInfo("expand_as", lambda t, x, y: x.expand_as(y), _expand_as_samples, dtypes=ALL, grad=False),
    OpInfo("view_as", lambda t, x, y: x.view_as(y), _view_as_samples, dtypes=ALL, grad=False),
    OpInfo("reshape_as", lambda t, x, y: x.reshape_as(y), _as_other_samples, dtypes=ALL,
           grad=False),
    OpInfo("narrow", lambda t, x, **kw: t.narrow(x, **kw), _narrow_samples, dtypes=ALL,
           errors=_narrow_errors),
    OpInfo("select", lambda t, x, **kw: t.select(x, **kw), _select_samples, dtypes=ALL,
           errors=_select_errors),
    OpInfo("split", lambda t, x, **kw: t.split(x, **kw), _split_samples, dtypes=ALL,
           errors=_split_errors),
    OpInfo("split_method", lambda t, x, split_size_or_sections, dim=0:
           x.split(split_size_or_sections, dim), _split_samples, dtypes=("float32", "int64")),
    OpInfo("split_size_kw", lambda t, x, split_size_or_sections, dim=0:
           x.split(split_size=split_size_or_sections, dim=dim), _split_samples,
           dtypes=("float32",)),
    OpInfo("chunk", lambda t, x, **kw: t.chunk(x, **kw), _chunk_samples, dtypes=ALL,
           errors=_chunk_errors),
    OpInfo("tensor_split", lambda t, x, indices_or_sections, dim=0:
           t.tensor_split(x, indices_or_sections, dim), _tensor_split_samples,
           dtypes=ALL, errors=_tensor_split_errors),
    OpInfo("unbind", lambda t, x, **kw: t.unbind(x, **kw), _unbind_samples, dtypes=ALL,
           errors=_unbind_errors),
    OpInfo("iter", lambda t, x: list(x), _t_samples_nonscalar, dtypes=("float32", "int64", "bool")),
    OpInfo("as_strided", lambda t, x, **kw: t.as_strided(x, **kw), _as_strided_samples,
           dtypes=ALL, errors=_as_strided_errors),
    OpInfo("unfold", lambda t, x, **kw: x.unfold(**kw), _unfold_samples, dtypes=ALL,
           errors=_unfold_errors),
    OpInfo("diagonal", lambda t, x, **kw: t.diagonal(x, **kw), _diagonal_samples, dtypes=ALL,
           errors=_diagonal_errors),
]
