"""Decompositions (``OpDef.decomp``, ember/compiler/c/decompose.py): ops without a C rule reach C
through their primitives, with eager's values and the op's own gradient."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.compiler.c import backend as cbackend
from ember.compiler.c.decompose import decompose, expandable
from ember.ops import OPS

torch = pytest.importorskip("torch")
TF = torch.nn.functional
# kl_div(reduction="mean") warns (as PyTorch does) in both libraries
pytestmark = pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")

_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy_with_logits", "kl_div")
DECOMPOSED = _LOSSES + ("glu", "prelu", "glu_backward", "prelu_backward",
                        "binary_cross_entropy_backward") + tuple(f"{n}_backward" for n in _LOSSES)


def _inputs(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = rng.standard_normal((4, 6)).astype(np.float32)
    y[0, :2] = 0.0   # kl_div's xlogy(0, 0)
    return x, y


def _cases() -> list:
    """(name, ember fn, torch fn, input arrays)"""
    x, y = _inputs()
    p = np.abs(y)
    w = np.linspace(0.5, 2.0, 6).astype(np.float32)
    out = []
    for red in ("mean", "sum", "none"):
        out += [
            (f"mse-{red}", lambda a, b, r=red, m=F: m.mse_loss(a, b, reduction=r), x, y),
            (f"l1-{red}", lambda a, b, r=red, m=F: m.l1_loss(a, b, reduction=r), x, y),
            (f"smooth_l1-{red}",
             lambda a, b, r=red, m=F: m.smooth_l1_loss(a, b, reduction=r, beta=0.5), x, y),
            (f"huber-{red}",
             lambda a, b, r=red, m=F: m.huber_loss(a, b, reduction=r, delta=0.7), x, y),
            (f"bce_logits-{red}", lambda a, b, r=red, m=F: m.binary_cross_entropy_with_logits(
                a, b.sigmoid(), reduction=r), x, y),
            (f"bce_logits_w_pw-{red}", lambda a, b, r=red, m=F:
             m.binary_cross_entropy_with_logits(a, b.sigmoid(), weight=b.abs() + 0.5,
                                                pos_weight=b[0].abs() + 1.0, reduction=r),
             x, y),
            (f"kl_div-{red}", lambda a, b, r=red, m=F: m.kl_div(a, b, reduction=r), x, p),
            (f"kl_div_log_target-{red}",
             lambda a, b, r=red, m=F: m.kl_div(a, b, reduction=r, log_target=True), x, y),
        ]
    out += [
        ("kl_div-batchmean", lambda a, b, m=F: m.kl_div(a, b, reduction="batchmean"), x, p),
        ("glu-dim1", lambda a, b, m=F: m.glu(a, 1), x, y),
        ("glu-dim0", lambda a, b, m=F: m.glu(a, 0) * b[:2], x, y),
        ("prelu-channels", lambda a, b, m=F: m.prelu(a, b[0]), x, w),
        ("prelu-shared", lambda a, b, m=F: m.prelu(a, b[:1]), x, w),
    ]
    return out


CASES = _cases()


def _run(fn, arrays, dtype):
    return fn(*[ember.tensor(a).to(getattr(ember, dtype)) for a in arrays])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,fn,x,y", CASES, ids=[c[0] for c in CASES])
def test_decomposed_op_lowers_to_c_with_no_extern(name, fn, x, y, dtype):
    ember.compiler.reset()
    got = ember.compile(fn, backend="c")(*[ember.tensor(a).to(getattr(ember, dtype))
                                          for a in (x, y)])
    cg = cbackend.last_compiled()
    assert cg.extern_count == 0, cg.externs
    assert cg.stats.kernels >= 1
    eager = _run(fn, (x, y), dtype)
    ref = fn(*[torch.tensor(a).to(getattr(torch, dtype)) for a in (x, y)], m=TF)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    assert got.dtype == eager.dtype and tuple(got.shape) == tuple(eager.shape)
    np.testing.assert_allclose(got.numpy(), eager.numpy(), **tol)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), **tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["mse", "glu", "prelu"])
def test_half_decompositions_round_as_eager(op, dtype):
    x, y = _inputs()
    fns = {"mse": lambda a, b: F.mse_loss(a, b), "glu": lambda a, b: F.glu(a, 1),
           "prelu": lambda a, b: F.prelu(a, b[0])}
    fn = fns[op]
    ember.compiler.reset()
    args = [ember.tensor(a).to(getattr(ember, dtype)) for a in (x, y)]
    got = ember.compile(fn, backend="c")(*args)
    assert cbackend.last_compiled().extern_count == 0
    eager = fn(*args)
    assert got.dtype == eager.dtype
    np.testing.assert_allclose(got.float().numpy(), eager.float().numpy(), rtol=1e-2, atol=1e-3)


def test_gradients_still_come_from_the_op_vjp():
    x, y = _inputs()
    xs = [ember.tensor(x, requires_grad=True) for _ in range(2)]
    yt = ember.tensor(y)
    ember.compiler.reset()
    ember.compile(lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), backend="c")(xs[0], yt).backward()
    F.smooth_l1_loss(xs[1], yt, beta=0.5).backward()
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-6, atol=1e-7)
    tx = torch.tensor(x, requires_grad=True)
    TF.smooth_l1_loss(tx, torch.tensor(y), beta=0.5).backward()
    np.testing.assert_allclose(xs[0].grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_the_pass_replaces_the_node_by_primitives():
    seen = []

    def backend(graph, example_inputs):
        seen.append(graph)
        return graph.forward

    x, y = (ember.tensor(a) for a in _inputs())
    ember.compiler.reset()
    ember.compile(lambda a, b: F.huber_loss(a, b) * 2, backend=backend)(x, y)
    (g,) = seen
    assert any(n.op is OPS.huber_loss and expandable(n) for n in g.nodes)
    d = decompose(g)
    d.verify()
    assert all(n.op is not OPS.huber_loss for n in d.nodes)
    assert {"abs", "where", "mean"} <= set(d.ops())
    np.testing.assert_allclose(d.forward(x, y)[0].numpy(), g.forward(x, y)[0].numpy(),
                               rtol=1e-6)
    assert decompose(d) is d   # nothing left to expand


def test_every_decomposed_op_has_no_c_rule_and_a_decomp():
    from ember.compiler.c.lower.registry import rule_for
    for name in DECOMPOSED:
        op = getattr(OPS, name)
        assert op.decomp is not None and rule_for(op) is None, name


GRAD_CASES = [
    ("huber", lambda a, b: F.huber_loss(a, b, delta=0.7)),
    ("l1-sum", lambda a, b: F.l1_loss(a, b, reduction="sum")),
    ("kl_div", lambda a, b: F.kl_div(a, b.abs(), reduction="batchmean")),
    ("bce_logits", lambda a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid(),
                                                                    pos_weight=b[0].abs().detach())),
    ("glu", lambda a, b: (F.glu(a, -1) * b[:, :3]).sum()),
    ("prelu", lambda a, b: (F.prelu(a, b[0].abs()) * b).sum()),
]


@pytest.mark.parametrize("name,loss", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_decomposed_backward_ops_lower_with_no_extern(name, loss):
    """The backward ops (``*_backward``) have decomps too: a compiled gradient is all C."""
    x, y = _inputs()

    def grads(a, b):
        a = a.detach().requires_grad_()
        b = b.detach().requires_grad_()
        return ember.autograd.grad(loss(a, b), (a, b))

    ember.compiler.reset()
    got = ember.compile(grads, backend="c")(ember.tensor(x), ember.tensor(y))
    cg = cbackend.last_compiled()
    assert cg.extern_count == 0, cg.externs
    want = grads(ember.tensor(x), ember.tensor(y))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


def test_decomposed_graph_keeps_its_in_place_writes():
    """A training step whose graph holds a decomposed op (``mse_loss``) still computes the
    optimizer's writes in the parameters' memory: ``decompose`` keeps ``Graph.mutated`` (it
    used to drop it, and every new value was copied back after the call)."""
    from ember.compiler.c import backend as cbackend

    ember.manual_seed(0)
    m = ember.nn.Linear(8, 4)
    opt = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss
    f = ember.compile(step, backend="c")
    x, y = ember.randn(16, 8), ember.randn(16, 4)
    for _ in range(3):
        f(x, y)
    w = m.weight._data
    f(x, y)
    cg = cbackend.last_compiled()
    assert any(n.op is OPS.mse_loss for n in cg.source_graph.nodes)
    assert cg.graph.mutated == cg.source_graph.mutated and len(cg.graph.mutated) == 4
    assert len(cg.program.donated) == 4
    assert m.weight._data is w
