"""Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop against torch.optim: signatures, updates
step by step (given gradients, and a small model trained from the same weights), state dicts
loaded across the two libraries, param groups, tensor lr and an lr scheduler."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ember
import ember.optim

torch = pytest.importorskip("torch")

N_STEPS = 25
SHAPES = [(3, 4), (5,), ()]

CASES = [
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.1}),
    ("Adadelta", {"maximize": True}),
    ("Adadelta", {"rho": 1.0, "foreach": False, "capturable": False}),  # no averaging
    ("Adamax", {}),
    ("Adamax", {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}),
    ("Adamax", {"lr": 0.01, "maximize": True}),
    ("NAdam", {}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", {"lr": 0.01, "momentum_decay": 0.1, "betas": (0.8, 0.9), "maximize": True}),
    ("RAdam", {}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.01, "betas": (0.5, 0.6), "maximize": True}),  # rho_t never above 5
    ("ASGD", {}),
    ("ASGD", {"lr": 0.05, "lambd": 0.01, "alpha": 0.5, "t0": 5, "weight_decay": 0.1}),
    ("ASGD", {"lr": 0.05, "t0": 0, "maximize": True}),
    ("Rprop", {}),
    ("Rprop", {"lr": 0.1, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2)}),
    ("Rprop", {"lr": 0.05, "maximize": True}),
]
NAMES = ["Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"]

# a few roundings apart (torch fuses ``a + alpha * b`` into one FMA; ember rounds twice)
TOL = {"float32": {"rtol": 2e-5, "atol": 2e-6}, "float64": {"rtol": 1e-12, "atol": 1e-13}}


def _ids(case):
    name, kw = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kw.items())


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _make(lib, arrays, dtype):
    return [lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True) for a in arrays]


def _set_grads(lib, params, grads, dtype):
    for p, g in zip(params, grads):
        p.grad = lib.tensor(g, dtype=getattr(lib, dtype))


def _to_lib(lib, value):
    """A state dict value converted to ``lib`` through NumPy (dtypes kept)."""
    if hasattr(value, "detach"):
        return lib.tensor(_np(value).copy(), dtype=getattr(lib, str(value.dtype).split(".")[-1]))
    if isinstance(value, dict):
        return {k: _to_lib(lib, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_lib(lib, v) for v in value)
    return value


def assert_state_equal(e_opt, t_opt, tol):
    e_sd, t_sd = e_opt.state_dict(), t_opt.state_dict()
    assert e_sd["param_groups"] == t_sd["param_groups"]
    assert sorted(e_sd["state"]) == sorted(t_sd["state"])
    for k, t_state in t_sd["state"].items():
        e_state = e_sd["state"][k]
        assert list(e_state) == list(t_state)
        for key, tv in t_state.items():
            ev = e_state[key]
            assert isinstance(ev, ember.Tensor), key
            assert str(ev.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], key
            assert tuple(ev.shape) == tuple(tv.shape), key
            np.testing.assert_allclose(_np(ev), _np(tv), **tol, err_msg=key)


@pytest.mark.parametrize("name", NAMES + ["LBFGS", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_signature_matches_torch(name):
    def params(cls):
        sig = inspect.signature(cls)
        return [(p.name, p.kind, p.default) for p in sig.parameters.values()]

    assert params(getattr(ember.optim, name)) == params(getattr(torch.optim, name))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_given_gradients_match_torch_every_step(case, dtype):
    name, kw = case
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    e_params, t_params = _make(ember, arrays, dtype), _make(torch, arrays, dtype)
    e_opt = getattr(ember.optim, name)(e_params, **kw)
    t_opt = getattr(torch.optim, name)(t_params, **kw)
    versions = [p._version for p in e_params]
    for step in range(N_STEPS):
        grads = [rng.standard_normal(s) for s in SHAPES]
        if step % 7 == 3:
            grads[1] = np.zeros(SHAPES[1])  # zero gradients (Rprop's sign 0, Adamax's eps)
        _set_grads(ember, e_params, grads, dtype)
        _set_grads(torch, t_params, grads, dtype)
        e_opt.step()
        t_opt.step()
        for e, t in zip(e_params, t_params):
            np.testing.assert_allclose(_np(e), _np(t), **TOL[dtype], err_msg=f"step {step}")
    for e in e_params:
        assert e.dtype == getattr(ember, dtype) and e.is_leaf and e.requires_grad
    assert all(p._version > v for p, v in zip(e_params, versions))  # updated in place
    assert_state_equal(e_opt, t_opt, TOL[dtype])


def _mlp_params(rng):
    return [rng.standard_normal((6, 3)) * 0.5, rng.standard_normal(6) * 0.1,
            rng.standard_normal((2, 6)) * 0.5, rng.standard_normal(2) * 0.1]


def _mlp_loss(lib, params, x, y):
    w1, b1, w2, b2 = params
    h = lib.tanh(x @ w1.T + b1)
    return ((h @ w2.T + b2 - y) ** 2).mean()


# gradients come from each library's own forward and backward, which sum in different orders
MODEL_TOL = {"float32": {"rtol": 1e-4, "atol": 1e-5}, "float64": {"rtol": 1e-10, "atol": 1e-12}}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", [c for c in CASES if c[1].get("rho") != 1.0], ids=_ids)
def test_training_a_small_model_matches_torch(case, dtype):
    """Same initial weights and data; each library computes its own loss and gradients."""
    name, kw = case
    rng = np.random.default_rng(1)
    arrays = _mlp_params(rng)
    xs = [rng.standard_normal((8, 3)) for _ in range(N_STEPS)]
    ys = [rng.standard_normal((8, 2)) for _ in range(N_STEPS)]
    e_params, t_params = _make(ember, arrays, dtype), _make(torch, arrays, dtype)
    e_opt = getattr(ember.optim, name)(e_params, **kw)
    t_opt = getattr(torch.optim, name)(t_params, **kw)
    for step, (x, y) in enumerate(zip(xs, ys)):
        for lib, ps, opt in ((ember, e_params, e_opt), (torch, t_params, t_opt)):
            dt = getattr(lib, dtype)
            opt.zero_grad()
            loss = _mlp_loss(lib, ps, lib.tensor(x, dtype=dt), lib.tensor(y, dtype=dt))
            loss.backward()
            opt.step()
        for e, t in zip(e_params, t_params):
            np.testing.assert_allclose(_np(e), _np(t), **MODEL_TOL[dtype],
                                       err_msg=f"step {step}")


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_state_dict_loads_across_libraries(case):
    """torch's state dict after 10 steps, converted through NumPy, loads into a fresh ember
    optimizer (and ember's into torch); each continues exactly as the original would."""
    name, kw = case
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(20)]

    def run(lib, opt, params, gs):
        for g in gs:
            _set_grads(lib, params, g, "float64")
            opt.step()

    t_params, e_params = _make(torch, arrays, "float64"), _make(ember, arrays, "float64")
    t_opt = getattr(torch.optim, name)(t_params, **kw)
    e_opt = getattr(ember.optim, name)(e_params, **kw)
    run(torch, t_opt, t_params, grads[:10])
    run(ember, e_opt, e_params, grads[:10])
    t_saved, e_saved = t_opt.state_dict(), e_opt.state_dict()
    # torch -> ember
    e2_params = [ember.tensor(_np(p).copy(), requires_grad=True) for p in t_params]
    e2_opt = getattr(ember.optim, name)(e2_params, **{**kw, "lr": 123.0})
    e2_opt.load_state_dict(_to_lib(ember, t_saved))
    assert e2_opt.param_groups[0]["lr"] == t_opt.param_groups[0]["lr"]
    # ember -> torch
    t2_params = [torch.tensor(_np(p).copy(), requires_grad=True) for p in e_params]
    t2_opt = getattr(torch.optim, name)(t2_params, **{**kw, "lr": 123.0})
    t2_opt.load_state_dict(_to_lib(torch, e_saved))
    # ember -> ember and torch -> torch, mid-training
    e3_opt = getattr(ember.optim, name)(e_params, **kw)
    e3_opt.load_state_dict(e_saved)
    t3_params = [torch.tensor(_np(p).copy(), requires_grad=True) for p in t_params]
    t3_opt = getattr(torch.optim, name)(t3_params, **kw)
    t3_opt.load_state_dict(t_saved)
    for lib, opt, params in ((torch, t3_opt, t3_params), (ember, e2_opt, e2_params),
                             (torch, t2_opt, t2_params), (ember, e3_opt, e_params)):
        run(lib, opt, params, grads[10:])
    # loading casts floating state to the params' dtype (NAdam's mu_product, ASGD's eta and
    # mu become float64 here), in both libraries: compare loaded with loaded
    for t3, e2, t2, e3 in zip(t3_params, e2_params, t2_params, e_params):
        np.testing.assert_allclose(_np(e2), _np(t3), **TOL["float64"])
        np.testing.assert_allclose(_np(e3), _np(t2), **TOL["float64"])
    assert_state_equal(e2_opt, t3_opt, TOL["float64"])
    assert_state_equal(e3_opt, t2_opt, TOL["float64"])


@pytest.mark.parametrize("name", NAMES)
def test_param_groups_with_their_own_hyperparameters(name):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    extra = {"Adadelta": {"rho": 0.5}, "Adamax": {"betas": (0.5, 0.9)},
             "NAdam": {"momentum_decay": 0.01}, "RAdam": {"decoupled_weight_decay": True},
             "ASGD": {"t0": 3}, "Rprop": {"etas": (0.4, 1.3)}}[name]

    def groups(params):
        return [{"params": params[:2]},
                {"params": [params[2]], "lr": 0.5, "maximize": True, **extra}]

    e_params, t_params = _make(ember, arrays, "float64"), _make(torch, arrays, "float64")
    e_opt = getattr(ember.optim, name)(groups(e_params), lr=0.01)
    t_opt = getattr(torch.optim, name)(groups(t_params), lr=0.01)
    for _ in range(12):
        grads = [rng.standard_normal(s) for s in SHAPES]
        _set_grads(ember, e_params, grads, "float64")
        _set_grads(torch, t_params, grads, "float64")
        e_opt.step()
        t_opt.step()
    for e, t in zip(e_params, t_params):
        np.testing.assert_allclose(_np(e), _np(t), **TOL["float64"])
    assert_state_equal(e_opt, t_opt, TOL["float64"])


@pytest.mark.parametrize("name", NAMES)
def test_tensor_learning_rate(name):
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    res = []
    for lib in (ember, torch):
        params = _make(lib, arrays, "float32")
        opt = getattr(lib.optim, name)(params, lr=lib.tensor(0.02))
        for _ in range(6):
            _set_grads(lib, params, [np.cos(np.arange(np.prod(s))).reshape(s) for s in SHAPES],
                       "float32")
            opt.step()
        res.append([_np(p) for p in params])
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, **TOL["float32"])


def test_step_lr_over_adamax():
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(20)]
    res = []
    for lib in (ember, torch):
        params = _make(lib, arrays, "float64")
        opt = lib.optim.Adamax(params, lr=0.1)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
        lrs, traj = [], []
        for g in grads:
            _set_grads(lib, params, g, "float64")
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
            traj.append([_np(p).copy() for p in params])
        res.append((lrs, traj, sched.get_last_lr()))
    assert res[0][0] == res[1][0] and res[0][2] == res[1][2]
    assert res[0][0][-1] == 0.1 * 0.5**5
    for e_step, t_step in zip(res[0][1], res[1][1]):
        for e, t in zip(e_step, t_step):
            np.testing.assert_allclose(e, t, **TOL["float64"])


@pytest.mark.parametrize("name", NAMES)
def test_params_without_grad_are_skipped(name):
    res = []
    for lib in (ember, torch):
        params = _make(lib, [np.ones(3), np.full(2, 2.0)], "float64")
        opt = getattr(lib.optim, name)(params)
        for i in range(4):
            params[0].grad = lib.tensor(np.full(3, 0.5 - i), dtype=lib.float64)
            opt.step()
        assert len(opt.state) == 1
        res.append([_np(p) for p in params])
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, **TOL["float64"])


LOWP_ULP_AT_2 = {"float16": 2.0**-9, "bfloat16": 2.0**-6}  # spacing of values in [2, 4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_low_precision_params(case, dtype):
    """Half-precision params and state: within a rounding or two of torch (torch fuses
    ``a + alpha * b`` in float32 before rounding once)."""
    name, kw = case
    rng = np.random.default_rng(5)
    arrays = [np.clip(rng.standard_normal((4, 5)), -1.5, 1.5)]
    e_params, t_params = _make(ember, arrays, dtype), _make(torch, arrays, dtype)
    e_opt = getattr(ember.optim, name)(e_params, **kw)
    t_opt = getattr(torch.optim, name)(t_params, **kw)
    for _ in range(10):
        grads = [rng.standard_normal((4, 5))]
        _set_grads(ember, e_params, grads, dtype)
        _set_grads(torch, t_params, grads, dtype)
        e_opt.step()
        t_opt.step()
    e, t = e_params[0].detach().float().numpy(), t_params[0].detach().float().numpy()
    assert e_params[0].dtype == getattr(ember, dtype)
    assert np.abs(t).max() < 4
    np.testing.assert_allclose(e, t, rtol=0, atol=2 * LOWP_ULP_AT_2[dtype])
