"""OpInfo entries for ``nn.functional`` normalization: layer_norm, rms_norm, group_norm,
batch_norm (train and eval, with the updated running statistics), instance_norm."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import FLOATS, ErrorCase, OpInfo, Sample, make
from tests.opinfo.ops_nn_conv import gradgrad

F32 = np.float32


def _f(name):
    return lambda lib, *a, **k: getattr(lib.nn.functional, name)(*a, **k)


def _layer_norm_samples(dtype, rng):
    x = make((2, 3, 4), dtype, rng)
    yield Sample((x, (4,)), desc="1 dim")
    yield Sample((x, (3, 4), make((3, 4), dtype, rng), make((3, 4), dtype, rng)),
                 desc="2 dims weight bias")
    yield Sample((x, [4], make((4,), dtype, rng)), desc="list shape weight only")
    yield Sample((x, (4,), None, make((4,), dtype, rng)), {"eps": 1e-3}, desc="bias only eps")
    yield Sample((make((5,), dtype, rng), (5,)), desc="1-d input")
    yield Sample((make((0, 4), dtype, rng), (4,)), desc="empty batch")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), (4,),
                  make((4,), dtype, rng, noncontig=True)), desc="non-contiguous")


def _rms_norm_samples(dtype, rng):
    x = make((2, 3, 4), dtype, rng)
    yield Sample((x, (4,)), desc="1 dim default eps")
    yield Sample((x, (3, 4), make((3, 4), dtype, rng)), desc="2 dims weight")
    yield Sample((x, [4], make((4,), dtype, rng)), {"eps": 1e-3}, desc="eps")
    yield Sample((make((3, 4), dtype, rng, noncontig=True), (4,)), desc="non-contiguous")


def _group_norm_samples(dtype, rng):
    x = make((2, 6, 3, 2), dtype, rng)
    yield Sample((x, 3), desc="3 groups")
    yield Sample((x, 2, make((6,), dtype, rng), make((6,), dtype, rng)), desc="weight bias")
    yield Sample((make((3, 4, 5), dtype, rng), 4, make((4,), dtype, rng)), {"eps": 1e-3},
                 desc="3-d instance-like")
    yield Sample((make((2, 4), dtype, rng), 1), desc="2-d layer-like")


def _norm_errors(name):
    def cases():
        z = np.zeros
        if name == "layer_norm":
            return [ErrorCase((z((2, 3), F32), (4,)), exc=RuntimeError,
                              match=r"\[layer_norm\] Given normalized_shape=\[4\], expected "
                                    r"input with shape \[\*, 4\]"),
                    ErrorCase((z((2, 3), np.int64), (3,)), exc=NotImplementedError,
                              match=r"\"LayerNormKernelImpl\" not implemented for 'Long'")]
        if name == "group_norm":
            return [ErrorCase((z((2, 6), F32), 4), exc=RuntimeError,
                              match=r"\[group_norm\] Expected number of channels in input to be "
                                    r"divisible by num_groups")]
        return [ErrorCase((z((1, 3), F32),), exc=ValueError,
                          match=r"\[batch_norm\] Expected more than 1 value per channel")]
    return cases


def _batch_norm_train(lib, x, w=None, b=None, **kw):
    """The output and the running statistics after the in-place update."""
    c = x.shape[1]
    rm = lib.linspace(-0.5, 0.5, c, dtype=x.dtype)
    rv = lib.linspace(0.5, 1.5, c, dtype=x.dtype)
    v0 = rm._version
    y = lib.nn.functional.batch_norm(x, rm, rv, w, b, training=True, **kw)
    if lib.__name__ == "ember":  # PyTorch's kernel writes the buffers without a version bump
        assert rm._version > v0 and rv._version > v0, "running stats not updated in place"
    return y, rm, rv


def _batch_norm_train_y(lib, x, w=None, b=None, **kw):
    """Only the output, for the gradient tests (the running statistics have no gradient)."""
    return _batch_norm_train(lib, x, w, b, **kw)[0]


def _batch_norm_train_samples(dtype, rng):
    yield Sample((make((4, 3), dtype, rng),), desc="2-d")
    yield Sample((make((2, 3, 4, 2), dtype, rng), make((3,), dtype, rng),
                  make((3,), dtype, rng)), {"momentum": 0.3}, desc="4-d affine momentum")
    yield Sample((make((2, 3, 5), dtype, rng), make((3,), dtype, rng)), {"eps": 1e-3},
                 desc="3-d weight eps")


def _batch_norm_eval_samples(dtype, rng):
    x = make((2, 3, 4, 2), dtype, rng)
    yield Sample((x,), desc="no affine")
    yield Sample((x, make((3,), dtype, rng), make((3,), dtype, rng)), {"eps": 1e-3},
                 desc="affine")
    yield Sample((make((4, 3), dtype, rng), make((3,), dtype, rng)), desc="2-d")


def _batch_norm_eval(lib, x, w=None, b=None, **kw):
    c = x.shape[1]
    rm = lib.linspace(-0.5, 0.5, c, dtype=x.dtype)
    rv = lib.linspace(0.5, 1.5, c, dtype=x.dtype)
    return lib.nn.functional.batch_norm(x, rm, rv, w, b, training=False, **kw)


def _instance_norm_samples(dtype, rng):
    yield Sample((make((2, 3, 4, 2), dtype, rng),), desc="no affine")
    yield Sample((make((2, 3, 5), dtype, rng), None, None, make((3,), dtype, rng),
                  make((3,), dtype, rng)), desc="affine")


def _instance_norm_running(lib, x):
    c = x.shape[1]
    rm = lib.zeros(c, dtype=x.dtype)
    rv = lib.ones(c, dtype=x.dtype)
    y = lib.nn.functional.instance_norm(x, rm, rv)
    return y, rm, rv


OPINFOS = [
    OpInfo("nn.layer_norm", _f("layer_norm"), _layer_norm_samples, dtypes=FLOATS,
           errors=_norm_errors("layer_norm")),
    OpInfo("nn.layer_norm_double_backward", gradgrad("layer_norm"),
           lambda d, r: [Sample((make((2, 4), d, r), (4,), make((4,), d, r), make((4,), d, r))),
                         Sample((make((2, 2, 3), d, r), (2, 3)))],
           dtypes=("float64",)),
    OpInfo("nn.rms_norm_double_backward", gradgrad("rms_norm"),
           lambda d, r: [Sample((make((2, 4), d, r), (4,), make((4,), d, r))),
                         Sample((make((2, 2, 3), d, r), (2, 3)))],
           dtypes=("float64",)),
    OpInfo("nn.group_norm_double_backward", gradgrad("group_norm"),
           lambda d, r: [Sample((make((2, 4, 3), d, r), 2, make((4,), d, r), make((4,), d, r)))],
           dtypes=("float64",)),
    OpInfo("nn.rms_norm", _f("rms_norm"), _rms_norm_samples, dtypes=FLOATS),
    OpInfo("nn.group_norm", _f("group_norm"), _group_norm_samples, dtypes=FLOATS,
           errors=_norm_errors("group_norm")),
    OpInfo("nn.batch_norm_train", _batch_norm_train, _batch_norm_train_samples, grad=False,
           errors=_norm_errors("batch_norm")),
    OpInfo("nn.batch_norm_train_grad", _batch_norm_train_y, _batch_norm_train_samples),
    OpInfo("nn.batch_norm_eval", _batch_norm_eval, _batch_norm_eval_samples, dtypes=FLOATS),
    OpInfo("nn.instance_norm", _f("instance_norm"), _instance_norm_samples),
    OpInfo("nn.instance_norm_running", _instance_norm_running,
           lambda d, r: [Sample((make((2, 3, 4), d, r),))], grad=False),
]
