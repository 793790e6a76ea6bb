"""ember.nn.init: formulas and fans against torch, distributions by their statistics."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ember
from ember.nn import init

torch = pytest.importorskip("torch")

SHAPES = [(5, 3), (8, 4, 3), (6, 2, 3, 3), (4, 2, 2, 2, 2)]


@pytest.mark.parametrize("shape", SHAPES)
def test_fan_in_fan_out_matches_torch(shape):
    assert init._calculate_fan_in_and_fan_out(ember.empty(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    for mode in ("fan_in", "fan_out", "FAN_IN"):
        assert init._calculate_correct_fan(ember.empty(*shape), mode) == \
            torch.nn.init._calculate_correct_fan(torch.empty(*shape), mode)


def test_fan_errors_match_torch():
    for e_call, t_call in [
        (lambda: init.xavier_uniform_(ember.empty(3)),
         lambda: torch.nn.init.xavier_uniform_(torch.empty(3))),
        (lambda: init.kaiming_uniform_(ember.empty(3, 3), mode="fan"),
         lambda: torch.nn.init.kaiming_uniform_(torch.empty(3, 3), mode="fan")),
        (lambda: init.orthogonal_(ember.empty(3)),
         lambda: torch.nn.init.orthogonal_(torch.empty(3))),
        (lambda: init.eye_(ember.empty(3)), lambda: torch.nn.init.eye_(torch.empty(3))),
        (lambda: init.dirac_(ember.empty(3, 3)), lambda: torch.nn.init.dirac_(torch.empty(3, 3))),
        (lambda: init.dirac_(ember.empty(3, 3, 3), groups=2),
         lambda: torch.nn.init.dirac_(torch.empty(3, 3, 3), groups=2)),
    ]:
        with pytest.raises(ValueError) as te:
            t_call()
        with pytest.raises(ValueError) as ee:
            e_call()
        assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",),
                                  ("leaky_relu",), ("leaky_relu", 0.2), ("leaky_relu", 3),
                                  ("selu",)])
def test_calculate_gain(args):
    assert init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args)


def test_calculate_gain_errors():
    for args in (("nope",), ("leaky_relu", True), ("leaky_relu", "x")):
        with pytest.raises(ValueError) as te:
            torch.nn.init.calculate_gain(*args)
        with pytest.raises(ValueError) as ee:
            init.calculate_gain(*args)
        assert str(ee.value) == str(te.value)


def _bound_check(t, bound):
    a = t.numpy()
    assert a.min() >= -bound and a.max() <= bound
    # a uniform sample of 20k values reaches close to its bounds and has std bound/sqrt(3)
    assert a.min() < -0.98 * bound and a.max() > 0.98 * bound
    assert abs(a.std() - bound / math.sqrt(3)) < 0.03 * bound


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
@pytest.mark.parametrize("nonlinearity,a", [("leaky_relu", 0), ("leaky_relu", 0.3),
                                            ("relu", 0), ("tanh", 0)])
def test_kaiming_uniform_bound(mode, nonlinearity, a):
    t = ember.empty(200, 25, 2, 2)
    out = init.kaiming_uniform_(t, a=a, mode=mode, nonlinearity=nonlinearity)
    assert out is t
    fan = 100 if mode == "fan_in" else 800
    bound = math.sqrt(3.0) * torch.nn.init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    _bound_check(t, bound)


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
def test_kaiming_normal_std(mode):
    g = ember.Generator().manual_seed(0)
    t = init.kaiming_normal_(ember.empty(400, 50), mode=mode, nonlinearity="relu", generator=g)
    fan = 50 if mode == "fan_in" else 400
    std = math.sqrt(2.0) / math.sqrt(fan)
    # 20,000 draws: the sample std is within 0.5% and the mean within 0.7% of std (1 sigma)
    assert abs(t.numpy().std() - std) < 0.02 * std
    assert abs(t.numpy().mean()) < 0.03 * std


def test_xavier():
    t = init.xavier_uniform_(ember.empty(300, 100), gain=2.0)
    _bound_check(t, 2.0 * math.sqrt(6.0 / 400))
    t = init.xavier_normal_(ember.empty(300, 100), gain=0.5)
    std = 0.5 * math.sqrt(2.0 / 400)
    assert abs(t.numpy().std() - std) < 0.02 * std


def test_uniform_normal_constant():
    _bound_check(init.uniform_(ember.empty(20000), -3, 3), 3)
    a = init.uniform_(ember.empty(20000), 2, 4).numpy()
    assert a.min() >= 2 and a.max() <= 4
    n = init.normal_(ember.empty(20000), 1.5, 0.5).numpy()
    assert abs(n.mean() - 1.5) < 0.02 and abs(n.std() - 0.5) < 0.01
    assert init.constant_(ember.empty(2, 2), 0.3).tolist() == \
        torch.nn.init.constant_(torch.empty(2, 2), 0.3).tolist()
    assert init.ones_(ember.empty(3)).tolist() == [1.0] * 3
    assert init.zeros_(ember.ones(3)).tolist() == [0.0] * 3


def test_trunc_normal():
    t = init.trunc_normal_(ember.empty(40000), mean=0.5, std=1.0, a=-1.0, b=1.5).numpy()
    assert t.min() >= -1.0 and t.max() <= 1.5
    ref = torch.nn.init.trunc_normal_(torch.empty(400000), mean=0.5, std=1.0, a=-1.0,
                                      b=1.5).numpy()
    assert abs(t.mean() - ref.mean()) < 0.02 and abs(t.std() - ref.std()) < 0.02
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        init.trunc_normal_(ember.empty(10), mean=10.0, a=-1, b=1)
    assert any("more than 2 std" in str(x.message) for x in w)


def test_init_under_no_grad_on_parameters():
    p = ember.nn.Parameter(ember.empty(4, 3))
    for fn in (init.kaiming_uniform_, init.xavier_normal_, init.orthogonal_, init.zeros_,
               init.eye_):
        fn(p)
        assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert p.tolist() == torch.nn.init.eye_(torch.empty(4, 3)).tolist()


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 2, 3), (3, 3)])
def test_orthogonal(shape):
    t = init.orthogonal_(ember.empty(*shape), gain=2.0)
    m = t.numpy().reshape(shape[0], -1).astype(np.float64) / 2.0
    rows, cols = m.shape
    gram = m.T @ m if rows >= cols else m @ m.T
    np.testing.assert_allclose(gram, np.eye(min(rows, cols)), atol=1e-5)


def test_dirac_matches_torch():
    for shape, groups in (((4, 2, 3), 1), ((6, 3, 3, 3), 2), ((2, 2, 3, 3, 3), 1)):
        assert init.dirac_(ember.empty(*shape), groups).tolist() == \
            torch.nn.init.dirac_(torch.empty(*shape), groups).tolist()


def test_sparse():
    t = init.sparse_(ember.empty(10, 30), sparsity=0.3, std=0.1).numpy()
    assert ((t == 0).sum(axis=0) >= 3).all()


def test_generator_reproducible():
    g1, g2 = ember.Generator().manual_seed(7), ember.Generator().manual_seed(7)
    for fn in (init.uniform_, init.normal_, init.xavier_uniform_, init.kaiming_normal_,
               init.orthogonal_, init.trunc_normal_):
        a = fn(ember.empty(5, 4), generator=g1).tolist()
        b = fn(ember.empty(5, 4), generator=g2).tolist()
        assert a == b, fn.__name__


def test_zero_element_warns():
    with pytest.warns(UserWarning, match="zero-element"):
        t = init.kaiming_uniform_(ember.empty(0, 3))
    assert t.shape == (0, 3)
