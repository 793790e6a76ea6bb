"""Optimizer argument errors: same exception types and messages as torch.optim."""

from __future__ import annotations

import pytest

import ember
import ember.optim

torch = pytest.importorskip("torch")


def _p(lib):
    return lib.tensor([1.0, 2.0], requires_grad=True)


BAD_ARGS = [
    ("SGD", {"lr": -1.0}, r"Invalid learning rate: -1.0"),
    ("SGD", {"momentum": -0.1}, r"Invalid momentum value: -0.1"),
    ("SGD", {"weight_decay": -1}, r"Invalid weight_decay value: -1"),
    ("SGD", {"nesterov": True}, r"Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", {"nesterov": True, "momentum": 0.9, "dampening": 0.1}, r"Nesterov momentum"),
    ("Adam", {"lr": -0.1}, r"Invalid learning rate"),
    ("Adam", {"eps": -1.0}, r"Invalid epsilon value: -1.0"),
    ("Adam", {"betas": (1.0, 0.9)}, r"Invalid beta parameter at index 0: 1.0"),
    ("Adam", {"betas": (0.9, -0.1)}, r"Invalid beta parameter at index 1: -0.1"),
    ("Adam", {"weight_decay": -0.1}, r"Invalid weight_decay value"),
    ("AdamW", {"betas": (0.9, 1.5)}, r"Invalid beta parameter at index 1"),
    ("RMSprop", {"alpha": -0.5}, r"Invalid alpha value: -0.5"),
    ("RMSprop", {"momentum": -0.5}, r"Invalid momentum value"),
    ("RMSprop", {"eps": -0.5}, r"Invalid epsilon value"),
    ("Adagrad", {"lr_decay": -1.0}, r"Invalid lr_decay value: -1.0"),
    ("Adagrad", {"initial_accumulator_value": -1.0}, r"Invalid initial_accumulator_value"),
    ("Adagrad", {"eps": -1.0}, r"Invalid epsilon value"),
    ("Adadelta", {"lr": -1}, r"Invalid learning rate: -1"),
    ("Adadelta", {"rho": 1.5}, r"Invalid rho value: 1.5"),
    ("Adadelta", {"rho": -0.1}, r"Invalid rho value: -0.1"),
    ("Adadelta", {"eps": -1e-6}, r"Invalid epsilon value: -1e-06"),
    ("Adadelta", {"weight_decay": -1}, r"Invalid weight_decay value: -1"),
    ("Adamax", {"lr": -0.5}, r"Invalid learning rate: -0.5"),
    ("Adamax", {"betas": (1.0, 0.9)}, r"Invalid beta parameter at index 0: 1.0"),
    ("Adamax", {"betas": (0.9, 1.0)}, r"Invalid beta parameter at index 1: 1.0"),
    ("Adamax", {"eps": -1.0}, r"Invalid epsilon value"),
    ("NAdam", {"momentum_decay": -0.1}, r"Invalid momentum_decay value: -0.1"),
    ("NAdam", {"betas": (-0.1, 0.9)}, r"Invalid beta parameter at index 0: -0.1"),
    ("NAdam", {"weight_decay": -1.0}, r"Invalid weight_decay value"),
    ("RAdam", {"eps": -1.0}, r"Invalid epsilon value"),
    ("RAdam", {"betas": (0.9, 2.0)}, r"Invalid beta parameter at index 1: 2.0"),
    ("ASGD", {"lr": -1.0}, r"Invalid learning rate: -1.0"),
    ("ASGD", {"weight_decay": -0.1}, r"Invalid weight_decay value: -0.1"),
    ("Rprop", {"etas": (1.5, 1.2)}, r"Invalid eta values: 1.5, 1.2"),
    ("Rprop", {"etas": (0.5, 0.9)}, r"Invalid eta values: 0.5, 0.9"),
    ("Rprop", {"lr": -0.1}, r"Invalid learning rate"),
    ("LBFGS", {"lr": -1}, r"Invalid learning rate: -1"),
]


@pytest.mark.parametrize("name,kw,match", BAD_ARGS)
def test_bad_hyperparameters(name, kw, match):
    for lib in (torch, ember):
        with pytest.raises(ValueError, match=match):
            getattr(lib.optim, name)([_p(lib)], **kw)


def _both(fn, exc, match):
    for lib in (torch, ember):
        with pytest.raises(exc, match=match):
            fn(lib)


def test_empty_parameter_list():
    _both(lambda lib: lib.optim.SGD([], lr=0.1), ValueError,
          "optimizer got an empty parameter list")


def test_single_tensor_not_iterable():
    _both(lambda lib: lib.optim.SGD(_p(lib), lr=0.1), TypeError,
          "params argument given to the optimizer should be an iterable of Tensors or dicts")


def test_param_in_two_groups():
    def fn(lib):
        p = _p(lib)
        lib.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    _both(fn, ValueError, "some parameters appear in more than one parameter group")


def test_add_param_group_duplicate():
    def fn(lib):
        p = _p(lib)
        opt = lib.optim.Adam([p])
        opt.add_param_group({"params": p})
    _both(fn, ValueError, "some parameters appear in more than one parameter group")


def test_non_leaf():
    _both(lambda lib: lib.optim.Adam([_p(lib) * 2]), ValueError,
          "can't optimize a non-leaf Tensor")


def test_non_tensor_param():
    _both(lambda lib: lib.optim.Adam([_p(lib), 3]), TypeError,
          "optimizer can only optimize Tensors, but one of the params is int")


def test_set_of_params():
    _both(lambda lib: lib.optim.SGD([{"params": {_p(lib)}}], lr=0.1), TypeError,
          "optimizer parameters need to be organized in ordered collections")


def test_required_parameter():
    def fn(lib):
        class Opt(lib.optim.Optimizer):
            def __init__(self, params):
                from importlib import import_module
                req = import_module(lib.__name__ + ".optim.optimizer").required
                super().__init__(params, {"lr": req})
        Opt([_p(lib)])
    _both(fn, ValueError,
          "parameter group didn't specify a value of required optimization parameter lr")


def test_load_state_dict_mismatch():
    def groups(lib):
        opt = lib.optim.SGD([_p(lib)], lr=0.1)
        opt.load_state_dict(lib.optim.SGD([{"params": [_p(lib)]}, {"params": [_p(lib)]}],
                                          lr=0.1).state_dict())
    _both(groups, ValueError, "loaded state dict has a different number of parameter groups")

    def sizes(lib):
        opt = lib.optim.SGD([_p(lib)], lr=0.1)
        opt.load_state_dict(lib.optim.SGD([_p(lib), _p(lib)], lr=0.1).state_dict())
    _both(sizes, ValueError, "doesn't match the size of optimizer's group")


def test_duplicate_params_warn():
    p = _p(ember)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        ember.optim.SGD([p, p], lr=0.1)


@pytest.mark.parametrize("name", ["Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop",
                                  "LBFGS"])
def test_tensor_lr_must_have_one_element(name):
    for lib in (torch, ember):
        with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
            getattr(lib.optim, name)([_p(lib)], lr=lib.tensor([0.1, 0.2]))


def test_lbfgs_refuses_param_groups_and_unknown_line_search():
    _both(lambda lib: lib.optim.LBFGS([{"params": [_p(lib)]}, {"params": [_p(lib)]}]),
          ValueError, "LBFGS doesn't support per-parameter options")

    def unknown(lib):
        p = _p(lib)
        opt = lib.optim.LBFGS([p], line_search_fn="backtracking")

        def closure():
            opt.zero_grad()
            loss = (p * p).sum()
            loss.backward()
            return loss
        opt.step(closure)

    _both(unknown, RuntimeError, "only 'strong_wolfe' is supported")
