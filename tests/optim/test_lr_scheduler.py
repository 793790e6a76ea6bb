"""Learning-rate schedulers against torch.optim.lr_scheduler over 35+ steps."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ember
import ember.optim

torch = pytest.importorskip("torch")

N = 36


def _opt(lib, kind="SGD"):
    ps = [lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([3.0], requires_grad=True)]
    groups = [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.3}]
    if kind == "SGD":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    return getattr(lib.optim, kind)(groups, lr=0.1)


def _S(lib):
    return lib.optim.lr_scheduler


def _lambda_list(lib, o):
    return _S(lib).LambdaLR(o, [lambda e: 0.9**e, lambda e: 1.0 / (1 + e)])


def _sequential(lib, o):
    s = _S(lib)
    return s.SequentialLR(o, [s.LinearLR(o, start_factor=0.2, total_iters=5),
                              s.ExponentialLR(o, gamma=0.9)], milestones=[5])


def _sequential3(lib, o):
    s = _S(lib)
    return s.SequentialLR(o, [s.ConstantLR(o, factor=0.5, total_iters=3),
                              s.CosineAnnealingLR(o, T_max=8),
                              s.StepLR(o, step_size=4, gamma=0.5)], milestones=[6, 14])


SCHEDULERS = {
    "StepLR": lambda lib, o: _S(lib).StepLR(o, step_size=3, gamma=0.5),
    "StepLR-default": lambda lib, o: _S(lib).StepLR(o, step_size=7),
    "MultiStepLR": lambda lib, o: _S(lib).MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ExponentialLR": lambda lib, o: _S(lib).ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda lib, o: _S(lib).CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    "CosineAnnealingLR-7": lambda lib, o: _S(lib).CosineAnnealingLR(o, T_max=7),
    "LambdaLR": lambda lib, o: _S(lib).LambdaLR(o, lambda e: 0.95**e),
    "LambdaLR-list": _lambda_list,
    "LinearLR": lambda lib, o: _S(lib).LinearLR(o, start_factor=0.25, total_iters=8),
    "LinearLR-decay": lambda lib, o: _S(lib).LinearLR(o, 1.0, 0.1, total_iters=10),
    "LinearLR-default": lambda lib, o: _S(lib).LinearLR(o),
    "OneCycleLR": lambda lib, o: _S(lib).OneCycleLR(o, max_lr=0.5, total_steps=40),
    "OneCycleLR-linear": lambda lib, o: _S(lib).OneCycleLR(
        o, max_lr=[0.5, 1.0], total_steps=N, anneal_strategy="linear", pct_start=0.25),
    "OneCycleLR-three-phase": lambda lib, o: _S(lib).OneCycleLR(
        o, max_lr=0.2, epochs=4, steps_per_epoch=10, three_phase=True, div_factor=10.0,
        final_div_factor=100.0, base_momentum=0.8, max_momentum=[0.9, 0.99]),
    "OneCycleLR-no-momentum": lambda lib, o: _S(lib).OneCycleLR(
        o, max_lr=0.2, total_steps=50, cycle_momentum=False),
    "ConstantLR": lambda lib, o: _S(lib).ConstantLR(o, factor=0.5, total_iters=4),
    "MultiplicativeLR": lambda lib, o: _S(lib).MultiplicativeLR(o, lambda e: 0.97),
    "PolynomialLR": lambda lib, o: _S(lib).PolynomialLR(o, total_iters=20, power=2.0),
    "CosineAnnealingWarmRestarts": lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(
        o, T_0=5, T_mult=2, eta_min=0.01),
    "CosineAnnealingWarmRestarts-1": lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 7),
    "ChainedScheduler": lambda lib, o: _S(lib).ChainedScheduler(
        [_S(lib).ExponentialLR(o, 0.95), _S(lib).StepLR(o, 4, 0.5)]),
    "SequentialLR": _sequential,
    "SequentialLR-3": _sequential3,
}


def _trace(lib, factory, kind, n=N):
    opt = _opt(lib, kind)
    sched = factory(lib, opt)
    out = []
    for _ in range(n):
        opt.step()
        sched.step()
        g = opt.param_groups
        out.append((sched.get_last_lr(), [x["lr"] for x in g],
                    [x.get("momentum") for x in g], [x.get("betas") for x in g]))
    return out, sched, opt


def _assert_traces(a, b):
    for i, (ea, ta) in enumerate(zip(a, b)):
        for e, t in zip(ea, ta):
            assert e is not None or t is None
            np.testing.assert_allclose(np.array(e, dtype=float), np.array(t, dtype=float),
                                       rtol=1e-13, atol=1e-15, err_msg=f"step {i}")


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_lr_sequence_matches_torch(name, kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e, e_sched, e_opt = _trace(ember, SCHEDULERS[name], kind)
        t, t_sched, t_opt = _trace(torch, SCHEDULERS[name], kind)
    _assert_traces(e, t)
    assert getattr(e_sched, "last_epoch", None) == getattr(t_sched, "last_epoch", None)
    for eg, tg in zip(e_opt.param_groups, t_opt.param_groups):
        assert set(eg) == set(tg)
        assert eg["initial_lr"] == tg["initial_lr"]


def _round_trip(lib, factory):
    """Run 10 steps, save optimizer and scheduler, rebuild both fresh, load, run the rest."""
    opt = _opt(lib)
    sched = factory(lib, opt)
    for _ in range(10):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 10
    opt2 = _opt(lib)
    opt2.load_state_dict(opt.state_dict())
    sched2 = factory(lib, opt2)
    sched2.load_state_dict(sd)
    out = []
    for _ in range(N - 10):
        opt2.step()
        sched2.step()
        g = opt2.param_groups
        out.append((sched2.get_last_lr(), [x["lr"] for x in g],
                    [x.get("momentum") for x in g], [x.get("betas") for x in g]))
    return out


_RESUMABLE = [n for n in SCHEDULERS if not n.startswith(("Sequential", "Chained"))]


@pytest.mark.parametrize("name", _RESUMABLE)
def test_scheduler_state_dict_round_trip(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        straight, _, _ = _trace(torch, SCHEDULERS[name], "SGD")
        e, t = _round_trip(ember, SCHEDULERS[name]), _round_trip(torch, SCHEDULERS[name])
    _assert_traces(e, t)
    if not name.startswith(("LinearLR", "ConstantLR")):
        # these re-scale the loaded lr when rebuilt (torch too); the rest resume exactly
        _assert_traces(e, straight[10:])


def test_warns_when_scheduler_steps_before_optimizer():
    opt = _opt(ember)
    sched = ember.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match=r"before `optimizer.step\(\)`"):
        sched.step()
    opt2 = _opt(ember)
    sched2 = ember.optim.lr_scheduler.StepLR(opt2, 2)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched2.step()


def test_torch_and_ember_state_dict_keys_agree():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ["StepLR", "CosineAnnealingLR", "OneCycleLR", "LambdaLR", "MultiStepLR"]:
            _, es, _ = _trace(ember, SCHEDULERS[name], "SGD", 3)
            _, ts, _ = _trace(torch, SCHEDULERS[name], "SGD", 3)
            e_sd, t_sd = es.state_dict(), ts.state_dict()
            for key in ("last_epoch", "base_lrs", "_last_lr", "_step_count"):
                assert e_sd[key] == t_sd[key], (name, key)


@pytest.mark.parametrize("name,epochs", [
    ("StepLR", [3, 7, 2, 12]), ("MultiStepLR", [1, 5, 10, 3]), ("ExponentialLR", [4, 9, 0]),
    ("CosineAnnealingLR", [5, 13, 2]), ("LinearLR", [2, 6, 20]), ("ConstantLR", [1, 5, 2]),
    ("PolynomialLR", [3, 25, 1]), ("CosineAnnealingWarmRestarts", [3, 7.5, 40, 0.2, 16]),
])
def test_step_with_epoch_uses_closed_form(name, epochs):
    res = []
    for lib in (ember, torch):
        opt = _opt(lib)
        sched = SCHEDULERS[name](lib, opt)
        lrs = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for ep in epochs:
                sched.step(ep)
                lrs.append(sched.get_last_lr())
        res.append(lrs)
    np.testing.assert_allclose(res[0], res[1], rtol=1e-13)


PLATEAU = [
    {},
    {"mode": "max", "factor": 0.5, "patience": 2},
    {"patience": 1, "threshold": 0.1, "threshold_mode": "abs", "cooldown": 2},
    {"mode": "max", "patience": 0, "threshold_mode": "abs", "min_lr": [0.01, 0.05]},
    {"patience": 2, "factor": 0.3, "min_lr": 0.002, "eps": 1e-3, "cooldown": 1},
]


@pytest.mark.parametrize("kw", PLATEAU, ids=str)
def test_reduce_lr_on_plateau(kw):
    rng = np.random.default_rng(0)
    metrics = list(np.concatenate([np.linspace(1.0, 0.5, 8), 0.5 + 0.01 * rng.random(40)]))
    metrics = [float(m) for m in metrics] + [ember.tensor(0.4)]
    res = []
    for lib in (ember, torch):
        opt = _opt(lib)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        lrs = []
        for m in metrics:
            opt.step()
            sched.step(m if lib is ember or not isinstance(m, ember.Tensor) else float(m))
            lrs.append((sched.get_last_lr(), sched.num_bad_epochs, sched.cooldown_counter,
                        sched.best, sched.last_epoch))
        res.append(lrs)
    for e, t in zip(*res):
        np.testing.assert_allclose(e[0], t[0], rtol=1e-13)
        assert e[1:] == t[1:]
    assert res[0][-1][0] != res[0][0][0] or kw.get("mode") == "max"


def test_reduce_lr_on_plateau_state_dict():
    opt = _opt(ember)
    s = ember.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    for m in [1.0, 1.0, 1.0]:
        s.step(m)
    sd = s.state_dict()
    s2 = ember.optim.lr_scheduler.ReduceLROnPlateau(_opt(ember), mode="max")
    s2.load_state_dict(sd)
    assert s2.mode == "min" and s2.best == 1.0 and s2.num_bad_epochs == s.num_bad_epochs


@pytest.mark.filterwarnings("ignore:Detected call")
def test_initial_lr_and_last_epoch_resume():
    for lib in (ember, torch):
        opt = _opt(lib)
        with pytest.raises(KeyError, match="initial_lr"):
            lib.optim.lr_scheduler.StepLR(opt, 3, last_epoch=4)
    eo, to = _opt(ember), _opt(torch)
    for o in (eo, to):
        for g in o.param_groups:
            g["initial_lr"] = 1.0
    es = ember.optim.lr_scheduler.CosineAnnealingLR(eo, T_max=10, last_epoch=4)
    ts = torch.optim.lr_scheduler.CosineAnnealingLR(to, T_max=10, last_epoch=4)
    lrs = []
    for s in (es, ts):
        seq = []
        for _ in range(8):
            s.step()
            seq.append(s.get_last_lr())
        lrs.append(seq)
    np.testing.assert_allclose(lrs[0], lrs[1], rtol=1e-13)


def _both(fn, exc, match):
    for lib in (torch, ember):
        with pytest.raises(exc, match=match):
            fn(lib)


@pytest.mark.filterwarnings("ignore:Detected call")
def test_scheduler_errors():
    s = lambda lib: lib.optim.lr_scheduler  # noqa: E731
    _both(lambda lib: s(lib).StepLR(object(), 3), TypeError, "object is not an Optimizer")
    _both(lambda lib: s(lib).LinearLR(_opt(lib), start_factor=0.0), ValueError,
          "Starting multiplicative factor")
    _both(lambda lib: s(lib).ConstantLR(_opt(lib), factor=1.5), ValueError,
          "Constant multiplicative factor")
    _both(lambda lib: s(lib).LinearLR(_opt(lib), end_factor=1.5), ValueError,
          "Ending multiplicative factor")
    _both(lambda lib: s(lib).LambdaLR(_opt(lib), [lambda e: 1.0]), ValueError,
          "Expected 2 lr_lambdas, but got 1")
    _both(lambda lib: s(lib).MultiplicativeLR(_opt(lib), 3), TypeError,
          "lr_lambda should be a function, but got int")
    _both(lambda lib: s(lib).CosineAnnealingWarmRestarts(_opt(lib), 0), ValueError,
          "Expected positive integer T_0, but got 0")
    _both(lambda lib: s(lib).CosineAnnealingWarmRestarts(_opt(lib), 3, T_mult=0), ValueError,
          "Expected integer T_mult >= 1, but got 0")
    _both(lambda lib: s(lib).ChainedScheduler([]), ValueError,
          "expects at least one scheduler to be chained")
    _both(lambda lib: s(lib).OneCycleLR(_opt(lib), 0.1), ValueError,
          "You must define either total_steps OR")
    _both(lambda lib: s(lib).OneCycleLR(_opt(lib), 0.1, total_steps=0), ValueError,
          "Expected positive integer total_steps")
    _both(lambda lib: s(lib).OneCycleLR(_opt(lib), 0.1, total_steps=5, pct_start=1), ValueError,
          "Expected float between 0 and 1 pct_start")
    _both(lambda lib: s(lib).OneCycleLR(_opt(lib), 0.1, total_steps=5, anneal_strategy="x"),
          ValueError, "anneal_strategy must be one of 'cos' or 'linear'")
    _both(lambda lib: s(lib).OneCycleLR(_opt(lib), [0.1], total_steps=5), ValueError,
          "max_lr must have the same length as optimizer.param_groups")
    _both(lambda lib: s(lib).OneCycleLR(_opt(lib, "Adagrad"), 0.1, total_steps=5), ValueError,
          "optimizer must support momentum or beta1")
    _both(lambda lib: s(lib).ReduceLROnPlateau(_opt(lib), factor=1.0), ValueError,
          r"Factor should be < 1.0.")
    _both(lambda lib: s(lib).ReduceLROnPlateau(_opt(lib), mode="avg"), ValueError,
          "mode avg is unknown!")
    _both(lambda lib: s(lib).ReduceLROnPlateau(_opt(lib), threshold_mode="x"), ValueError,
          "threshold mode x is unknown!")
    _both(lambda lib: s(lib).ReduceLROnPlateau(_opt(lib), min_lr=[0.1]), ValueError,
          "expected 2 min_lrs, got 1")
    _both(lambda lib: s(lib).SequentialLR(_opt(lib), [], []), ValueError,
          "expects at least one scheduler")
    _both(lambda lib: s(lib).SequentialLR(_opt(lib), [s(lib).StepLR(_opt(lib), 2)], []),
          ValueError, "expects all schedulers to belong to the same optimizer")

    def plateau_in_seq(lib):
        o = _opt(lib)
        s(lib).SequentialLR(o, [s(lib).StepLR(o, 2), s(lib).ReduceLROnPlateau(o)], [3])
    _both(plateau_in_seq, ValueError, "does not support `ReduceLROnPlateau`")

    def bad_milestones(lib):
        o = _opt(lib)
        s(lib).SequentialLR(o, [s(lib).StepLR(o, 2), s(lib).StepLR(o, 3)], [3, 4])
    _both(bad_milestones, ValueError, "expects number of schedulers provided to be one more")

    def too_many_steps(lib):
        o = _opt(lib)
        sched = s(lib).OneCycleLR(o, 0.1, total_steps=3)
        for _ in range(4):
            sched.step()
    _both(too_many_steps, ValueError, "Tried to step 4 times")


def test_cosine_past_t_max_oscillates():
    opt = _opt(ember)
    sched = ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    lrs = []
    for _ in range(8):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert math.isclose(lrs[3], 0.0, abs_tol=1e-15) and math.isclose(lrs[7], 0.1)


@pytest.mark.parametrize("name", ["SequentialLR", "SequentialLR-3"])
def test_sequential_state_dict_round_trip_like_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e, t = _round_trip(ember, SCHEDULERS[name]), _round_trip(torch, SCHEDULERS[name])
    _assert_traces(e, t)


def test_tensor_lr_is_filled_in_place():
    res = []
    for lib in (ember, torch):
        lr = lib.tensor(0.1)
        p = lib.tensor([1.0, 2.0], requires_grad=True)
        opt = lib.optim.SGD([p], lr=lr)
        sched = lib.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)
        seq = []
        for _ in range(6):
            p.grad = lib.ones_like(p)
            opt.step()
            sched.step()
            assert opt.param_groups[0]["lr"] is lr
            last = sched.get_last_lr()[0]
            assert isinstance(last, lib.Tensor) and last is not lr
            seq.append((float(lr), float(last)))
        res.append((seq, p.detach().numpy().tolist()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)
