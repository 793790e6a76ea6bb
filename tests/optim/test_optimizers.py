"""Optimizers against torch.optim: same params, same gradient sequence, same updates."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember.optim

torch = pytest.importorskip("torch")

N_STEPS = 10
SHAPES = [(3, 4), (5,), ()]

CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "maximize": True}),
    ("Adam", {}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.9), "eps": 1e-6}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "maximize": True, "weight_decay": 0.05}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("AdamW", {}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
    ("AdamW", {"lr": 0.01, "maximize": True, "betas": (0.5, 0.6)}),
    ("RMSprop", {}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "maximize": True}),
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-6, "maximize": True}),
]

TOL = {"float32": {"rtol": 2e-5, "atol": 2e-6}, "float64": {"rtol": 1e-12, "atol": 1e-13}}


def _ids(case):
    name, kw = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kw.items())


def _make(lib, arrays, dtype):
    dt = getattr(lib, dtype)
    return [lib.tensor(a, dtype=dt, requires_grad=True) for a in arrays]


def _grads(rng, n_params, n_steps=N_STEPS):
    return [[rng.standard_normal(s) for s in SHAPES[:n_params]] for _ in range(n_steps)]


def _run(lib, opt, params, grads, dtype):
    dt = getattr(lib, dtype)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = lib.tensor(g, dtype=dt)
        opt.step()


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def assert_state_equal(e_opt, t_opt, tol):
    e_sd, t_sd = e_opt.state_dict(), t_opt.state_dict()
    assert e_sd["param_groups"] == t_sd["param_groups"]
    assert sorted(e_sd["state"]) == sorted(t_sd["state"])
    for k, t_state in t_sd["state"].items():
        e_state = e_sd["state"][k]
        assert sorted(e_state) == sorted(t_state)
        for key, tv in t_state.items():
            ev = e_state[key]
            assert isinstance(ev, ember.Tensor)
            assert str(ev.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], key
            assert tuple(ev.shape) == tuple(tv.shape), key
            np.testing.assert_allclose(_np(ev), _np(tv), **tol, err_msg=key)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_matches_torch(case, dtype):
    name, kw = case
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    grads = _grads(rng, len(SHAPES))
    e_params, t_params = _make(ember, arrays, dtype), _make(torch, arrays, dtype)
    e_opt = getattr(ember.optim, name)(e_params, **kw)
    t_opt = getattr(torch.optim, name)(t_params, **kw)
    ids = [id(p) for p in e_params]
    versions = [p._version for p in e_params]
    _run(ember, e_opt, e_params, grads, dtype)
    _run(torch, t_opt, t_params, grads, dtype)
    for e, t in zip(e_params, t_params):
        assert str(e.dtype) == str(t.dtype).replace("torch", "ember")
        assert e.requires_grad and e.is_leaf and e.grad_fn is None
        np.testing.assert_allclose(_np(e), _np(t), **TOL[dtype])
    assert [id(p) for p in e_opt.param_groups[0]["params"]] == ids
    assert all(p._version > v for p, v in zip(e_params, versions))  # updated in place
    assert_state_equal(e_opt, t_opt, TOL[dtype])


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad"])
def test_param_groups_with_different_lrs(name):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    grads = _grads(rng, 3)
    extra = {"momentum": 0.9} if name == "SGD" else {}

    def groups(params):
        return [{"params": params[:2]}, {"params": [params[2]], "lr": 0.5, "weight_decay": 0.1}]

    e_params, t_params = _make(ember, arrays, "float64"), _make(torch, arrays, "float64")
    e_opt = getattr(ember.optim, name)(groups(e_params), lr=0.01, **extra)
    t_opt = getattr(torch.optim, name)(groups(t_params), lr=0.01, **extra)
    _run(ember, e_opt, e_params, grads, "float64")
    _run(torch, t_opt, t_params, grads, "float64")
    for e, t in zip(e_params, t_params):
        np.testing.assert_allclose(_np(e), _np(t), **TOL["float64"])
    assert_state_equal(e_opt, t_opt, TOL["float64"])


def test_add_param_group_and_missing_grads():
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    res = []
    for lib in (ember, torch):
        ps = _make(lib, arrays, "float64")
        opt = lib.optim.Adam([ps[0]], lr=0.1)
        opt.add_param_group({"params": ps[1:], "lr": 0.2, "amsgrad": True})
        for i in range(4):
            ps[0].grad = lib.tensor(np.full(SHAPES[0], 0.5 + i), dtype=lib.float64)
            if i % 2:  # params without a grad are skipped and get no state
                ps[2].grad = lib.tensor(np.full(SHAPES[2], -1.0), dtype=lib.float64)
            opt.step()
        res.append(([_np(p) for p in ps], opt))
    for e, t in zip(res[0][0], res[1][0]):
        np.testing.assert_allclose(e, t, **TOL["float64"])
    assert_state_equal(res[0][1], res[1][1], TOL["float64"])


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    p = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = ember.optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    assert p.grad is not None
    opt.zero_grad(set_to_none=set_to_none)
    if set_to_none:
        assert p.grad is None
    else:
        np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])
        assert not p.grad.requires_grad
    opt.zero_grad()
    assert p.grad is None


def test_step_with_closure_and_backward():
    res = []
    for lib in (ember, torch):
        w = lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
        losses = []
        for _ in range(5):
            def closure():
                opt.zero_grad()
                loss = ((w - 1.5) ** 2).sum()
                loss.backward()
                return loss
            losses.append(float(opt.step(closure).detach()))
        res.append((_np(w), losses))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)


def test_step_runs_without_grad_tracking():
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = ember.optim.Adam([w], lr=0.1)
    w.grad = ember.tensor([1.0, 1.0])
    opt.step()
    assert w.grad_fn is None and w.is_leaf
    for v in opt.state[w].values():
        assert not v.requires_grad


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_state_dict_round_trip(case):
    """Save mid-run from ember, load into a fresh ember optimizer, continue: same as torch
    running straight through; and the saved structure equals torch's."""
    name, kw = case
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    grads = _grads(rng, 3)
    t_params = _make(torch, arrays, "float64")
    t_opt = getattr(torch.optim, name)(t_params, **kw)
    _run(torch, t_opt, t_params, grads, "float64")

    e_params = _make(ember, arrays, "float64")
    e_opt = getattr(ember.optim, name)(e_params, **kw)
    _run(ember, e_opt, e_params, grads[:4], "float64")
    saved = copy.deepcopy(e_opt.state_dict())
    fresh = getattr(ember.optim, name)(e_params, **{**kw, "lr": 123.0})
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["lr"] == e_opt.param_groups[0]["lr"]
    assert fresh.param_groups[0]["params"][0] is e_params[0]
    _run(ember, fresh, e_params, grads[4:], "float64")
    for e, t in zip(e_params, t_params):
        np.testing.assert_allclose(_np(e), _np(t), **TOL["float64"])
    assert_state_equal(fresh, t_opt, TOL["float64"])


def test_state_dict_structure_matches_torch():
    arrays = [np.ones(3), np.ones(2), np.ones(())]
    sds = []
    for lib in (ember, torch):
        ps = _make(lib, arrays, "float32")
        opt = lib.optim.Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5}], amsgrad=True)
        for p in ps[:2]:
            p.grad = lib.ones_like(p)
        opt.step()
        sds.append(opt.state_dict())
    e, t = sds
    assert e["param_groups"] == t["param_groups"]
    assert list(e["state"]) == list(t["state"]) == [0, 1]
    assert {k: list(v) for k, v in e["state"].items()} == {
        k: list(v) for k, v in t["state"].items()}
    assert e["state"][0]["step"].dtype == ember.float32 and e["state"][0]["step"].shape == ()


def test_load_state_dict_casts_to_param_dtype():
    p32 = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = ember.optim.Adam([p32], lr=0.1)
    p32.grad = ember.tensor([1.0, -1.0])
    opt.step()
    sd = opt.state_dict()
    p64 = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    opt64 = ember.optim.Adam([p64], lr=0.1)
    opt64.load_state_dict(sd)
    assert opt64.state[p64]["exp_avg"].dtype == ember.float64
    assert opt64.state[p64]["step"].dtype == ember.float32
    assert sd["state"][0]["exp_avg"].dtype == ember.float32  # the input is not modified


def test_adagrad_state_initialised_up_front():
    p = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = ember.optim.Adagrad([p], initial_accumulator_value=0.25)
    tp = torch.tensor([1.0, 2.0], requires_grad=True)
    topt = torch.optim.Adagrad([tp], initial_accumulator_value=0.25)
    assert_state_equal(opt, topt, TOL["float32"])


def test_repr():
    p = ember.tensor([1.0], requires_grad=True)
    r = repr(ember.optim.SGD([p], lr=0.5))
    assert r.startswith("SGD (") and "lr: 0.5" in r and "Parameter Group 0" in r


def test_pickle_round_trip_with_scheduler_attached():
    import pickle

    p = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = ember.optim.Adam([p], lr=0.1)
    ember.optim.lr_scheduler.StepLR(opt, 2)
    p.grad = ember.tensor([1.0, -1.0])
    opt.step()
    p2, opt2 = pickle.loads(pickle.dumps((p, opt)))
    assert opt2.param_groups[0]["params"][0] is p2
    np.testing.assert_allclose(opt2.state[p2]["exp_avg"].numpy(), opt.state[p]["exp_avg"].numpy())


LOWP_ULP_AT_2 = {"float16": 2.0**-9, "bfloat16": 2.0**-6}  # spacing of values in [2, 4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", [CASES[i] for i in (1, 3, 7, 8, 12, 17, 18, 21)], ids=_ids)
def test_low_precision_params(case, dtype):
    """Half-precision params and state: within one rounding step per op chain of torch (torch
    fuses some scalar multiplies in float32 before rounding once)."""
    name, kw = case
    rng = np.random.default_rng(5)
    arrays = [np.clip(rng.standard_normal((4, 5)), -1.5, 1.5)]
    grads = [[rng.standard_normal((4, 5))] for _ in range(N_STEPS)]
    e_params, t_params = _make(ember, arrays, dtype), _make(torch, arrays, dtype)
    e_opt = getattr(ember.optim, name)(e_params, **kw)
    t_opt = getattr(torch.optim, name)(t_params, **kw)
    _run(ember, e_opt, e_params, grads, dtype)
    _run(torch, t_opt, t_params, grads, dtype)
    e, t = e_params[0].detach().float().numpy(), t_params[0].detach().float().numpy()
    assert e_params[0].dtype == getattr(ember, dtype)
    assert np.abs(t).max() < 4
    np.testing.assert_allclose(e, t, rtol=0, atol=2 * LOWP_ULP_AT_2[dtype])


def test_named_parameters():
    """torch 2.x takes ``named_parameters()``: the names go to ``param_names`` in the groups
    and the state dict."""
    sds = []
    for lib in (ember, torch):
        lin = lib.nn.Linear(3, 2)
        opt = lib.optim.NAdam(lin.named_parameters(), lr=0.01)
        assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
        assert opt.param_groups[0]["params"][0] is lin.weight
        opt.add_param_group({"params": [("extra", lib.zeros(2, requires_grad=True))]})
        with pytest.raises(ValueError, match="all optimizer param groups should be with/without "
                                             "names. cannot add param group without names"):
            opt.add_param_group({"params": [lib.zeros(2, requires_grad=True)]})
        with pytest.raises(ValueError, match="Some param names are missing"):
            lib.optim.SGD([("w", lib.zeros(2, requires_grad=True)),
                           lib.zeros(2, requires_grad=True)])
        sds.append(opt.state_dict()["param_groups"])
        fresh = lib.optim.NAdam(lin.named_parameters(), lr=0.5)
        fresh.add_param_group({"params": [("extra", lib.zeros(2, requires_grad=True))]})
        fresh.load_state_dict(opt.state_dict())
        assert fresh.param_groups[1]["param_names"] == ["extra"]
    assert sds[0] == sds[1]
