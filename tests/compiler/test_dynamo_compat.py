"""PyTorch's ``torch._dynamo`` surface that scripts touch (issue 13): the exception classes at
their paths, the requires_grad guard under ``fail_on_recompile``, config knobs, and
``mode="reduce-overhead"`` on a module whose class was made by ``exec``."""

from __future__ import annotations

import pytest

import ember
from ember.compiler import set_stance
from tests.compiler.helpers import Counting

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh():
    ember.compiler.reset()
    set_stance("default")
    yield
    set_stance("default")
    ember.compiler.reset()


_EXC_NAMES = ["Unsupported", "UserError", "TorchRuntimeError", "BackendCompilerFailed",
              "InternalTorchDynamoError", "RestartAnalysis", "RecompileError", "SkipFrame",
              "ShortenTraceback", "ObservedException", "UncapturedHigherOrderOpError",
              "ResetRequired", "TorchDynamoException"]


@pytest.mark.parametrize("name", _EXC_NAMES)
def test_exception_classes_at_torchs_paths_with_torchs_bases(name):
    import torch._dynamo.exc as texc
    ours, theirs = getattr(ember._dynamo.exc, name), getattr(texc, name)
    for base in ("TorchDynamoException", "ShortenTraceback"):
        if issubclass(theirs, getattr(texc, base)):
            assert issubclass(ours, getattr(ember._dynamo.exc, base)), base
    assert issubclass(ours, RuntimeError) == issubclass(theirs, RuntimeError)
    assert issubclass(ours, ember.EmberError)


def test_graph_break_is_caught_as_unsupported():
    @ember.compile(fullgraph=True)
    def f(x):
        return x + 1 if bool(x.sum() > 0) else x

    with pytest.raises(ember._dynamo.exc.Unsupported) as info:
        f(ember.ones(2))
    assert isinstance(info.value, ember._dynamo.exc.TorchDynamoException)
    assert info.value.reason  # ember's GraphBreakError, with its reason
    assert ember._dynamo.exc.Unsupported is ember.compiler.GraphBreakError


def test_user_error_signature():
    e = ember._dynamo.exc.UserError(ember._dynamo.exc.UserErrorType.INVALID_INPUT, "bad input")
    assert str(e) == "bad input" and e.error_type.name == "INVALID_INPUT"


def test_config_knobs_scripts_set():
    cfg = ember._dynamo.config
    for name in ("suppress_errors", "cache_size_limit", "verbose", "capture_scalar_outputs",
                 "recompile_limit"):
        assert getattr(cfg, name) == getattr(torch._dynamo.config, name), name
    old = cfg.cache_size_limit
    cfg.cache_size_limit = 3
    try:
        assert cfg.recompile_limit == 3
    finally:
        cfg.cache_size_limit = old
    ember._dynamo.reset()


@pytest.mark.parametrize("fn", [lambda x: (x * 2).sin().sum(), lambda x: x * 2])
def test_fail_on_recompile_fires_on_requires_grad_change(fn):
    # PyTorch guards each tensor input's requires_grad (checked: torch 2.13 raises here too)
    cb = Counting()
    f = ember.compile(fn, backend=cb)
    f(ember.ones(4))
    with set_stance("fail_on_recompile"):
        f(ember.ones(4))  # same flags: fine
        with pytest.raises(RuntimeError, match=r"requires_grad mismatch\. expected "
                                               r"requires_grad=0"):
            f(ember.ones(4, requires_grad=True))
    out = f(ember.ones(4, requires_grad=True))  # default stance: recompiles and runs
    assert out.requires_grad


def test_requires_grad_guard_names_the_argument():
    @ember.compile
    def step(weight, x):
        return (weight * x).sum()

    step(ember.ones(2), ember.ones(2))
    with set_stance("fail_on_recompile"), pytest.raises(
            ember._dynamo.exc.RecompileError,
            match=r"function name: 'step'.*\n.*\n    - tensor 'weight' requires_grad mismatch"):
        step(ember.ones(2, requires_grad=True), ember.ones(2))


def test_reduce_overhead_with_a_class_defined_by_exec():
    ns = {"ember": ember}
    exec("class Net(ember.nn.Module):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n"
         "        self.fc = ember.nn.Linear(4, 3)\n"
         "    def forward(self, x):\n"
         "        return ember.nn.functional.relu(self.fc(x)) * 2\n", ns)
    m = ns["Net"]()
    assert type(m).forward.__module__ is None
    cm = ember.compile(m, mode="reduce-overhead")
    x = ember.randn(2, 4)
    for _ in range(3):
        y = cm(x)
    assert ember.equal(y, m(x))


def test_requires_grad_guard_on_a_compiled_module_names_forwards_argument():
    m = ember.nn.Linear(3, 2)
    cm = ember.compile(m)
    cm(ember.ones(1, 3))
    with set_stance("fail_on_recompile"), pytest.raises(
            RuntimeError, match=r"tensor 'input' requires_grad mismatch"):
        cm(ember.ones(1, 3, requires_grad=True))
