"""Basic layer modules (linear, activation, loss, embedding, dropout, flatten) against
torch.nn: same constructor args, torch's parameters loaded into ember, then outputs, input
and parameter gradients, reprs, state-dict keys and train/eval behaviour compared."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember.nn.modules import activation as EA
from ember.nn.modules import dropout as ED
from ember.nn.modules import flatten as EF
from ember.nn.modules import linear as EL
from ember.nn.modules import loss as ELS
from ember.nn.modules import sparse as ES

torch = pytest.importorskip("torch")
tnn = torch.nn

E_NS = {}
for _m in (EA, ED, EF, EL, ELS, ES):
    E_NS.update({n: getattr(_m, n) for n in _m.__all__})


@pytest.fixture(autouse=True)
def _keep_global_rng():
    """These tests seed and draw from the global generator; restore it so that unseeded
    statistical tests elsewhere see the state they would without this file."""
    state = ember.get_rng_state()
    yield
    ember.set_rng_state(state)


def to_e(t) -> ember.Tensor:
    return ember.tensor(t.detach().numpy())


def to_np(t) -> np.ndarray:
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach()._data)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def both(name: str, *args, f64: bool = False, **kwargs) -> tuple:
    """The ember and torch modules with the same args; torch's state loaded into ember."""
    tkw = {k: (v if not isinstance(v, np.ndarray) else torch.tensor(v))
           for k, v in kwargs.items()}
    ekw = {k: (v if not isinstance(v, np.ndarray) else ember.tensor(v))
           for k, v in kwargs.items()}
    if f64:
        tkw["dtype"], ekw["dtype"] = torch.float64, ember.float64
    t = getattr(tnn, name)(*args, **tkw)
    e = E_NS[name](*args, **ekw)
    sd = {k: to_e(v) for k, v in t.state_dict().items()}
    e.load_state_dict(sd)
    return e, t


def run_both(e, t, inputs: list, grad_idx: tuple = (0,), atol: float = 1e-10) -> None:
    """Forward + backward with a random cotangent; compare values and all gradients."""
    t_in = [torch.tensor(a, requires_grad=i in grad_idx) for i, a in enumerate(inputs)]
    e_in = [ember.tensor(a, requires_grad=i in grad_idx) for i, a in enumerate(inputs)]
    to, eo = t(*t_in), e(*e_in)
    assert tuple(eo.shape) == tuple(to.shape)
    assert str(eo.dtype).replace("ember", "torch") == str(to.dtype)
    np.testing.assert_allclose(to_np(eo), to_np(to), rtol=1e-7, atol=atol)
    if not to.requires_grad:
        return
    cot = rng(1).standard_normal(tuple(to.shape))
    (to * torch.tensor(cot, dtype=to.dtype)).sum().backward()
    (eo * ember.tensor(cot, dtype=eo.dtype)).sum().backward()
    for i in grad_idx:
        np.testing.assert_allclose(to_np(e_in[i].grad), to_np(t_in[i].grad), rtol=1e-7,
                                   atol=atol)
    tp = dict(t.named_parameters())
    for n, p in e.named_parameters():
        if tp[n].grad is None:
            assert p.grad is None, n
        else:
            np.testing.assert_allclose(to_np(p.grad), to_np(tp[n].grad), rtol=1e-7, atol=atol,
                                       err_msg=n)


def same_repr(e, t) -> None:
    assert repr(e) == repr(t).replace("torch.", "ember.")
    assert list(e.state_dict()) == list(t.state_dict())
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in e.named_buffers()] == [n for n, _ in t.named_buffers()]


def x64(*shape, seed: int = 0) -> np.ndarray:
    return rng(seed).standard_normal(shape)


# ----------------------------------------------------------------------------------- linear
LINEAR_CASES = [
    ("Linear", (5, 3), {}, [(4, 5)]),
    ("Linear", (5, 3), {"bias": False}, [(2, 4, 5)]),
    ("Linear", (5, 3), {}, [(5,)]),
    ("Linear", (0, 3), {}, [(2, 0)]),
    ("Bilinear", (4, 3, 2), {}, [(5, 4), (5, 3)]),
    ("Bilinear", (4, 3, 2), {"bias": False}, [(2, 5, 4), (2, 5, 3)]),
]


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
@pytest.mark.parametrize("name,args,kwargs,shapes", LINEAR_CASES)
def test_linear_like(name, args, kwargs, shapes):
    e, t = both(name, *args, f64=True, **kwargs)
    same_repr(e, t)
    inputs = [x64(*s, seed=i) for i, s in enumerate(shapes)]
    run_both(e, t, inputs, grad_idx=tuple(range(len(inputs))))


def test_linear_factory_kwargs_and_default_dtype():
    m = EL.Linear(3, 2, device="cpu", dtype=ember.float64)
    assert m.weight.dtype == ember.float64 and m.bias.dtype == ember.float64
    assert isinstance(m.weight, ember.nn.Parameter) and m.weight.requires_grad
    m = EL.Linear(3, 2)
    assert m.weight.dtype == ember.float32
    assert tuple(m.weight.shape) == (2, 3) and tuple(m.bias.shape) == (2,)
    assert m.in_features == 3 and m.out_features == 2


@pytest.mark.parametrize("fan_in", [4, 64])
def test_linear_init_bounds(fan_in):
    ember.manual_seed(0)
    m = EL.Linear(fan_in, 400)
    bound = 1 / math.sqrt(fan_in)
    w, b = to_np(m.weight), to_np(m.bias)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    # U(-bound, bound): std bound/sqrt(3), mean ~ 0
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert abs(w.mean()) < 0.05 * bound
    assert np.abs(w).max() > 0.9 * bound


def test_bilinear_init_bounds():
    ember.manual_seed(0)
    m = EB = EL.Bilinear(16, 3, 50)
    bound = 1 / 4
    assert np.abs(to_np(EB.weight)).max() <= bound
    assert np.abs(to_np(m.bias)).max() <= bound
    assert to_np(EB.weight).std() > 0.8 * bound / math.sqrt(3)


def test_reset_parameters_redraws():
    ember.manual_seed(0)
    m = EL.Linear(8, 8)
    before = to_np(m.weight).copy()
    w = m.weight
    m.reset_parameters()
    assert m.weight is w
    assert not np.array_equal(before, to_np(m.weight))


def test_linear_errors_match_torch_type():
    e, t = EL.Linear(3, 2), tnn.Linear(3, 2)
    with pytest.raises(RuntimeError):
        t(torch.zeros(2, 4))
    with pytest.raises(RuntimeError):
        e(ember.zeros(2, 4))


def test_identity():
    e, t = EL.Identity(3, foo=1), tnn.Identity(3, foo=1)
    same_repr(e, t)
    x = ember.randn(2, 3)
    assert e(x) is x


# ---------------------------------------------------------------------------------- flatten
@pytest.mark.parametrize("name,args,shape", [
    ("Flatten", (), (2, 3, 4, 5)),
    ("Flatten", (0, 2), (2, 3, 4, 5)),
    ("Flatten", (-3, -2), (2, 3, 4, 5)),
    ("Unflatten", (1, (2, 3)), (4, 6, 5)),
    ("Unflatten", (-1, [5, -1]), (4, 10)),
])
def test_flatten_unflatten(name, args, shape):
    e, t = both(name, *args)
    same_repr(e, t)
    run_both(e, t, [x64(*shape)])


def test_unflatten_errors():
    for bad in [(1, 2), (1, (2, 3.0))]:
        with pytest.raises(TypeError) as te:
            tnn.Unflatten(*bad)
        with pytest.raises(TypeError) as ee:
            EF.Unflatten(*bad)
        assert str(ee.value) == str(te.value)


# ------------------------------------------------------------------------------ activations
ACT_CASES = [
    ("ReLU", (), {}), ("ReLU6", (), {}), ("LeakyReLU", (0.2,), {}), ("LeakyReLU", (), {}),
    ("GELU", (), {}), ("GELU", (), {"approximate": "tanh"}), ("SiLU", (), {}), ("Mish", (), {}),
    ("Softplus", (), {}), ("Softplus", (2, 1), {}), ("ELU", (), {}), ("ELU", (0.5,), {}),
    ("SELU", (), {}), ("CELU", (2.0,), {}), ("Hardtanh", (), {}), ("Hardtanh", (-2, 0.5), {}),
    ("Hardsigmoid", (), {}), ("Hardswish", (), {}), ("Sigmoid", (), {}), ("Tanh", (), {}),
    ("LogSigmoid", (), {}), ("Softsign", (), {}), ("Tanhshrink", (), {}),
    ("Softmax", (1,), {}), ("Softmax", (), {"dim": -1}), ("LogSoftmax", (1,), {}),
    ("LogSoftmax", (0,), {}), ("Softmin", (1,), {}), ("GLU", (), {}), ("GLU", (1,), {}),
    ("Threshold", (0.1, 20.0), {}), ("Hardshrink", (), {}), ("Softshrink", (0.3,), {}),
    ("PReLU", (), {}), ("PReLU", (3,), {"init": 0.1}), ("Softmax2d", (), {}),
]
INPLACE = {"ReLU", "ReLU6", "LeakyReLU", "SiLU", "Mish", "ELU", "SELU", "CELU", "Hardtanh",
           "Hardsigmoid", "Hardswish", "Threshold"}


@pytest.mark.parametrize("name,args,kwargs", ACT_CASES, ids=lambda v: str(v))
def test_activation(name, args, kwargs):
    e, t = both(name, *args, f64=name == "PReLU", **kwargs)
    same_repr(e, t)
    x = x64(4, 3 if name == "PReLU" else 6, 4) * 3
    run_both(e, t, [x])


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_activation_inplace(name):
    args = (0.1, 20.0) if name == "Threshold" else ()
    t = getattr(tnn, name)(*args, inplace=True)
    e = E_NS[name](*args, inplace=True)
    assert repr(e) == repr(t)
    x = x64(3, 5) * 3
    tx, ex = torch.tensor(x), ember.tensor(x)
    to, eo = t(tx), e(ex)
    np.testing.assert_allclose(to_np(ex), to_np(tx), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(to_np(eo), to_np(to), rtol=1e-7, atol=1e-12)
    # in-place through a non-leaf keeps gradients right
    ta = torch.tensor(x, requires_grad=True)
    ea = ember.tensor(x, requires_grad=True)
    t(ta * 1.0).sum().backward()
    e(ea * 1.0).sum().backward()
    np.testing.assert_allclose(to_np(ea.grad), to_np(ta.grad), rtol=1e-7, atol=1e-12)


def test_prelu_init_and_channels():
    m = EA.PReLU(4, init=0.3)
    assert tuple(m.weight.shape) == (4,) and np.allclose(to_np(m.weight), 0.3)
    assert m.num_parameters == 4 and m.init == 0.3
    assert list(m.state_dict()) == ["weight"]
    with pytest.raises(RuntimeError):
        m(ember.randn(2, 3))


def test_hardtanh_bad_range_and_legacy_kwargs():
    with pytest.raises(AssertionError) as te:
        tnn.Hardtanh(1, 0)
    with pytest.raises(AssertionError) as ee:
        EA.Hardtanh(1, 0)
    assert str(ee.value) == str(te.value)
    with pytest.warns(FutureWarning):
        m = EA.Hardtanh(min_value=-3.0)
    assert m.min_val == -3.0


def test_softmax2d_rejects_2d():
    with pytest.raises(ValueError) as te:
        tnn.Softmax2d()(torch.zeros(2, 3))
    with pytest.raises(ValueError) as ee:
        EA.Softmax2d()(ember.zeros(2, 3))
    assert str(te.value) in str(ee.value)


def test_softmax_implicit_dim_warns():
    m = EA.Softmax()
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        out = m(ember.randn(2, 3))
    assert tuple(out.shape) == (2, 3)


# ------------------------------------------------------------------------------------- loss
def _targets(kind: str, shape: tuple, c: int = 4) -> np.ndarray:
    r = rng(5)
    if kind == "class":
        return r.integers(0, c, size=shape).astype(np.int64)
    if kind == "prob":
        return r.uniform(0.05, 0.95, size=shape)
    if kind == "logprob":
        p = r.uniform(0.1, 1, size=shape)
        return p / p.sum(-1, keepdims=True)
    return r.standard_normal(shape)


W4 = np.array([0.5, 1.0, 2.0, 0.25])
LOSS_CASES = [
    ("CrossEntropyLoss", {}, (5, 4), "class", (5,)),
    ("CrossEntropyLoss", {"weight": W4, "reduction": "sum"}, (5, 4), "class", (5,)),
    ("CrossEntropyLoss", {"weight": W4, "ignore_index": 1}, (6, 4), "class", (6,)),
    ("CrossEntropyLoss", {"label_smoothing": 0.1, "reduction": "none"}, (2, 4, 3), "class",
     (2, 3)),
    ("CrossEntropyLoss", {"weight": W4, "label_smoothing": 0.2}, (5, 4), "class", (5,)),
    ("NLLLoss", {}, (5, 4), "class", (5,)),
    ("NLLLoss", {"weight": W4, "reduction": "none"}, (5, 4), "class", (5,)),
    ("NLLLoss", {"ignore_index": 2}, (5, 4), "class", (5,)),
    ("MSELoss", {}, (3, 4), "real", (3, 4)),
    ("MSELoss", {"reduction": "sum"}, (3, 4), "real", (3, 4)),
    ("L1Loss", {"reduction": "none"}, (3, 4), "real", (3, 4)),
    ("L1Loss", {}, (3, 4), "real", (3, 4)),
    ("SmoothL1Loss", {}, (3, 4), "real", (3, 4)),
    ("SmoothL1Loss", {"beta": 0.5, "reduction": "sum"}, (3, 4), "real", (3, 4)),
    ("HuberLoss", {}, (3, 4), "real", (3, 4)),
    ("HuberLoss", {"delta": 0.3, "reduction": "none"}, (3, 4), "real", (3, 4)),
    ("BCELoss", {}, (3, 4), "prob", (3, 4)),
    ("BCELoss", {"weight": W4, "reduction": "sum"}, (3, 4), "prob", (3, 4)),
    ("BCEWithLogitsLoss", {}, (3, 4), "prob", (3, 4)),
    ("BCEWithLogitsLoss", {"weight": W4, "pos_weight": W4 * 2}, (3, 4), "prob", (3, 4)),
    ("KLDivLoss", {"reduction": "batchmean"}, (3, 4), "logprob", (3, 4)),
    ("KLDivLoss", {"reduction": "sum", "log_target": True}, (3, 4), "real", (3, 4)),
]


@pytest.mark.parametrize("name,kwargs,shape,kind,tshape", LOSS_CASES, ids=lambda v: str(v))
def test_loss(name, kwargs, shape, kind, tshape):
    e, t = both(name, **kwargs)
    same_repr(e, t)
    x = x64(*shape)
    if name == "BCELoss":
        x = rng(3).uniform(0.05, 0.95, size=shape)
    elif name == "NLLLoss":
        x = x - np.log(np.exp(x).sum(1, keepdims=True))
    elif name == "KLDivLoss" and not kwargs.get("log_target"):
        x = np.log(_targets("logprob", shape)[::-1].copy())
    y = _targets(kind, tshape)
    grad_idx = (0,) if kind == "class" else (0, 1)
    if name == "BCELoss":
        grad_idx = (0,)
    run_both(e, t, [x, y], grad_idx=grad_idx)


PM1 = np.array([1.0, -1.0, -1.0, 1.0, 1.0])
THREE_INPUT = [
    ("CosineEmbeddingLoss", {}, (5, 4), PM1),
    ("CosineEmbeddingLoss", {"margin": -0.3, "reduction": "none"}, (5, 4), PM1),
    ("CosineEmbeddingLoss", {"reduction": "sum"}, (4,), np.array(-1.0)),
    ("MarginRankingLoss", {}, (5,), PM1),
    ("MarginRankingLoss", {"margin": 0.4, "reduction": "none"}, (5,), PM1),
]


@pytest.mark.parametrize("name,kwargs,shape,y", THREE_INPUT, ids=lambda v: str(v))
def test_three_input_losses(name, kwargs, shape, y):
    e, t = both(name, **kwargs)
    same_repr(e, t)
    run_both(e, t, [x64(*shape, seed=1), x64(*shape, seed=2), y], grad_idx=(0, 1))


@pytest.mark.parametrize("name,kwargs", [
    ("SoftMarginLoss", {}), ("SoftMarginLoss", {"reduction": "none"}),
    ("HingeEmbeddingLoss", {}), ("HingeEmbeddingLoss", {"margin": 0.5, "reduction": "sum"}),
])
def test_margin_losses(name, kwargs):
    e, t = both(name, **kwargs)
    same_repr(e, t)
    y = np.sign(x64(3, 5, seed=4))
    run_both(e, t, [x64(3, 5), y], grad_idx=(0,))


def test_cosine_embedding_loss_errors():
    cases = [((3, 4), (3, 4), (3, 2)), ((3, 4, 2), (3, 4, 2), (3,))]
    for s1, s2, st in cases:
        with pytest.raises(RuntimeError) as te:
            tnn.CosineEmbeddingLoss()(torch.zeros(s1), torch.zeros(s2), torch.ones(st))
        with pytest.raises(RuntimeError) as ee:
            ELS.CosineEmbeddingLoss()(ember.zeros(s1), ember.zeros(s2), ember.ones(st))
        assert str(te.value) in str(ee.value)


def test_loss_buffers():
    w, pw = np.ones(3), np.full(3, 2.0)
    e = ELS.BCEWithLogitsLoss(weight=ember.tensor(w), pos_weight=ember.tensor(pw))
    t = tnn.BCEWithLogitsLoss(weight=torch.tensor(w), pos_weight=torch.tensor(pw))
    assert list(e.state_dict()) == list(t.state_dict()) == ["weight", "pos_weight"]
    assert not list(e.parameters())
    e = ELS.CrossEntropyLoss()
    assert e.weight is None and list(e.state_dict()) == []
    e = ELS.CrossEntropyLoss(weight=ember.ones(4))
    assert list(e.state_dict()) == ["weight"]
    assert e.ignore_index == -100 and e.label_smoothing == 0.0 and e.reduction == "mean"
    e.double()
    assert e.weight.dtype == ember.float64


def test_loss_reduction_validation_and_legacy():
    e, t = ELS.MSELoss(reduction="bogus"), tnn.MSELoss(reduction="bogus")
    x = x64(2, 3)
    with pytest.raises(ValueError) as te:
        t(torch.tensor(x), torch.tensor(x))
    with pytest.raises(ValueError) as ee:
        e(ember.tensor(x), ember.tensor(x))
    assert str(te.value) in str(ee.value)
    for sa, red, want in [(False, None, "sum"), (None, False, "none"), (True, True, "mean")]:
        with pytest.warns(UserWarning, match="size_average and reduce"):
            m = ELS.L1Loss(size_average=sa, reduce=red)
        with pytest.warns(UserWarning):
            assert tnn.L1Loss(size_average=sa, reduce=red).reduction == want
        assert m.reduction == want


# -------------------------------------------------------------------------------- embedding
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 1}, {"padding_idx": -2},
                                    {"scale_grad_by_freq": True}, {"max_norm": 1.0},
                                    {"max_norm": 0.5, "norm_type": 1.0}])
def test_embedding(kwargs):
    t = tnn.Embedding(7, 3, dtype=torch.float64, **kwargs)
    e = ES.Embedding(7, 3, dtype=ember.float64, **kwargs)
    e.load_state_dict({k: to_e(v) for k, v in t.state_dict().items()})
    same_repr(e, t)
    idx = np.array([[0, 1, 5], [5, 5, 2], [1, 6, 3]], dtype=np.int64)
    run_both(e, t, [idx], grad_idx=())
    np.testing.assert_allclose(to_np(e.weight), to_np(t.weight), rtol=1e-12)


def test_embedding_padding_idx_zero_row_and_grad():
    ember.manual_seed(0)
    e = ES.Embedding(6, 4, padding_idx=2)
    assert e.padding_idx == 2
    assert np.all(to_np(e.weight)[2] == 0) and np.any(to_np(e.weight)[0] != 0)
    assert ES.Embedding(6, 4, padding_idx=-1).padding_idx == 5
    out = e(ember.tensor([[2, 0, 2], [1, 2, 0]]))
    out.sum().backward()
    g = to_np(e.weight.grad)
    assert np.all(g[2] == 0) and np.all(g[0] == 2) and np.all(g[1] == 1)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        ES.Embedding(6, 4, padding_idx=6)


def test_embedding_init_stats():
    ember.manual_seed(0)
    w = to_np(ES.Embedding(200, 100).weight)
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02


def test_embedding_from_pretrained():
    w = x64(4, 3)
    e = ES.Embedding.from_pretrained(ember.tensor(w))
    t = tnn.Embedding.from_pretrained(torch.tensor(w))
    same_repr(e, t)
    assert not e.weight.requires_grad
    assert isinstance(e.weight, ember.nn.Parameter)
    idx = np.array([3, 0, 3])
    np.testing.assert_array_equal(to_np(e(ember.tensor(idx))), to_np(t(torch.tensor(idx))))
    e2 = ES.Embedding.from_pretrained(ember.tensor(w), freeze=False, padding_idx=0)
    assert e2.weight.requires_grad and e2.padding_idx == 0
    # from_pretrained keeps the given values, even in the padding row
    np.testing.assert_array_equal(to_np(e2.weight), w)
    with pytest.raises(AssertionError, match="2-dimensional"):
        ES.Embedding.from_pretrained(ember.zeros(3))


def test_embedding_weight_arg_shape_check():
    e = ES.Embedding(2, 3, _weight=ember.ones(2, 3))
    assert np.all(to_np(e.weight) == 1)
    with pytest.raises(AssertionError, match="Shape of weight"):
        ES.Embedding(3, 3, _weight=ember.ones(2, 3))


# ---------------------------------------------------------------------------------- dropout
DROP = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
        "FeatureAlphaDropout"]
DROP_SHAPES = {"Dropout": (40, 50), "Dropout1d": (8, 20, 30), "Dropout2d": (4, 20, 5, 6),
               "Dropout3d": (2, 20, 3, 4, 5), "AlphaDropout": (40, 50),
               "FeatureAlphaDropout": (4, 20, 5, 6)}


@pytest.mark.parametrize("name", DROP)
def test_dropout_repr_and_eval_identity(name):
    e, t = both(name, 0.3, True)
    same_repr(e, t)
    e, t = both(name)
    same_repr(e, t)
    e.eval()
    assert not e.training
    x = ember.randn(*DROP_SHAPES[name])
    assert np.array_equal(to_np(e(x)), to_np(x))
    e.train()
    y = to_np(e(x))
    assert not np.array_equal(y, to_np(x))


@pytest.mark.parametrize("name", ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"])
def test_dropout_train_stats(name):
    ember.manual_seed(0)
    p = 0.3
    m = E_NS[name](p)
    x = ember.ones(*DROP_SHAPES[name])
    y = to_np(m(x))
    kept = y != 0
    assert np.allclose(y[kept], 1 / (1 - p))
    assert abs(kept.mean() - (1 - p)) < 0.08
    if name != "Dropout":
        # whole channels are zeroed together
        flat = kept.reshape(kept.shape[0], kept.shape[1], -1)
        assert np.all(flat.all(-1) | (~flat).all(-1))


def test_dropout_grad_uses_mask():
    ember.manual_seed(0)
    m = ED.Dropout(0.5)
    x = ember.ones(100, requires_grad=True)
    y = m(x)
    y.sum().backward()
    np.testing.assert_array_equal(to_np(x.grad), to_np(y))


def test_dropout_bad_p():
    for p in (-0.1, 1.1):
        with pytest.raises(ValueError) as te:
            tnn.Dropout(p)
        with pytest.raises(ValueError) as ee:
            ED.Dropout(p)
        assert str(ee.value) == str(te.value)


def test_dropout_inplace():
    m = ED.Dropout(0.5, inplace=True)
    x = ember.ones(50)
    y = m(x)
    assert y is x or np.shares_memory(to_np(y), to_np(x))
    assert np.any(to_np(x) == 0)


def test_alpha_dropout_keeps_selu_stats():
    ember.manual_seed(0)
    m = ED.AlphaDropout(0.2)
    x = ember.randn(200, 200)
    y = to_np(m(x))
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05


# ----------------------------------------------------------------------------- integration
def test_mlp_train_step_matches_torch():
    from ember.nn import Sequential
    t = tnn.Sequential(tnn.Linear(4, 8, dtype=torch.float64), tnn.GELU(),
                       tnn.Linear(8, 3, dtype=torch.float64), tnn.LogSoftmax(1))
    e = Sequential(EL.Linear(4, 8, dtype=ember.float64), EA.GELU(),
                   EL.Linear(8, 3, dtype=ember.float64), EA.LogSoftmax(1))
    e.load_state_dict({k: to_e(v) for k, v in t.state_dict().items()})
    assert repr(e) == repr(t)
    x, y = x64(6, 4), rng(2).integers(0, 3, size=6)
    tl = tnn.NLLLoss()(t(torch.tensor(x)), torch.tensor(y))
    el = ELS.NLLLoss()(e(ember.tensor(x)), ember.tensor(y))
    np.testing.assert_allclose(to_np(el), to_np(tl), rtol=1e-10)
    tl.backward()
    el.backward()
    tp = dict(t.named_parameters())
    for n, p in e.named_parameters():
        np.testing.assert_allclose(to_np(p.grad), to_np(tp[n].grad), rtol=1e-8, atol=1e-12)


def test_copy_pickle_and_convert():
    import copy
    import pickle
    m = EL.Linear(3, 2)
    for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert repr(c) == repr(m)
        np.testing.assert_array_equal(to_np(c.weight), to_np(m.weight))
    w = m.weight
    m.double()
    assert m.weight is w and m.weight.dtype == ember.float64
    s = pickle.loads(pickle.dumps(EA.Softmax(1)))
    assert s.dim == 1


def test_embedding_sparse_repr_and_forward_gap():
    t, e = tnn.Embedding(5, 2, sparse=True), ES.Embedding(5, 2, sparse=True)
    assert repr(e) == repr(t)
    with pytest.raises(NotImplementedError):
        e(ember.tensor([0, 1]))
