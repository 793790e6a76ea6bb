"""OpInfo entries for ``nn.functional`` convolution, padding, pooling, embedding, one_hot."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import FLOATS, ErrorCase, OpInfo, Sample, make

F32 = np.float32


def _f(name):
    return lambda lib, *a, **k: getattr(lib.nn.functional, name)(*a, **k)


# ---------------------------------------------------------------------------------- conv
def _conv2d_samples(dtype, rng):
    def s(x, w, b=None, desc="", **kw):
        args = (make(x, dtype, rng), make(w, dtype, rng)) + ((make(b, dtype, rng),) if b else ())
        return Sample(args, kw, desc=desc or str(kw))

    yield s((1, 2, 4, 4), (3, 2, 2, 2), (3,), desc="bias")
    yield s((2, 2, 5, 4), (2, 2, 3, 2), stride=2)
    yield s((1, 2, 5, 5), (2, 2, 3, 3), stride=(2, 1), padding=(1, 2))
    yield s((1, 2, 6, 5), (2, 2, 2, 2), dilation=(2, 1), padding=1)
    yield s((1, 4, 4, 4), (4, 2, 2, 2), (4,), groups=2)
    yield s((1, 3, 4, 4), (3, 1, 3, 3), groups=3, padding="same")
    yield s((1, 2, 5, 4), (2, 2, 2, 3), padding="same", dilation=2, desc="same even kernel")
    yield s((1, 2, 4, 4), (2, 2, 3, 3), padding="valid")
    yield s((2, 4, 4), (2, 2, 2, 2), (2,), groups=1, desc="unbatched")
    yield s((0, 2, 4, 4), (2, 2, 2, 2), desc="empty batch")
    yield Sample((make((1, 2, 4, 5), dtype, rng, noncontig=True),
                  make((2, 2, 2, 2), dtype, rng, noncontig=True)), {"stride": 2},
                 desc="non-contiguous", noncontig=True)
    if dtype == "float32":
        yield s((2, 8, 12, 12), (6, 8, 3, 3), (6,), stride=1, padding=1, desc="larger")


def _conv1d_samples(dtype, rng):
    yield Sample((make((2, 2, 7), dtype, rng), make((3, 2, 3), dtype, rng),
                  make((3,), dtype, rng)), {"stride": 2, "padding": 1}, desc="bias stride pad")
    yield Sample((make((1, 4, 6), dtype, rng), make((4, 2, 2), dtype, rng)),
                 {"groups": 2, "dilation": 2}, desc="groups dilation")
    yield Sample((make((2, 6), dtype, rng), make((2, 2, 3), dtype, rng)),
                 {"padding": "same"}, desc="unbatched same")


def _conv_errors():
    z = np.zeros
    return [
        ErrorCase((z((1, 2, 5, 5), F32), z((4, 3, 3, 3), F32)), exc=RuntimeError,
                  match=r"\[conv2d\].*weight of size \[4, 3, 3, 3\].*input\[1, 2, 5, 5\] to have "
                        r"3 channels, but got 2"),
        ErrorCase((z((1, 3, 2, 2), F32), z((4, 3, 3, 3), F32)), exc=RuntimeError,
                  match=r"\[conv2d\].*Kernel size can't be greater than actual input size"),
        ErrorCase((z((1, 3, 5, 5), F32), z((4, 3, 3, 3), F32)), {"stride": 2, "padding": "same"},
                  exc=RuntimeError, match=r"not supported for strided convolutions"),
        ErrorCase((z((1, 4, 5, 5), F32), z((4, 2, 3, 3), F32)), {"groups": 3},
                  exc=RuntimeError, match=r"expected weight to be divisible by 3"),
        ErrorCase((z((3, 5, 5, 5), F32), z((4, 3, 3, 3), F32)), {"padding": "foo"},
                  exc=RuntimeError, match=r"Invalid padding string"),
        ErrorCase((z((5, 5), F32), z((4, 3, 3, 3), F32)), exc=RuntimeError,
                  match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"),
        ErrorCase((z((1, 3, 5, 5)), z((4, 3, 3, 3), F32)), exc=RuntimeError,
                  match=r"\[conv2d\] expected scalar type"),
    ]


def _conv2d_double_backward(dtype, rng):
    yield Sample((make((1, 2, 4, 3), dtype, rng), make((2, 1, 2, 2), dtype, rng)),
                 {"stride": (2, 1), "padding": 1, "groups": 2}, desc="double backward")


def gradgrad(name):
    """``name``'s gradients as outputs, so the grad tests check double backward.

    Without inputs that require grad (the value tests) it is just the function.
    """
    def fn(lib, *args, **kw):
        f = getattr(lib.nn.functional, name)
        wrt = [a for a in args if getattr(a, "requires_grad", False)]
        if not wrt:
            return f(*args, **kw)
        with lib.enable_grad():  # finite differences evaluate under no_grad
            out = f(*args, **kw)
            out = out[0] if isinstance(out, tuple) else out
            # the gradient of sum(out**2)/2: grad_output = out keeps every path second order
            return lib.autograd.grad([out], wrt, [out], create_graph=True)
    return fn


def _double_backward_samples(kind):
    def gen(dtype, rng):
        if kind == "pad":
            x = make((1, 2, 3, 3), dtype, rng)
            for mode in ("constant", "reflect", "replicate", "circular"):
                yield Sample((x, (1, 2, -1, 1)), {"mode": mode}, desc=mode)
        elif kind == "max_pool2d":
            yield Sample((make((1, 2, 4, 4), dtype, rng), 3), {"stride": 1, "padding": 1})
        elif kind == "avg_pool2d":
            yield Sample((make((1, 2, 4, 4), dtype, rng), 3),
                         {"stride": 2, "padding": 1, "ceil_mode": True})
        elif kind == "adaptive_avg_pool2d":
            yield Sample((make((1, 2, 4, 5), dtype, rng), (3, 2)))
        elif kind == "embedding":
            idx = np.array([[0, 2, 2], [3, 1, 2]], dtype=np.int64)
            yield Sample((idx, make((4, 3), dtype, rng)), desc="plain")
    return gen


def _conv_transpose2d_samples(dtype, rng):
    def s(x, w, b=None, desc="", **kw):
        args = (make(x, dtype, rng), make(w, dtype, rng)) + ((make(b, dtype, rng),) if b else ())
        return Sample(args, kw, desc=desc or str(kw))

    yield s((1, 2, 3, 3), (2, 3, 2, 2), (3,), desc="bias")
    yield s((2, 2, 3, 4), (2, 2, 3, 2), stride=2, padding=1, output_padding=1)
    yield s((1, 4, 3, 3), (4, 1, 2, 3), groups=2, stride=(1, 2), dilation=(2, 1))
    yield s((2, 3, 3), (2, 2, 3, 3), (2,), padding=1, desc="unbatched")
    # output_padding >= stride: the last output rows get no input (the adjoint crops)
    yield s((1, 2, 3, 2), (2, 1, 2, 2), dilation=2, output_padding=1, desc="op >= stride")


def _conv_transpose1d_samples(dtype, rng):
    yield Sample((make((2, 2, 5), dtype, rng), make((2, 3, 3), dtype, rng),
                  make((3,), dtype, rng)), {"stride": 3, "padding": 1, "output_padding": 2},
                 desc="stride output_padding")


# ---------------------------------------------------------------------------------- pad
def _pad_samples(mode):
    def gen(dtype, rng):
        x3 = make((2, 3, 4), dtype, rng)
        x4 = make((1, 2, 3, 4), dtype, rng)
        yield Sample((x3,), {"pad": (1, 2), "mode": mode}, desc="last dim")
        yield Sample((x4,), {"pad": (2, 1, 1, 2), "mode": mode}, desc="2 dims")
        yield Sample((x4,), {"pad": (-1, 2, 0, 1), "mode": mode}, desc="negative")
        yield Sample((make((3, 4), dtype, rng),), {"pad": (3, 3), "mode": mode}, desc="2-d")
        yield Sample((make((1, 2, 3, 4), dtype, rng, noncontig=True),),
                     {"pad": (1, 1, 2, 0), "mode": mode}, desc="non-contiguous")
        if mode == "constant":
            yield Sample((x3,), {"pad": (1, 1, 0, 1, 2, 0), "value": 1.5}, desc="3 dims value")
            yield Sample((make((), dtype, rng),), {"pad": ()}, desc="0-d no pad")
            yield Sample((make((0, 3), dtype, rng),), {"pad": (1, 1, 1, 0)}, desc="empty")
            yield Sample((x4,), {"pad": (-2, -1)}, desc="crop only")
        else:
            yield Sample((make((1, 2, 2, 3, 2), dtype, rng),),
                         {"pad": (1, 1, 1, 0, 0, 1), "mode": mode}, desc="3 dims")
        if mode in ("reflect", "replicate"):
            # negative pads: PyTorch reflects/replicates about the original borders
            yield Sample((x3,), {"pad": (3, -3), "mode": mode}, desc="crop one side")
            yield Sample((x4,), {"pad": (-3, 1, 1, -2), "mode": mode}, desc="crop both")
    return gen


def _pad_errors():
    z = np.zeros
    return [
        ErrorCase((z((1, 2, 3), F32),), {"pad": (3, 3), "mode": "reflect"}, exc=RuntimeError,
                  match=r"\[pad\].*Padding size should be less than the corresponding input "
                        r"dimension, but got: padding \(3, 3\) at dimension 2 of input "
                        r"\[1, 2, 3\]"),
        ErrorCase((z((2, 3), F32),), {"pad": (1, 1, 1)}, exc=RuntimeError,
                  match=r"divisible by 2"),
        ErrorCase((z((1, 2, 3), F32),), {"pad": (4, 4), "mode": "circular"}, exc=RuntimeError,
                  match=r"wrapping around more than once"),
        ErrorCase((z((3,), F32),), {"pad": (1, 1), "mode": "reflect"},
                  exc=NotImplementedError, match=r"Padding size 2 is not supported for 1D"),
        ErrorCase((z((2, 3), F32),), {"pad": (-2, -2)}, exc=RuntimeError,
                  match=r"narrow\(\): length must be non-negative"),
        ErrorCase((z((2, 3), F32),), {"pad": (-1, -2), "mode": "replicate"},
                  exc=RuntimeError, match=r"input \(W: 3\) is too small. Calculated output W: 0"),
        ErrorCase((z((1, 2, 3), F32),), {"pad": (1, 1), "mode": "reflect", "value": 1.0},
                  exc=RuntimeError, match=r"doesn't take in value argument"),
        ErrorCase((z((1, 2, 3), F32),), {"pad": (1, 1), "mode": "foo"},
                  exc=NotImplementedError, match=r"Unrecognised padding mode foo"),
        ErrorCase((z((2, 3), F32),), {"pad": (1, 1, 1, 1, 1, 1)}, exc=RuntimeError,
                  match=r"less than or equal to two times the input dimension"),
    ]


# ---------------------------------------------------------------------------------- pooling
def _max_pool2d_samples(dtype, rng):
    x = make((2, 2, 5, 6), dtype, rng)
    yield Sample((x, 2), desc="k=2")
    yield Sample((x, 3), {"stride": 2, "padding": 1}, desc="stride pad")
    yield Sample((x, 3), {"stride": 2, "padding": 1, "ceil_mode": True}, desc="ceil")
    yield Sample((x, (2, 3)), {"stride": (1, 2), "dilation": (2, 1)}, desc="dilation")
    yield Sample((x, 2), {"return_indices": True}, desc="indices")
    yield Sample((make((2, 5, 5), dtype, rng), 2), {"ceil_mode": True}, desc="unbatched")
    yield Sample((make((1, 2, 4, 6), dtype, rng, noncontig=True), 2), desc="non-contiguous")


def _max_pool_ties_samples(dtype, rng):
    ties = np.zeros((1, 1, 4, 4), dtype=np.dtype(make((1,), dtype, rng).dtype))
    ties[0, 0, 1:3, 1:3] = 1
    yield Sample((ties, 3), {"stride": 1, "return_indices": True}, desc="ties")
    yield Sample((ties, 2), {"stride": 1, "padding": 1}, desc="ties padded")
    nan = make((1, 2, 3, 3), dtype, rng)
    nan[0, 0, 0, 1] = nan[0, 0, 1, 2] = nan[0, 1, 2, 2] = np.nan
    yield Sample((nan, 2), {"stride": 1, "return_indices": True}, desc="NaN: the last NaN wins")


def _max_pool1d_samples(dtype, rng):
    yield Sample((make((2, 3, 7), dtype, rng), 3), {"stride": 2, "padding": 1,
                                                     "ceil_mode": True}, desc="ceil")
    yield Sample((make((3, 6), dtype, rng), 2), {"return_indices": True}, desc="unbatched")


def _avg_pool2d_samples(dtype, rng):
    x = make((2, 2, 5, 6), dtype, rng)
    yield Sample((x, 2), desc="k=2")
    yield Sample((x, 3), {"stride": 2, "padding": 1}, desc="stride pad")
    yield Sample((x, 3), {"stride": 2, "padding": 1, "count_include_pad": False}, desc="no pad")
    yield Sample((x, 3), {"stride": 2, "padding": 1, "ceil_mode": True}, desc="ceil")
    yield Sample((x, 3), {"stride": 2, "padding": 1, "ceil_mode": True,
                          "count_include_pad": False}, desc="ceil no pad")
    yield Sample((x, (2, 3)), {"divisor_override": 4}, desc="divisor")
    yield Sample((make((2, 5, 4), dtype, rng), 2), {"stride": 1}, desc="unbatched")


def _avg_pool1d_samples(dtype, rng):
    yield Sample((make((2, 3, 7), dtype, rng), 3), {"stride": 2, "padding": 1,
                                                     "ceil_mode": True}, desc="ceil")
    yield Sample((make((2, 3, 7), dtype, rng), 2), {"count_include_pad": False, "padding": 1},
                 desc="no pad")


def _adaptive2d_samples(dtype, rng):
    x = make((2, 2, 5, 7), dtype, rng)
    for size in (1, (2, 3), (5, 7), (3, None), (8, 4)):
        yield Sample((x, size), desc=f"out {size}")
    # PyTorch's backward refuses an empty output, so the empty case is forward-only
    yield Sample((x, 0), desc="out 0", grad=False)
    yield Sample((make((2, 6, 4), dtype, rng), (4, 3)), desc="unbatched")
    yield Sample((make((1, 2, 4, 5), dtype, rng, noncontig=True), 3), desc="non-contiguous")


def _adaptive1d_samples(dtype, rng):
    yield Sample((make((2, 3, 7), dtype, rng), 3), desc="7->3")
    yield Sample((make((3, 4), dtype, rng), 6), desc="upsample")


def _pool_errors():
    z = np.zeros
    return [
        ErrorCase((z((1, 1, 5, 5), F32), 3), {"padding": 2}, exc=RuntimeError,
                  match=r"pad should be at most half of effective kernel size"),
        # the with-indices kernel bounds pad by the plain kernel size
        ErrorCase((z((1, 1, 5, 5), F32), 3), {"padding": 2, "dilation": 2,
                                              "return_indices": True},
                  exc=RuntimeError, match=r"pad should be smaller than or equal to half"),
        ErrorCase((z((1, 2, 4, 1), F32), (2, 3)), {"stride": 2}, exc=RuntimeError,
                  match=r"\[max_pool2d\] Given input size: \(2x4x1\). Calculated output size: "
                        r"\(2x2x0\). Output size is too small"),
    ]


def _avg_pool_errors():
    z = np.zeros
    return [
        ErrorCase((z((1, 2, 4, 1), F32), (2, 3)), {"stride": 2}, exc=RuntimeError,
                  match=r"\[avg_pool2d\].*Output size is too small"),
        ErrorCase((z((1, 2, 4, 4), np.int32), 2), exc=NotImplementedError,
                  match=r"\"avg_pool2d\" not implemented for 'Int'"),
    ]


# ---------------------------------------------------------------------------------- embedding
def _embedding_samples(dtype, rng):
    w = make((6, 3), dtype, rng)
    idx = np.array([[0, 2, 2], [5, 1, 2]], dtype=np.int64)
    yield Sample((idx, w), desc="repeated indices")
    yield Sample((np.array(3, dtype=np.int64), w), desc="0-d index")
    yield Sample((np.array([1, 4], dtype=np.int32), w), desc="int32 index")
    yield Sample((np.zeros((0, 2), dtype=np.int64), w), desc="empty")


def _embedding_pad_samples(dtype, rng):
    """Options whose gradient is PyTorch's convention, not the derivative (no finite diffs)."""
    w = make((6, 3), dtype, rng)
    idx = np.array([[0, 2, 2], [5, 1, 2]], dtype=np.int64)
    yield Sample((idx, w), {"padding_idx": 2}, desc="padding_idx")
    yield Sample((idx, w), {"padding_idx": -1}, desc="negative padding_idx")
    yield Sample((idx, w), {"scale_grad_by_freq": True}, desc="scale_grad_by_freq")
    yield Sample((idx, w), {"scale_grad_by_freq": True, "padding_idx": 0}, desc="both")


def _embedding_max_norm(lib, idx, w):
    w = w.clone()  # max_norm renormalizes rows of weight in place
    out = lib.nn.functional.embedding(idx, w, max_norm=1.0)
    return out, w


def _embedding_errors():
    return [
        ErrorCase((np.array([0, 6]), np.zeros((6, 2), F32)), exc=IndexError,
                  match=r"\[embedding\] index out of range in self"),
        ErrorCase((np.array([0.0]), np.zeros((6, 2), F32)), exc=RuntimeError,
                  match=r"\[embedding\].*Long, Int"),
    ]


def _one_hot_samples(dtype, rng):
    yield Sample((np.array([[0, 2], [4, 1]], dtype=np.int64),), desc="inferred")
    yield Sample((np.array([0, 2, 1], dtype=np.int64), 5), desc="num_classes")
    yield Sample((np.array(3, dtype=np.int64), 4), desc="0-d")
    yield Sample((np.zeros((0, 2), dtype=np.int64), 3), desc="empty")
    yield Sample((np.array([[3]], dtype=np.int64), 6), desc="unused classes")


def _one_hot_errors():
    return [
        ErrorCase((np.array([0, 3]), 3), exc=RuntimeError,
                  match=r"\[one_hot\] Class values must be smaller than num_classes"),
        ErrorCase((np.array([0, -1]), 3), exc=RuntimeError,
                  match=r"\[one_hot\] Class values must be non-negative"),
        ErrorCase((np.array([0, 1], dtype=np.int32), 3), exc=RuntimeError,
                  match=r"only applicable to index tensor of type LongTensor"),
        ErrorCase((np.zeros((0,), dtype=np.int64),), exc=RuntimeError,
                  match=r"Can not infer total number of classes from empty tensor"),
        ErrorCase((np.zeros((0,), dtype=np.int64), 0), exc=RuntimeError,
                  match=r"Can not infer total number of classes from empty tensor"),
    ]


OPINFOS = [
    OpInfo("nn.conv2d", _f("conv2d"), _conv2d_samples, errors=_conv_errors,
           sum_of_products=True),
    OpInfo("nn.conv2d_double_backward", gradgrad("conv2d"), _conv2d_double_backward,
           dtypes=("float64",)),
    *[OpInfo(f"nn.{k}_double_backward", gradgrad(k), _double_backward_samples(k),
             dtypes=("float64",))
      for k in ("pad", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "embedding")],
    OpInfo("nn.embedding_padding_idx_double_backward", gradgrad("embedding"),
           lambda d, r: [Sample((np.array([[0, 2, 2], [3, 1, 2]]), make((4, 3), d, r)),
                                {"padding_idx": 2, "scale_grad_by_freq": True})],
           dtypes=("float64",), fd_check=False),
    OpInfo("nn.conv1d", _f("conv1d"), _conv1d_samples, sum_of_products=True),
    OpInfo("nn.conv_transpose2d", _f("conv_transpose2d"), _conv_transpose2d_samples,
           sum_of_products=True),
    OpInfo("nn.conv_transpose1d", _f("conv_transpose1d"), _conv_transpose1d_samples,
           sum_of_products=True),
    OpInfo("nn.conv_transpose2d_double_backward", gradgrad("conv_transpose2d"),
           lambda d, r: [Sample((make((1, 2, 3, 2), d, r), make((2, 1, 2, 2), d, r)),
                                {"stride": 2, "padding": 1, "groups": 2}),
                         Sample((make((1, 1, 2, 2), d, r), make((1, 1, 2, 2), d, r)),
                                {"dilation": 2, "output_padding": 1})],
           dtypes=("float64",)),
    OpInfo("nn.pad_constant", _f("pad"), _pad_samples("constant"), dtypes=FLOATS + ("int64",),
           errors=_pad_errors),
    OpInfo("nn.pad_reflect", _f("pad"), _pad_samples("reflect"), dtypes=FLOATS),
    OpInfo("nn.pad_replicate", _f("pad"), _pad_samples("replicate"), dtypes=FLOATS),
    OpInfo("nn.pad_circular", _f("pad"), _pad_samples("circular"), dtypes=FLOATS),
    OpInfo("nn.max_pool2d", _f("max_pool2d"), _max_pool2d_samples, dtypes=FLOATS,
           errors=_pool_errors),
    # ties go to the first maximum (not differentiable there: no finite differences)
    OpInfo("nn.max_pool2d_ties", _f("max_pool2d"), _max_pool_ties_samples, fd_check=False),
    OpInfo("nn.max_pool1d", _f("max_pool1d"), _max_pool1d_samples),
    OpInfo("nn.avg_pool2d", _f("avg_pool2d"), _avg_pool2d_samples, dtypes=FLOATS + ("int64",),
           errors=_avg_pool_errors),
    OpInfo("nn.avg_pool1d", _f("avg_pool1d"), _avg_pool1d_samples),
    OpInfo("nn.adaptive_avg_pool2d", _f("adaptive_avg_pool2d"), _adaptive2d_samples, dtypes=FLOATS),
    OpInfo("nn.adaptive_avg_pool1d", _f("adaptive_avg_pool1d"), _adaptive1d_samples),
    OpInfo("nn.embedding", _f("embedding"), _embedding_samples, dtypes=FLOATS,
           errors=_embedding_errors),
    OpInfo("nn.embedding_padding_idx", _f("embedding"), _embedding_pad_samples,
           dtypes=FLOATS, fd_check=False),
    OpInfo("nn.embedding_max_norm", _embedding_max_norm,
           lambda d, r: [Sample((np.array([[0, 2], [2, 3]]), make((5, 3), d, r)), grad=False)],
           grad=False),
    OpInfo("nn.one_hot", _f("one_hot"), _one_hot_samples, dtypes=("int64",), grad=False,
           errors=_one_hot_errors),
]
