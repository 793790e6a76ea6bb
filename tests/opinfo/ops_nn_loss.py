"""OpInfo entries for ``nn.functional`` losses.

Class weights and ``pos_weight`` are passed as keyword arrays and turned into tensors inside the
function: PyTorch refuses gradients for them, so they must not require grad in the gradient
tests (keyword arrays never do).
"""

from __future__ import annotations

import warnings

import numpy as np

from tests.opinfo.core import ErrorCase, OpInfo, Sample, make, np_dtype

LOWP = ("float16", "bfloat16")


def _F(lib):  # noqa: N802
    return lib.nn.functional


def _t(lib, a):
    return None if a is None else lib.as_tensor(a)


def _quiet(fn):
    """Run ``fn`` ignoring the size-mismatch UserWarning both libraries emit."""
    def run(lib, *args, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return fn(lib, *args, **kw)
    return run


def _gradgrad(f):
    """The first derivative (through ``(y*y).sum()``) as the op, so its gradient tests the
    double backward."""
    def fn(lib, x, *rest, **kw):
        xx = x if x.requires_grad else x.detach().requires_grad_(True)
        with lib.enable_grad():
            y = f(lib, xx, *rest, **kw)
            (g,) = lib.autograd.grad((y * y).sum(), xx, create_graph=True)
        return g
    return fn


# ------------------------------------------------------------------------ class-index losses
def ce(lib, x, t, weight=None, **kw):
    return _F(lib).cross_entropy(x, t, weight=_t(lib, weight), **kw)


def nll(lib, x, t, weight=None, **kw):
    return _F(lib).nll_loss(x, t, weight=_t(lib, weight), **kw)


def _targets(rng, shape, n_classes, ignore=None, frac=0.3):
    t = rng.integers(0, n_classes, size=shape).astype(np.int64)
    if ignore is not None and t.size:
        t = np.where(rng.random(shape) < frac, ignore, t).astype(np.int64)
    return np.asarray(t)


def class_samples(smoothing=True):
    def gen(dtype, rng):
        mk = lambda shape: make(shape, dtype, rng, -3, 3)  # noqa: E731
        w = rng.uniform(0.2, 2.0, 5).astype(np_dtype(dtype))
        reds = ("mean", "sum", "none")
        for red in reds:
            yield Sample((mk((4, 5)), _targets(rng, (4,), 5)), {"reduction": red},
                         desc=f"(N,C) {red}")
            yield Sample((mk((4, 5)), _targets(rng, (4,), 5)), {"reduction": red, "weight": w},
                         desc=f"(N,C) weight {red}")
            yield Sample((mk((6, 5)), _targets(rng, (6,), 5, ignore=-100)),
                         {"reduction": red, "weight": w}, desc=f"ignore -100 weight {red}")
            yield Sample((mk((2, 5, 3)), _targets(rng, (2, 3), 5, ignore=2)),
                         {"reduction": red, "ignore_index": 2}, desc=f"(N,C,d) ignore=2 {red}")
            yield Sample((mk((5,)), _targets(rng, (), 5)), {"reduction": red},
                         desc=f"unbatched {red}")
        # PyTorch's CPU nll_loss2d sums float16/bfloat16 in the storage dtype (ember sums in
        # float32, rounding once), so reduced 4-d half results differ by a few ulps: compare
        # the unreduced losses there
        red4 = {"reduction": "none"} if dtype in LOWP else {}
        yield Sample((mk((2, 5, 2, 3)), _targets(rng, (2, 2, 3), 5)), red4, desc="(N,C,d1,d2)")
        yield Sample((mk((2, 5, 2, 1, 2)), _targets(rng, (2, 2, 1, 2), 5)), {"weight": w, **red4},
                     desc="(N,C,d1,d2,d3) weight")
        yield Sample((make((4, 5), dtype, rng, -3, 3, noncontig=True), _targets(rng, (4,), 5)),
                     {}, desc="non-contiguous", noncontig=True)
        # PyTorch's backward rejects this layout ("size mismatch"), so no gradient sample
        yield Sample((mk((5,)), np.array([3], np.int64)), {"reduction": "none"},
                     desc="unbatched (1,) target", grad=False)
        yield Sample((mk((3, 5)), np.full(3, -100, np.int64)), {}, desc="all ignored: nan",
                     grad=False)
        yield Sample((mk((3, 5)), np.full(3, -100, np.int64)), {"reduction": "sum"},
                     desc="all ignored sum")
        yield Sample((mk((0, 5)), np.zeros(0, np.int64)), {}, desc="empty", grad=False)
        yield Sample((mk((4, 5)), _targets(rng, (4,), 5).astype(np.uint8)), {},
                     desc="uint8 target")
        if dtype not in LOWP:
            big = mk((3, 5)) * 100
            yield Sample((big, _targets(rng, (3,), 5)), {"reduction": "none"}, desc="large logits")
        if smoothing:
            for red in reds:
                for eps in (0.1, 0.35):
                    yield Sample((mk((6, 5)), _targets(rng, (6,), 5, ignore=-100)),
                                 {"reduction": red, "label_smoothing": eps},
                                 desc=f"smoothing {eps} ignore {red}")
                    yield Sample((mk((6, 5)), _targets(rng, (6,), 5, ignore=1)),
                                 {"reduction": red, "label_smoothing": eps, "weight": w,
                                  "ignore_index": 1}, desc=f"smoothing {eps} weight ignore {red}")
            yield Sample((mk((2, 5, 3)), _targets(rng, (2, 3), 5)),
                         {"label_smoothing": 1.0, "weight": w}, desc="smoothing 1.0 (N,C,d)")
            yield Sample((mk((5,)), _targets(rng, (), 5)), {"label_smoothing": 0.2},
                         desc="smoothing unbatched")
    return gen


def _softmax(a):
    e = np.exp(a - a.max(axis=1 if a.ndim > 1 else 0, keepdims=True))
    return e / e.sum(axis=1 if a.ndim > 1 else 0, keepdims=True)


def prob_samples(dtype, rng):
    mk = lambda shape: make(shape, dtype, rng, -3, 3)  # noqa: E731
    probs = lambda shape: _softmax(make(shape, "float64", rng, -2, 2)).astype(  # noqa: E731
        np_dtype(dtype))
    w = rng.uniform(0.2, 2.0, 5).astype(np_dtype(dtype))
    for red in ("mean", "sum", "none"):
        yield Sample((mk((4, 5)), probs((4, 5))), {"reduction": red}, desc=f"(N,C) {red}")
        yield Sample((mk((2, 5, 3)), probs((2, 5, 3))), {"reduction": red, "weight": w},
                     desc=f"(N,C,d) weight {red}")
        yield Sample((mk((4, 5)), probs((4, 5))), {"reduction": red, "label_smoothing": 0.2,
                                                   "weight": w}, desc=f"smoothing weight {red}")
        yield Sample((mk((5,)), probs((5,))), {"reduction": red}, desc=f"unbatched {red}")
    yield Sample((mk((4, 5)), make((4, 5), dtype, rng, 0, 1)), {"label_smoothing": 0.3},
                 desc="unnormalised target")
    yield Sample((mk((0, 5)), probs((0, 5))), {}, desc="empty: nan", grad=False)


def _class_errors(fn, name):
    x = np.zeros((3, 5), np.float32)
    t = np.array([0, 1, 2], np.int64)
    return [
        ErrorCase((x, np.array([0, 5, 1], np.int64)), exc=IndexError,
                  match=rf"^\[{name}\] Target 5 is out of bounds\."),
        ErrorCase((x, np.array([0, -1, 1], np.int64)), exc=IndexError,
                  match=rf"^\[{name}\] Target -1 is out of bounds\."),
        ErrorCase((x, np.array([0, 1, 2, 3], np.int64)), exc=ValueError,
                  match=rf"\[{name}\] Expected input batch_size \(3\) to match target "
                        r"batch_size \(4\)\."),
        ErrorCase((x, t.astype(np.int32)), exc=RuntimeError,
                  match=rf"\[{name}\] expected target dtype to be Long or Byte, but got Int"),
        ErrorCase((x, t), {"reduction": "bad"}, exc=ValueError,
                  match=r"bad is not a valid value for reduction"),
        ErrorCase((x, t), {"weight": np.ones(4, np.float32)}, exc=RuntimeError,
                  match=r"weight tensor should be defined either for all 5 classes or no "
                        r"classes but got weight tensor of shape: \[4\]"),
        ErrorCase((x, t), {"weight": np.ones(5, np.float64)}, exc=RuntimeError,
                  match=rf"\[{name}\] expected scalar type Float but found Double"),
        ErrorCase((np.zeros((2, 5, 4)), np.zeros((2, 5), np.int64)), exc=RuntimeError,
                  match=r"Expected target size \[2, 4\], got \[2, 5\]"),
        ErrorCase((np.zeros((2, 5, 4, 3)), np.zeros((2, 4), np.int64)), exc=RuntimeError,
                  match=r"only batches of spatial targets supported \(3D tensors\) but got "
                        r"targets of dimension: 2"),
        ErrorCase((np.zeros((2, 5, 4, 3)), np.zeros((2, 4, 4), np.int64)), exc=RuntimeError,
                  match=r"size mismatch \(got input: \[2, 5, 4, 3\] , target: \[2, 4, 4\]"),
        ErrorCase((np.zeros(5), np.array([1, 2], np.int64)), exc=ValueError,
                  match=r"For 1D input, 1D target must have size 1, but got target size: 2"),
        ErrorCase((np.zeros((3, 5)), np.zeros((3, 2), np.int64)), exc=RuntimeError,
                  match=r"0D or 1D target tensor expected, multi-target not supported"),
        ErrorCase((np.array(1.0), np.array(0, np.int64)), exc=ValueError,
                  match=r"Expected 1 or more dimensions \(got 0\)"),
        ErrorCase((np.zeros((3, 5), np.int64), t), exc=NotImplementedError,
                  match=r"not implemented for 'Long'"),
    ]


def _ce_errors():
    x = np.zeros((3, 5), np.float32)
    t = np.array([0, 1, 2], np.int64)
    return _class_errors(ce, "cross_entropy") + [
        ErrorCase((x, t), {"label_smoothing": 1.5}, exc=RuntimeError,
                  match=r"label_smoothing must be between 0\.0 and 1\.0\. Got: 1\.5"),
        ErrorCase((x, np.zeros((3, 5), np.int64)), exc=RuntimeError,
                  match=r"Expected floating point type for target with class probabilities, "
                        r"got Long"),
        ErrorCase((x, np.zeros((3, 5), np.float32)), {"ignore_index": 1}, exc=RuntimeError,
                  match=r"ignore_index is not supported for floating point target"),
        ErrorCase((x, np.zeros((3, 5), np.float32)), {"weight": np.ones(2, np.float32)},
                  exc=RuntimeError, match=r"cross_entropy: weight tensor should be defined"),
    ]


def _weight_requires_grad(lib, x, t):
    w = lib.ones(5, requires_grad=True)
    return _F(lib).cross_entropy(x, t, weight=w)


# ------------------------------------------------------------------------ elementwise losses
def pair_samples(low=-3.0, high=3.0, tlow=None, thigh=None, kwargs_list=({},), weight=False):
    tlow = low if tlow is None else tlow
    thigh = high if thigh is None else thigh

    def gen(dtype, rng):
        x = lambda s, **k: make(s, dtype, rng, low, high, **k)  # noqa: E731
        y = lambda s, **k: make(s, dtype, rng, tlow, thigh, **k)  # noqa: E731
        for red in ("mean", "sum", "none"):
            for kw in kwargs_list:
                yield Sample((x((3, 4)), y((3, 4))), {"reduction": red, **kw},
                             desc=f"{red} {kw}")
        for shape in [(), (0,), (5,), (2, 3, 4)]:
            yield Sample((x(shape), y(shape)), dict(kwargs_list[-1]), desc=f"{shape}")
        yield Sample((x((3, 4), noncontig=True), y((3, 4), noncontig=True)),
                     dict(kwargs_list[-1]), desc="non-contiguous", noncontig=True)
        if weight:
            for red in ("mean", "sum", "none"):
                yield Sample((x((3, 4)), y((3, 4)), make((3, 4), dtype, rng, 0.1, 2)),
                             {"reduction": red}, desc=f"weight {red}")
    return gen


def _grad_only(samples):
    """Only the samples that PyTorch can differentiate (for the double-backward entries)."""
    def gen(dtype, rng):
        return (s for s in samples(dtype, rng) if s.grad)
    return gen


def broadcast_samples(dtype, rng, ints=True):
    """Size mismatch: PyTorch warns and broadcasts; mixed dtypes promote."""
    yield Sample((make((3, 4), dtype, rng), make((4,), dtype, rng)), {}, desc="(3,4) vs (4,)")
    yield Sample((make((3, 1), dtype, rng), make((1, 4), dtype, rng)), {"reduction": "none"},
                 desc="(3,1) vs (1,4)")
    yield Sample((make((3, 4), dtype, rng), make((3, 4), "float64", rng)), {},
                 desc="vs float64")
    if ints:
        yield Sample((make((3, 4), dtype, rng), make((3, 4), "int64", rng)), {},
                     desc="vs int64")


def _pointwise_loss(name):
    def fn(lib, x, y, w=None, **kw):
        if w is not None:
            kw["weight"] = w
        return getattr(_F(lib), name)(x, y, **kw)
    return fn


def bce(lib, x, y, weight=None, **kw):
    return _F(lib).binary_cross_entropy(x, y, weight=_t(lib, weight), **kw)


def bce_logits(lib, x, y, weight=None, pos_weight=None, **kw):
    return _F(lib).binary_cross_entropy_with_logits(
        x, y, weight=_t(lib, weight), pos_weight=_t(lib, pos_weight), **kw)


def bce_samples(dtype, rng):
    yield from pair_samples(0.02, 0.98, 0.0, 1.0)(dtype, rng)
    w = make((4,), dtype, rng, 0.2, 2)
    for red in ("mean", "sum", "none"):
        yield Sample((make((3, 4), dtype, rng, 0.02, 0.98), make((3, 4), dtype, rng, 0, 1)),
                     {"reduction": red, "weight": w}, desc=f"weight {red}")
    edge = np.array([0.0, 1.0, 0.0, 1.0, 0.5, 1e-30 if dtype == "float64" else 0.0])
    tgt = np.array([0.0, 1.0, 1.0, 0.0, 0.3, 0.7])
    yield Sample((edge.astype(np_dtype(dtype)), tgt.astype(np_dtype(dtype))),
                 {"reduction": "none"}, desc="x at 0/1: logs clamped at -100", grad=False)


def bce_logits_samples(dtype, rng):
    yield from pair_samples(-5, 5, 0.0, 1.0)(dtype, rng)
    w = make((4,), dtype, rng, 0.2, 2)
    pw = make((4,), dtype, rng, 0.2, 3)
    for red in ("mean", "sum", "none"):
        yield Sample((make((3, 4), dtype, rng, -5, 5), make((3, 4), dtype, rng, 0, 1)),
                     {"reduction": red, "weight": w, "pos_weight": pw}, desc=f"weights {red}")
        yield Sample((make((2, 3, 4), dtype, rng, -5, 5), make((2, 3, 4), dtype, rng, 0, 1)),
                     {"reduction": red, "pos_weight": pw}, desc=f"pos_weight {red}")
    big = np.array([-200.0, -50.0, 0.0, 50.0, 200.0]).astype(np_dtype(dtype))
    yield Sample((big, np.array([0.0, 1.0, 0.5, 0.0, 1.0]).astype(np_dtype(dtype))),
                 {"reduction": "none"}, desc="large logits")
    yield Sample((make((3, 4), dtype, rng, -5, 5), make((3, 4), "float64", rng, 0, 1)), {},
                 desc="target float64")


def _pair_errors(name, extra=()):
    x = np.zeros((3, 4), np.float32)
    return [ErrorCase((x, x), {"reduction": "avg"}, exc=ValueError,
                      match=r"avg is not a valid value for reduction"), *extra]


def _bce_weight_grad(lib, x, y):
    return _F(lib).binary_cross_entropy(x, y, weight=lib.ones(4, requires_grad=True))


def _bce_logits_pos_weight_grad(lib, x, y):
    return _F(lib).binary_cross_entropy_with_logits(x, y, pos_weight=lib.ones(4,
                                                                             requires_grad=True))


def _errors_only(name, fn, cases):
    return OpInfo(f"{name}-errors", fn, lambda d, r: iter(()), dtypes=(), grad=False,
                  errors=lambda: cases)


def kl_samples(dtype, rng):
    """Log-probabilities against probabilities (or log-probabilities with log_target)."""
    x = lambda s: make(s, dtype, rng, -4, 0)  # noqa: E731
    p = lambda s: make(s, dtype, rng, 0.05, 1)  # noqa: E731
    for red in ("mean", "sum", "none", "batchmean"):
        yield Sample((x((3, 4)), p((3, 4))), {"reduction": red}, desc=red)
        yield Sample((x((3, 4)), x((3, 4))), {"reduction": red, "log_target": True},
                     desc=f"log_target {red}")
    yield Sample((x((2, 3, 4)), p((4,))), {"reduction": "batchmean"}, desc="broadcast target")
    yield Sample((x(()), p(())), {"reduction": "batchmean"}, desc="0-d batchmean")
    zero = np.array([0.0, 0.5, 0.0]).astype(np_dtype(dtype))
    yield Sample((x((3,)), zero), {"reduction": "none"}, desc="target 0", grad=False)


def pdist_samples(dtype, rng):
    m = lambda s, **k: make(s, dtype, rng, **k)  # noqa: E731
    yield Sample((m((4, 5)), m((4, 5))), desc="(4,5)")
    yield Sample((m((4, 5)), m((5,))), {"p": 1.0, "keepdim": True}, desc="broadcast p=1 keepdim")
    yield Sample((m((2, 3, 4)), m((2, 3, 4))), {"p": 3.0, "eps": 1e-3}, desc="3-d p=3")
    yield Sample((m((3, 4), noncontig=True), m((3, 4), noncontig=True)), desc="non-contiguous",
                 noncontig=True)
    yield Sample((m((6,)), m((6,))), desc="1-d")


def cos_samples(dtype, rng):
    m = lambda s, **k: make(s, dtype, rng, **k)  # noqa: E731
    yield Sample((m((4, 5)), m((4, 5))), desc="(4,5) dim 1")
    yield Sample((m((4, 5)), m((4, 5))), {"dim": 0}, desc="dim 0")
    yield Sample((m((2, 3, 4)), m((4,))), {"dim": -1}, desc="broadcast dim -1")
    # norms stay above eps: below it PyTorch's gradient ignores the clamp (no finite difference
    # can agree), which the zero-vector sample checks against PyTorch without gradients
    yield Sample((m((3, 1), low=1, high=3), m((1, 4), low=1, high=3)), {"dim": 0, "eps": 0.5},
                 desc="broadcast eps")
    yield Sample((m((3, 4), noncontig=True), m((3, 4), noncontig=True)), desc="non-contiguous",
                 noncontig=True)
    yield Sample((m(()), m(())), {"dim": 0}, desc="0-d")
    yield Sample((np.zeros((2, 3), np_dtype(dtype)), m((2, 3))), desc="zero vector", grad=False)
    yield Sample((m((3, 4)), m((3, 4)).astype(np.float64)), desc="vs float64", grad=False)


def _build():
    f32 = np.full((3, 4), 0.5, np.float32)
    out = [
        OpInfo("cross_entropy", ce, class_samples(),
               dtypes=("float16", "bfloat16", "float32", "float64"), errors=_ce_errors),
        OpInfo("cross_entropy_gradgrad", _gradgrad(ce), _grad_only(class_samples()),
               dtypes=("float64",)),
        OpInfo("cross_entropy_probs", ce, prob_samples,
               dtypes=("float16", "bfloat16", "float32", "float64")),
        OpInfo("nll_loss", nll, class_samples(smoothing=False),
               dtypes=("float16", "bfloat16", "float32", "float64"),
               errors=lambda: _class_errors(nll, "nll_loss")),
        OpInfo("nll_loss_gradgrad", _gradgrad(nll), _grad_only(class_samples(smoothing=False)),
               dtypes=("float64",)),
        OpInfo("mse_loss", _pointwise_loss("mse_loss"), pair_samples(weight=True),
               errors=lambda: _pair_errors("mse_loss", [
                   ErrorCase((f32, f32, np.ones(4, np.float32)), exc=ValueError,
                             match=r"Weights and input must have the same size")])),
        OpInfo("mse_loss_gradgrad", _gradgrad(_pointwise_loss("mse_loss")), pair_samples(),
               dtypes=("float64",)),
        OpInfo("mse_loss_broadcast", _quiet(_pointwise_loss("mse_loss")), broadcast_samples),
        OpInfo("l1_loss", _pointwise_loss("l1_loss"), pair_samples(weight=True),
               errors=lambda: _pair_errors("l1_loss")),
        OpInfo("l1_loss_gradgrad", _gradgrad(_pointwise_loss("l1_loss")), pair_samples(),
               dtypes=("float64",)),
        OpInfo("l1_loss_broadcast", _quiet(_pointwise_loss("l1_loss")), broadcast_samples),
        OpInfo("smooth_l1_loss", _pointwise_loss("smooth_l1_loss"),
               pair_samples(kwargs_list=({}, {"beta": 0.5}, {"beta": 2.5}, {"beta": 0.0})),
               errors=lambda: _pair_errors("smooth_l1_loss", [
                   ErrorCase((f32, f32), {"beta": -1.0}, exc=RuntimeError,
                             match=r"smooth_l1_loss does not support negative values for beta")
               ])),
        OpInfo("smooth_l1_loss_gradgrad", _gradgrad(_pointwise_loss("smooth_l1_loss")),
               pair_samples(kwargs_list=({}, {"beta": 0.5}, {"beta": 2.5})), dtypes=("float64",)),
        OpInfo("smooth_l1_loss_broadcast", _quiet(_pointwise_loss("smooth_l1_loss")),
               broadcast_samples),
        OpInfo("huber_loss", _pointwise_loss("huber_loss"),
               pair_samples(kwargs_list=({}, {"delta": 0.5}, {"delta": 2.5}), weight=True),
               errors=lambda: _pair_errors("huber_loss", [
                   ErrorCase((f32, f32), {"delta": 0.0}, exc=RuntimeError,
                             match=r"huber_loss does not support non-positive values for delta")
               ])),
        # huber_loss casts a float target to the input dtype and rejects integer targets
        OpInfo("huber_loss_gradgrad", _gradgrad(_pointwise_loss("huber_loss")),
               pair_samples(kwargs_list=({}, {"delta": 0.5}, {"delta": 2.5})),
               dtypes=("float64",)),
        OpInfo("huber_loss_broadcast", _quiet(_pointwise_loss("huber_loss")),
               lambda d, r: broadcast_samples(d, r, ints=False),
               errors=lambda: [ErrorCase((f32, f32.astype(np.int64)), exc=RuntimeError,
                                         match=r"Found dtype Long but expected Float")]),
        OpInfo("binary_cross_entropy", bce, bce_samples, errors=lambda: [
            ErrorCase((f32, f32[:, :1]), exc=ValueError,
                      match=r"Using a target size \(.*\[3, 1\]\)\) that is different to the "
                            r"input size \(.*\[3, 4\]\)\) is deprecated"),
            ErrorCase((f32 * 3, f32), exc=RuntimeError,
                      match=r"all elements of input should be between 0 and 1"),
            ErrorCase((f32, f32 * 3), exc=RuntimeError,
                      match=r"all elements of target should be between 0 and 1"),
            ErrorCase((f32, f32.astype(np.float64)), exc=RuntimeError,
                      match=r"Found dtype Double but expected Float"),
            ErrorCase((f32, f32), {"reduction": "x"}, exc=ValueError,
                      match=r"x is not a valid value for reduction"),
        ]),
        OpInfo("binary_cross_entropy_gradgrad", _gradgrad(bce), _grad_only(bce_samples),
               dtypes=("float64",)),
        OpInfo("binary_cross_entropy_with_logits_gradgrad", _gradgrad(bce_logits),
               _grad_only(bce_logits_samples), dtypes=("float64",)),
        OpInfo("binary_cross_entropy_with_logits", bce_logits, bce_logits_samples,
               errors=lambda: [
                   ErrorCase((f32, f32[:, :1]), exc=ValueError,
                             match=r"Target size \(.*\[3, 1\]\)\) must be the same as input "
                                   r"size \(.*\[3, 4\]\)\)")]),
        OpInfo("kl_div_gradgrad", _quiet(_gradgrad(_pointwise_loss("kl_div"))),
               _grad_only(kl_samples), dtypes=("float64",)),
        OpInfo("kl_div", _quiet(_pointwise_loss("kl_div")), kl_samples, errors=lambda: [
            ErrorCase((f32, f32), {"reduction": "bad"}, exc=ValueError,
                      match=r"bad is not a valid value for reduction")]),
        OpInfo("cosine_similarity", lambda t, a, b, **kw: _F(t).cosine_similarity(a, b, **kw),
               cos_samples, errors=lambda: [
                   ErrorCase((np.ones(3, np.int64), np.ones(3, np.int64)), {"dim": 0},
                             exc=RuntimeError, match=r"expected common dtype to be floating "
                                                     r"point, yet common dtype is Long"),
                   ErrorCase((np.ones((2, 3)), np.ones((2, 3))), {"dim": 2}, exc=IndexError,
                             match=r"Dimension out of range")]),
        OpInfo("pairwise_distance", lambda t, a, b, **kw: _F(t).pairwise_distance(a, b, **kw),
               pdist_samples),
        # gradients where a norm is clamped at eps, against PyTorch only (see cos_samples)
        OpInfo("cosine_similarity_clamped",
               lambda t, a, b, **kw: _F(t).cosine_similarity(a, b, **kw),
               lambda d, r: iter([
                   Sample((np.zeros((2, 3), np_dtype(d)), make((2, 3), d, r)), desc="zero"),
                   Sample((make((3, 4), d, r, -0.1, 0.1), make((3, 4), d, r)), {"eps": 0.5},
                          desc="small norms")]),
               fd_check=False),
        _errors_only("cross_entropy-weight-grad", _weight_requires_grad, [
            ErrorCase((f32[:, :1].repeat(5, 1), np.array([0, 1, 2], np.int64)),
                      exc=RuntimeError, match=r"not differentiable with respect to argument "
                                              r"'weight'")]),
        _errors_only("bce-weight-grad", _bce_weight_grad, [
            ErrorCase((f32, f32), exc=RuntimeError,
                      match=r"not differentiable with respect to argument 'weight'")]),
        _errors_only("bce-logits-pos-weight-grad", _bce_logits_pos_weight_grad, [
            ErrorCase((f32, f32), exc=RuntimeError,
                      match=r"not differentiable with respect to argument 'pos_weight'")]),
    ]
    return out


OPINFOS = _build()
