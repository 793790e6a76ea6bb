"""OpInfo entries for linear algebra: matmul and its relatives, einsum, F.linear/bilinear."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import ALL, FLOATS, INTS, ErrorCase, OpInfo, Sample, make

MM_DTYPES = INTS + FLOATS
F32, F64 = np.float32, np.float64


def _t(shape, dtype, rng):
    """A transposed (F-ordered) view with logical shape ``shape``."""
    return make(shape[::-1], dtype, rng).T


def _bt(shape, dtype, rng):
    """A batched array whose last two dims are a transposed view."""
    return np.swapaxes(make(shape[:-2] + (shape[-1], shape[-2]), dtype, rng), -1, -2)


# ------------------------------------------------------------------------------ matmul
MATMUL_SHAPES = [
    ((4,), (4,), "1d.1d dot"),
    ((3, 4), (4,), "2d.1d mv"),
    ((4,), (4, 5), "1d.2d"),
    ((3, 4), (4, 5), "2d.2d mm"),
    ((2, 3, 4), (2, 4, 5), "3d.3d bmm"),
    ((2, 1, 3, 4), (3, 4, 2), "batch broadcast"),
    ((2, 3, 4), (4,), "3d.1d"),
    ((4,), (2, 4, 5), "1d.3d"),
    ((2, 3, 4), (4, 5), "3d.2d folded"),
    ((2, 2, 3, 4), (4, 2), "4d.2d folded"),
    ((3, 4), (2, 4, 5), "2d.3d"),
    ((1, 3, 4), (2, 4, 2), "size-1 batch"),
    ((3, 0), (0, 4), "k=0 gives zeros"),
    ((0, 4), (4, 5), "m=0"),
    ((0, 3, 4), (0, 4, 2), "empty batch"),
    ((2, 0, 3), (3, 4), "folded empty rows"),
    ((0,), (0,), "empty dot"),
]


def _matmul_samples(dtype, rng):
    for sa, sb, desc in MATMUL_SHAPES:
        yield Sample((make(sa, dtype, rng), make(sb, dtype, rng)), desc=desc)
    yield Sample((_t((3, 4), dtype, rng), _t((4, 5), dtype, rng)), desc="transposed views")
    yield Sample((_t((3, 4), dtype, rng), make((4,), dtype, rng)), desc="transposed mat . vec")
    yield Sample((_bt((2, 3, 4), dtype, rng), _bt((2, 4, 5), dtype, rng)),
                 desc="batched transposed views")
    yield Sample((_bt((2, 3, 4), dtype, rng), make((4, 5), dtype, rng)),
                 desc="transposed 3d . 2d (fold copies)")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),
                  make((4, 5), dtype, rng, noncontig=True)), desc="non-contiguous",
                 noncontig=True)
    yield Sample((make((2, 3, 4), dtype, rng, noncontig=True), make((4,), dtype, rng,
                                                                    noncontig=True)),
                 desc="non-contiguous 3d.1d", noncontig=True)


def _matmul_errors():
    f, d = F32, F64
    z = np.zeros
    return [
        ErrorCase((z((2, 3), f), z((4, 5), f)), exc=RuntimeError,
                  match=r"\[matmul\] mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
        ErrorCase((z((2, 3), f), z((3, 4), d)), exc=RuntimeError,
                  match=r"expected m1 and m2 to have the same dtype, but got: float != double"),
        ErrorCase((z((2, 3), f), z((3, 4), np.int64)), exc=RuntimeError,
                  match=r"same dtype, but got: float != long int"),
        ErrorCase((z((3,), f), z((4,), f)), exc=RuntimeError,
                  match=r"inconsistent tensor size, expected tensor \[3\] and src \[4\]"),
        ErrorCase((z((3,), f), z((3,), d)), exc=RuntimeError,
                  match=r"dot : expected both vectors to have same dtype, but found Float and "
                        r"Double"),
        ErrorCase((z((2, 3), f), z((4,), f)), exc=RuntimeError,
                  match=r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
        ErrorCase((z((3,), f), z((4, 5), f)), exc=RuntimeError,
                  match=r"mat1 and mat2 shapes cannot be multiplied \(1x3 and 4x5\)"),
        ErrorCase((z((2, 2, 3), f), z((2, 4, 5), f)), exc=RuntimeError,
                  match=r"Expected size for first two dimensions of batch2 tensor to be: "
                        r"\[2, 3\] but got: \[2, 4\]"),
        ErrorCase((z((2, 2, 3), f), z((3, 3, 4), f)), exc=RuntimeError,
                  match=r"The size of tensor a \(2\) must match the size of tensor b \(3\)"),
        ErrorCase((z((), f), z((3,), f)), exc=RuntimeError,
                  match=r"both arguments to matmul need to be at least 1D, but they are 0D and "
                        r"1D"),
        ErrorCase((z((2, 3), bool), z((3, 2), bool)), exc=NotImplementedError,
                  match=r"not implemented for 'Bool'"),
        ErrorCase((z((2, 3, 4), f), z((5, 6), f)), exc=RuntimeError,
                  match=r"mat1 and mat2 shapes cannot be multiplied \(6x4 and 5x6\)"),
    ]


def _pair(sa, sb, noncontig_too=True, transposed=True):
    def gen(dtype, rng):
        yield Sample((make(sa, dtype, rng), make(sb, dtype, rng)), desc=f"{sa}.{sb}")
        if transposed and len(sa) >= 2:
            yield Sample((_bt(sa, dtype, rng), make(sb, dtype, rng)), desc="transposed lhs")
        if noncontig_too:
            yield Sample((make(sa, dtype, rng, noncontig=True),
                          make(sb, dtype, rng, noncontig=True)), desc="non-contiguous",
                         noncontig=True)
        empty_a = tuple(0 if i == len(sa) - 1 else n for i, n in enumerate(sa))
        empty_b = tuple(0 if i == len(sb) - (2 if len(sb) > 1 else 1) else n
                        for i, n in enumerate(sb))
        yield Sample((make(empty_a, dtype, rng), make(empty_b, dtype, rng)), desc="k=0")
    return gen


def _mm_errors():
    z = np.zeros
    return [
        ErrorCase((z((2, 3), F32), z((4, 5), F32)), exc=RuntimeError,
                  match=r"\[mm\] mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
        ErrorCase((z((3,), F32), z((3, 4), F32)), exc=RuntimeError,
                  match=r"\[mm\] self must be a matrix"),
        ErrorCase((z((2, 3), F32), z((3, 4), F64)), exc=RuntimeError,
                  match=r"float != double"),
    ]


def _bmm_errors():
    z = np.zeros
    return [
        ErrorCase((z((2, 3), F32), z((3, 4), F32)), exc=RuntimeError,
                  match=r"\[bmm\] batch1 must be a 3D tensor"),
        ErrorCase((z((2, 2, 3), F32), z((3, 3, 4), F32)), exc=RuntimeError,
                  match=r"Expected size for first two dimensions of batch2 tensor to be: "
                        r"\[2, 3\] but got: \[3, 3\]"),
        ErrorCase((z((2, 2, 3), F32), z((2, 3, 4), F64)), exc=RuntimeError,
                  match=r"expected scalar type Float but found Double"),
    ]


def _mv_errors():
    z = np.zeros
    return [
        ErrorCase((z((2, 3), F32), z((4,), F32)), exc=RuntimeError,
                  match=r"\[mv\] size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
        ErrorCase((z((2, 3), F32), z((3, 1), F32)), exc=RuntimeError,
                  match=r"vector \+ matrix @ vector expected, got 1, 2, 2"),
        ErrorCase((z((2, 3), F32), z((3,), F64)), exc=RuntimeError,
                  match=r"addmv input tensors must have the same dtype"),
    ]


def _dot_errors(op):
    def gen():
        z = np.zeros
        return [
            ErrorCase((z((2, 3), F32), z((2, 3), F32)), exc=RuntimeError,
                      match=rf"\[{op}\] 1D tensors expected, but got 2D and 2D tensors"),
            ErrorCase((z((3,), F32), z((4,), F32)), exc=RuntimeError,
                      match=r"inconsistent tensor size"),
            ErrorCase((z((3,), F32), z((3,), F64)), exc=RuntimeError,
                      match=r"expected both vectors to have same dtype, but found Float and "
                            r"Double"),
        ]
    return gen


def _outer_samples(dtype, rng):
    yield Sample((make((3,), dtype, rng), make((4,), dtype, rng)), desc="3x4")
    yield Sample((make((0,), dtype, rng), make((4,), dtype, rng)), desc="empty")
    yield Sample((make((3,), dtype, rng, noncontig=True), make((2,), dtype, rng)),
                 desc="non-contiguous", noncontig=True)


def _outer_promote(dtype, rng):
    yield Sample((make((3,), dtype, rng), make((4,), "float32", rng)), desc="vs float32",
                 grad=False)
    yield Sample((make((3,), dtype, rng), make((4,), "int64", rng)), desc="vs int64", grad=False)


def _inner_samples(dtype, rng):
    yield Sample((make((2, 3), dtype, rng), make((4, 3), dtype, rng)), desc="2d.2d")
    yield Sample((make((3,), dtype, rng), make((2, 5, 3), dtype, rng)), desc="1d.3d")
    yield Sample((make((), dtype, rng), make((2, 3), dtype, rng)), desc="0-d scales")
    yield Sample((_t((2, 3), dtype, rng), make((3,), dtype, rng)), desc="transposed")


def _tensordot_samples(dtype, rng):
    yield Sample((make((2, 3, 4), dtype, rng), make((3, 4, 5), dtype, rng)), {"dims": 2},
                 desc="dims=2")
    yield Sample((make((2, 3, 4), dtype, rng), make((4, 3, 5), dtype, rng)),
                 {"dims": ([1, 2], [1, 0])}, desc="dim lists")
    yield Sample((make((2, 3), dtype, rng), make((4, 5), dtype, rng)), {"dims": 0},
                 desc="dims=0 (outer)")
    yield Sample((_bt((2, 3, 4), dtype, rng), make((3, 5), dtype, rng)),
                 {"dims": ([-2], [0])}, desc="negative dim, transposed")


def _tensordot_errors():
    z = np.zeros
    return [
        ErrorCase((z((2, 3, 4), F32), z((3, 5, 5), F32)), {"dims": 2}, exc=RuntimeError,
                  match=r"contracted dimensions need to match, but first has size 4 in dim -1|"
                        r"contracted dimensions need to match, but first has size 4"),
        ErrorCase((z((2, 3, 4), F32), z((3, 4, 5), F64)), {"dims": 2}, exc=RuntimeError,
                  match=r"both inputs should have same dtype"),
    ]


# ------------------------------------------------------------------------------ add*mm
def _addmm_samples(dtype, rng):
    a, b = make((2, 3), dtype, rng), make((3, 4), dtype, rng)
    yield Sample((make((2, 4), dtype, rng), a, b), desc="full input")
    yield Sample((make((4,), dtype, rng), a, b), desc="broadcast input row")
    yield Sample((make((2, 1), dtype, rng), a, b), {"beta": 2, "alpha": 3}, desc="beta, alpha")
    if dtype in FLOATS:
        yield Sample((make((), dtype, rng), a, b), {"beta": 0.5, "alpha": -1.5},
                     desc="0-d input, float scalars")
        nan = np.full((2, 4), np.nan).astype(make((1,), dtype, rng).dtype)
        yield Sample((nan, a, b), {"beta": 0}, desc="beta=0 ignores NaN input", grad=False)
    yield Sample((make((2, 4), dtype, rng), _t((2, 3), dtype, rng), _t((3, 4), dtype, rng)),
                 desc="transposed mats")
    yield Sample((make((2, 4), dtype, rng), make((2, 0), dtype, rng), make((0, 4), dtype, rng)),
                 {"alpha": 2}, desc="k=0")


def _addmm_errors():
    z = np.zeros
    return [
        ErrorCase((z((2, 5), F32), z((2, 3), F32), z((4, 5), F32)), exc=RuntimeError,
                  match=r"\[addmm\] mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
        ErrorCase((z((3, 5), F32), z((2, 3), F32), z((3, 5), F32)), exc=RuntimeError,
                  match=r"The expanded size of the tensor \(2\) must match the existing size "
                        r"\(3\)"),
        ErrorCase((z((2, 5), F64), z((2, 3), F32), z((3, 5), F32)), exc=RuntimeError,
                  match=r"self and mat2 must have the same dtype, but got Double and Float"),
    ]


def _addmv_samples(dtype, rng):
    yield Sample((make((2,), dtype, rng), make((2, 3), dtype, rng), make((3,), dtype, rng)),
                 desc="plain")
    yield Sample((make((1,), dtype, rng), _t((2, 3), dtype, rng), make((3,), dtype, rng)),
                 {"beta": 2, "alpha": 3}, desc="broadcast input, transposed mat")


def _baddbmm_samples(dtype, rng):
    a, b = make((2, 3, 4), dtype, rng), make((2, 4, 5), dtype, rng)
    yield Sample((make((2, 3, 5), dtype, rng), a, b), desc="plain")
    yield Sample((make((3, 1), dtype, rng), a, b), {"beta": 2, "alpha": 3},
                 desc="broadcast input, beta/alpha")
    yield Sample((make((2, 3, 5), dtype, rng), _bt((2, 3, 4), dtype, rng),
                  _bt((2, 4, 5), dtype, rng)), desc="transposed batches")
    yield Sample((make((2, 3, 5), dtype, rng), make((2, 3, 0), dtype, rng),
                  make((2, 0, 5), dtype, rng)), desc="k=0")


def _addbmm_samples(dtype, rng):
    a, b = make((2, 3, 4), dtype, rng), make((2, 4, 5), dtype, rng)
    yield Sample((make((3, 5), dtype, rng), a, b), desc="plain")
    yield Sample((make((5,), dtype, rng), a, b), {"beta": 2, "alpha": 3}, desc="beta/alpha")
    yield Sample((make((3, 5), dtype, rng), _bt((2, 3, 4), dtype, rng),
                  make((2, 4, 5), dtype, rng)), {"beta": 0}, desc="beta=0, transposed")
    yield Sample((make((3, 5), dtype, rng), make((0, 3, 4), dtype, rng),
                  make((0, 4, 5), dtype, rng)), desc="no batches")


# ------------------------------------------------------------------------------ einsum
EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("ii,i->i", [(3, 3), (3,)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->", [(2,), (3,)]),
    ("...ij,...jk", [(5, 2, 3), (3, 4)]),
    ("i...,i...", [(2, 3), (2, 1, 1)]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 2), (2, 2)]),
    ("BcA", [(2, 3, 4)]),
    ("b h i d, b h j d -> b h i j", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    ("ij->i...", [(2, 3)]),
    # PyTorch's integer result dtype depends on which labels it sums with sum() (int64)
    ("ij,jk->ik", [(2, 1), (1, 3)]),
    ("ij->i", [(2, 1)]),
    ("ij,k->ik", [(2, 1), (3,)]),
    ("ij,k->k", [(2, 1), (3,)]),
]


def _einsum_samples(dtype, rng):
    for eq, shapes in EINSUM_CASES:
        yield Sample(tuple(make(s, dtype, rng) for s in shapes), {"eq": eq},
                     desc=f"{eq} {shapes}")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), _t((4, 2), dtype, rng)),
                 {"eq": "ij,jk->ik"}, desc="non-contiguous and transposed", noncontig=True)


def _einsum_sublist_samples(dtype, rng):
    a, b = make((2, 3), dtype, rng), make((3, 4), dtype, rng)
    yield Sample((a, [0, 1], b, [1, 2], [0, 2]), desc="sublists with output")
    yield Sample((a, [0, Ellipsis], b, [Ellipsis, 2]), desc="sublists with ellipsis")


def _einsum_errors():
    z = np.zeros
    a, b = z((2, 3), F32), z((3, 4), F32)
    return [
        ErrorCase((z((2, 3), F32), z((4, 5), F32)), {"eq": "ij,jk->ik"}, exc=RuntimeError,
                  match=r"subscript j has size 4 for operand 1 which does not broadcast with "
                        r"previously seen size 3"),
        ErrorCase((a,), {"eq": "ij,jk->ik"}, exc=RuntimeError,
                  match=r"fewer operands were provided than specified in the equation"),
        ErrorCase((a, b), {"eq": "ij"}, exc=RuntimeError,
                  match=r"more operands were provided than specified in the equation"),
        ErrorCase((z((2, 3), F32), z((3,), F32)), {"eq": "ij,jk"}, exc=RuntimeError,
                  match=r"the number of subscripts in the equation \(2\) does not match the "
                        r"number of dimensions \(1\) for operand 1 and no ellipsis was given"),
        ErrorCase((a, z((3, 4), F64)), {"eq": "ij,jk->ik"}, exc=RuntimeError,
                  match=r"expected scalar type Float but found Double"),
        ErrorCase((a, b), {"eq": "ij,jk->iz"}, exc=RuntimeError,
                  match=r"output subscript z does not appear in the equation for any input"),
        ErrorCase((z((3,), F32),), {"eq": "i->ii"}, exc=RuntimeError,
                  match=r"output subscript i appears more than once in the output"),
        ErrorCase((a,), {"eq": "i1"}, exc=RuntimeError,
                  match=r"invalid subscript given at index 1 in the equation string"),
        ErrorCase((z((2,), F32),), {"eq": "i..j"}, exc=RuntimeError,
                  match=r"found '.' for operand 0 that is not part of any ellipsis"),
        ErrorCase((a, z((4, 3), F32)), {"eq": "...i,...i"}, exc=RuntimeError,
                  match=r"dimension 0 covered by ellipsis in operand 1has size 4"),
    ]


# ------------------------------------------------------------------------------ linear
def _linear_samples(dtype, rng):
    w, b = make((5, 4), dtype, rng), make((5,), dtype, rng)
    yield Sample((make((3, 4), dtype, rng), w, b), desc="2d with bias")
    yield Sample((make((3, 4), dtype, rng), w), desc="2d without bias")
    yield Sample((make((2, 3, 4), dtype, rng), w, b), desc="3d input")
    yield Sample((make((2, 1, 3, 4), dtype, rng), w), desc="4d input, no bias")
    yield Sample((make((4,), dtype, rng), w, b), desc="1d input")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), make((5, 4), dtype, rng,
                                                                 noncontig=True), b),
                 desc="non-contiguous", noncontig=True)
    yield Sample((_bt((2, 3, 4), dtype, rng), _t((5, 4), dtype, rng), b),
                 desc="transposed input and weight")
    yield Sample((make((3, 4), dtype, rng), make((4,), dtype, rng)), desc="1d weight")
    yield Sample((make((3, 4), dtype, rng), w, make((1,), dtype, rng)), desc="broadcast bias")
    yield Sample((make((0, 4), dtype, rng), w, b), desc="empty batch")
    yield Sample((make((3, 0), dtype, rng), make((5, 0), dtype, rng), b), desc="in=0")


def _linear_errors():
    z = np.zeros
    return [
        ErrorCase((z((2, 3), F32), z((4, 5), F32)), exc=RuntimeError,
                  match=r"\[linear\] mat1 and mat2 shapes cannot be multiplied \(2x3 and 5x4\)"),
        ErrorCase((z((2, 3), F32), z((4, 3), F64)), exc=RuntimeError,
                  match=r"expected m1 and m2 to have the same dtype, but got: float != double"),
        ErrorCase((z((2, 3), F32), z((4, 3), F32), z((4,), F64)), exc=RuntimeError,
                  match=r"self and mat2 must have the same dtype, but got Double and Float"),
        ErrorCase((z((2, 3), F32), z((4, 3), F32), z((5,), F32)), exc=RuntimeError,
                  match=r"The expanded size of the tensor \(4\) must match the existing size "
                        r"\(5\)"),
        ErrorCase((z((), F32), z((4, 3), F32)), exc=RuntimeError,
                  match=r"both arguments to linear need to be at least 1D, but they are 0D and "
                        r"2D"),
    ]


def _bilinear_samples(dtype, rng):
    yield Sample((make((3, 4), dtype, rng), make((3, 2), dtype, rng),
                  make((5, 4, 2), dtype, rng), make((5,), dtype, rng)), desc="2d with bias")
    yield Sample((make((2, 3, 4), dtype, rng), make((2, 3, 2), dtype, rng),
                  make((5, 4, 2), dtype, rng)), desc="3d without bias")


def _full_input(gen):
    """In-place variants need an input of the output's shape (no broadcasting of self)."""
    def samples(dtype, rng):
        for s in gen(dtype, rng):
            x, a, b = s.args
            if b.ndim == 1:
                out = a.shape[:-1]
            elif a.ndim == 3 and x.ndim == 2:  # addbmm reduces the batch
                out = a.shape[1:2] + b.shape[-1:]
            else:
                out = a.shape[:-1] + b.shape[-1:]
            if x.shape == out:
                yield s
    return samples


def _inplace(fn_name):
    return lambda t, x, *a, **k: getattr(x.clone(), fn_name)(*a, **k)


def _linear_fn(t, *args):
    return t.nn.functional.linear(*args)


OPINFOS = [
    OpInfo("matmul", lambda t, x, y: t.matmul(x, y), _matmul_samples, dtypes=MM_DTYPES,
           errors=_matmul_errors, sum_of_products=True),
    OpInfo("matmul_operator", lambda t, x, y: x @ y, _matmul_samples, dtypes=FLOATS,
           sum_of_products=True),
    OpInfo("matmul_method", lambda t, x, y: x.matmul(y), _pair((3, 4), (4, 2)),
           dtypes=("float32",)),
    OpInfo("rmatmul", lambda t, x, y: y.__rmatmul__(x), _pair((3, 4), (4, 2)),
           dtypes=("float32", "float64")),
    OpInfo("mm", lambda t, x, y: t.mm(x, y), _pair((3, 4), (4, 5)), dtypes=MM_DTYPES,
           errors=_mm_errors, sum_of_products=True),
    OpInfo("bmm", lambda t, x, y: t.bmm(x, y), _pair((2, 3, 4), (2, 4, 5)), dtypes=MM_DTYPES,
           errors=_bmm_errors, sum_of_products=True),
    OpInfo("mv", lambda t, x, y: t.mv(x, y), _pair((3, 4), (4,)), dtypes=MM_DTYPES,
           errors=_mv_errors, sum_of_products=True),
    OpInfo("dot", lambda t, x, y: t.dot(x, y), _pair((5,), (5,), transposed=False),
           dtypes=MM_DTYPES, errors=_dot_errors("dot"), sum_of_products=True),
    OpInfo("vdot", lambda t, x, y: t.vdot(x, y), _pair((5,), (5,), transposed=False),
           dtypes=("int64",) + FLOATS, errors=_dot_errors("vdot")),
    OpInfo("inner", lambda t, x, y: t.inner(x, y), _inner_samples, dtypes=MM_DTYPES,
           sum_of_products=True),
    OpInfo("outer", lambda t, x, y: t.outer(x, y), _outer_samples, dtypes=ALL),
    OpInfo("ger", lambda t, x, y: x.ger(y), _outer_samples, dtypes=("int32",) + FLOATS),
    OpInfo("outer_promote", lambda t, x, y: t.outer(x, y), _outer_promote,
           dtypes=("int32", "float16", "float64"), grad=False),
    OpInfo("tensordot", lambda t, x, y, dims: t.tensordot(x, y, dims=dims), _tensordot_samples,
           dtypes=("int64",) + FLOATS, errors=_tensordot_errors, sum_of_products=True),
    OpInfo("addmm", lambda t, x, a, b, **k: t.addmm(x, a, b, **k), _addmm_samples,
           dtypes=MM_DTYPES, errors=_addmm_errors),
    OpInfo("addmm_", _inplace("addmm_"), _full_input(_addmm_samples), dtypes=("int64",) + FLOATS),
    OpInfo("addmv", lambda t, x, a, b, **k: t.addmv(x, a, b, **k), _addmv_samples,
           dtypes=MM_DTYPES),
    OpInfo("addmv_", _inplace("addmv_"), _full_input(_addmv_samples), dtypes=("float64",)),
    OpInfo("addbmm_", _inplace("addbmm_"), _full_input(_addbmm_samples),
           dtypes=("float32", "float64")),
    OpInfo("baddbmm", lambda t, x, a, b, **k: t.baddbmm(x, a, b, **k), _baddbmm_samples,
           dtypes=MM_DTYPES),
    OpInfo("baddbmm_", _inplace("baddbmm_"), _full_input(_baddbmm_samples),
           dtypes=("float32", "float64")),
    OpInfo("addbmm", lambda t, x, a, b, **k: t.addbmm(x, a, b, **k), _addbmm_samples,
           dtypes=("int64",) + FLOATS),
    OpInfo("einsum", lambda t, *ops, eq: t.einsum(eq, *ops), _einsum_samples,
           dtypes=("int32", "int64") + FLOATS, errors=_einsum_errors),
    OpInfo("einsum_list", lambda t, *ops, eq: t.einsum(eq, list(ops)), _einsum_samples,
           dtypes=("float64",)),
    OpInfo("einsum_sublist", lambda t, *args: t.einsum(*args), _einsum_sublist_samples,
           dtypes=("float32", "float64")),
    OpInfo("linear", _linear_fn, _linear_samples, dtypes=MM_DTYPES, errors=_linear_errors,
           sum_of_products=True),
    OpInfo("bilinear", lambda t, *a: t.nn.functional.bilinear(*a), _bilinear_samples,
           dtypes=FLOATS),
]
