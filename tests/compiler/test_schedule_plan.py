"""The fusion plan (``ember.compiler.c.schedule.plan``, issue 14): decisions over the whole
graph before lowering.  Compiled results are compared with eager (the oracle); kernel counts
are compared with the same graph lowered greedily in graph order (no plan)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.decompose import decompose
from ember.compiler.c.lower import lower
from ember.compiler.c.schedule import FusionPlan, plan
from ember.config import config
from ember.errors import EmberRuntimeError
from tests.compiler.helpers import run_c


def _t(x):
    return x if isinstance(x, (tuple, list)) else (x,)


def check(got, want, rtol=1e-6, atol=1e-6):
    for g, w in zip(_t(got), _t(want)):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64),
                                   rtol=rtol, atol=atol)


def greedy_kernels(cg) -> int:
    """Kernels of ``cg``'s graph lowered node by node in graph order (what lowering did
    before the plan), after the same scheduling passes."""
    from ember.compiler.c.schedule import schedule
    graph = decompose(cg.source_graph)
    program = lower(graph, cbackend._HELPERS)
    schedule(program, graph)
    program.verify()
    return program.stats.kernels


# ------------------------------------------------------------------------------ (a) the order
def test_interleaved_shapes_fuse_into_one_kernel_per_shape():
    def f(a, b):
        a1 = a * 2.0
        b1 = b + 1.0
        a2 = a1.exp()
        b2 = b1 * 3.0
        a3 = a2 + a
        b3 = b2.sin()
        return a3, b3

    a, b = ember.randn(64, 32), ember.randn(32, 64)
    got, want, cg = run_c(f, a, b)
    check(got, want, rtol=1e-6, atol=1e-6)
    assert cg.stats.kernels == 2
    assert greedy_kernels(cg) == 6


def test_pulled_node_takes_its_consumers_or_stays():
    # c = b * 2 could join the open group over a's shape only by storing it for its
    # consumer d, which must wait for e: the plan leaves c where it is (no extra store)
    def f(a, b):
        x = a + 1.0
        e = b.t() * 2.0          # another shape between: the group over (8, 16) closes
        c = b * 2.0
        d = c + e.t()
        return x, d

    a, b = ember.randn(8, 16), ember.randn(8, 16)
    got, want, cg = run_c(f, a, b)
    check(got, want)
    fp = plan(cg.graph, cbackend._HELPERS)
    fp.verify(cg.graph)
    assert fp.order == list(range(len(cg.graph.nodes))) and fp.moved == 0
    assert cg.stats.kernels == greedy_kernels(cg)

    def g(a, b):  # d no longer waits for e: c and d both join the group over a's shape
        x = a + 1.0
        e = b.t() * 2.0
        c = b * 2.0
        d = c + a
        return x, d, e
    got, want, cg = run_c(g, a, b)
    check(got, want)
    fp = plan(cg.graph, cbackend._HELPERS)
    fp.verify(cg.graph)
    assert fp.moved == 2 and cg.stats.kernels == greedy_kernels(cg) - 1 == 2


def test_plan_of_the_char_gpt_step_has_fewer_kernels():
    from ember import demo
    from tests.compiler.helpers import lm_step
    graphs = []

    def capture(graph, example_inputs):
        graphs.append(graph)
        return cbackend._eager_runner(graph)
    ember.manual_seed(0)
    m = demo.CharGPT(40, block=16, d=32, layers=2, heads=2)
    opt = ember.optim.AdamW(m.parameters(), lr=1e-3)
    x = ember.randint(0, 40, (2, 16))
    ember.compile(lm_step, backend=capture)(m, opt, x, x)
    graph = decompose(graphs[-1])
    fp = plan(graph, cbackend._HELPERS)
    fp.verify(graph)
    planned = cbackend.lower_and_schedule(graphs[-1]).stats.kernels
    greedy = lower(graph, cbackend._HELPERS).stats.kernels
    assert fp.moved > 0 and planned < greedy, (planned, greedy)


# ------------------------------------------------------------------------------ side effects
def test_random_ops_keep_their_order_and_values():
    def f(a, b):
        a1 = a * 2.0
        r = ember.rand_like(b)
        b1 = b + r
        a2 = a1 + ember.rand_like(a)
        b2 = b1 * 3.0
        a3 = a2.exp() + a1
        return a3, b2

    a, b = ember.randn(16, 8), ember.randn(8, 16)
    ember.manual_seed(123)
    got, _, cg = run_c(f, a, b)
    ember.manual_seed(123)
    want = f(a, b)
    check(got, want)
    fp = plan(cg.graph, cbackend._HELPERS)
    fp.verify(cg.graph)
    rand = [i for i in fp.order if cg.graph.nodes[i].op.kind == "random"]
    assert rand == sorted(rand) == fp.barriers and len(rand) == 2
    pos = {i: k for k, i in enumerate(fp.order)}
    for i in range(len(cg.graph.nodes)):  # nothing crosses a random op
        for r in rand:
            assert (i < r) == (pos[i] < pos[r])


def test_in_place_ops_give_eager_values_and_mutations():
    def f(a, b, c):
        a.mul_(2.0)
        b.add_(1.0)
        a.add_(c)
        b.mul_(a.sum())
        return a * 1.0, b.exp()

    def inputs():
        rng = np.random.default_rng(3)
        return [ember.tensor(rng.standard_normal(s).astype(np.float32))
                for s in ((6, 5), (5, 6), (6, 5))]
    x1, x2 = inputs(), inputs()
    got = ember.compile(f, backend="c", fullgraph=True)(*x1)
    want = f(*x2)
    check(got, want, rtol=1e-5, atol=1e-5)
    for p, q in zip(x1, x2):  # the mutated inputs too
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-6)


def test_verify_rejects_a_bad_order():
    def f(a):
        x = a + 1.0
        r = ember.rand_like(a)
        return x.exp(), r

    _, _, cg = run_c(f, ember.randn(4))
    g = cg.graph
    n = len(g.nodes)
    fp = plan(g, cbackend._HELPERS)
    fp.verify(g)
    (b,) = fp.barriers
    with pytest.raises(EmberRuntimeError, match="permutation"):
        FusionPlan(list(range(n - 1)), fp.barriers).verify(g)
    exp = next(i for i, m in enumerate(g.nodes) if m.op.name == "exp")
    add = g.nodes[exp].args[0][1]
    bad = [i for i in range(n) if i != add]
    bad.insert(bad.index(exp) + 1, add)  # add after its consumer exp
    with pytest.raises(EmberRuntimeError, match="before its input"):
        FusionPlan(bad, fp.barriers).verify(g)
    assert add < b
    crossed = [i for i in range(n) if i != add]
    crossed.insert(crossed.index(b) + 1, add)  # add moved after the random op
    FusionPlan(crossed).verify(g)  # a valid topological order ...
    with pytest.raises(EmberRuntimeError, match="side-effect"):
        FusionPlan(crossed, fp.barriers).verify(g)  # ... that crosses the barrier


# ------------------------------------------------------------------------------ (b) recompute
def _recompute_case(out_dtype, n_inputs):
    def f(*xs):
        v = xs[0]
        for x in xs[1:]:
            v = v + x
        v = v.to(out_dtype)
        s = v.sum(-1, keepdim=True)
        return s, v * 2.0          # v is also needed by a pointwise consumer
    xs = [ember.randn(32, 48) for _ in range(n_inputs)]
    got, want, cg = run_c(f, *xs)
    check(got, want, rtol=2e-3 if out_dtype is ember.float16 else 1e-5, atol=1e-3)
    fp = plan(cg.graph, cbackend._HELPERS)
    sums = [i for i, n in enumerate(cg.graph.nodes) if n.op.name == "sum"]
    x = cg.graph.nodes[sums[0]].args[0]
    return fp.should_recompute(x), cg


@pytest.mark.parametrize("dtype, n_inputs, recompute", [
    (ember.float32, 2, True),     # 2 * 8N to recompute <= 8N + 3 * 4N to store
    (ember.float32, 4, False),    # 2 * 16N > 16N + 3 * 4N: more inputs than the value
    (ember.float16, 2, False),    # 2 * 8N > 8N + 3 * 2N: a narrower value is cheaper to store
])
def test_recompute_or_store_by_bytes_moved(dtype, n_inputs, recompute):
    got, cg = _recompute_case(dtype, n_inputs)
    assert got is recompute
    kinds = [type(k).__name__ for k in cg.program.kernels()]
    red = [k for k in cg.program.kernels() if type(k).__name__ == "ReduceKernel"]
    assert len(red) == 1
    if recompute:  # the chain is the reduction's prologue: no kernel stores it first
        assert "add" in red[0].ops
    else:          # one kernel computes and stores v; the reduction reads it
        assert "add" not in red[0].ops and kinds.index("Kernel") < kinds.index("ReduceKernel")


def test_recompute_cap_stores_long_chains():
    from ember.compiler.c import fusion_plan

    def f(x):
        v = x
        for _ in range(fusion_plan.MAX_RECOMPUTE_OPS + 1):
            v = v * 1.01
        return v.sum(-1), v + 1.0
    got, want, cg = run_c(f, ember.randn(8, 16))
    check(got, want, rtol=1e-5, atol=1e-5)
    fp = plan(cg.graph, cbackend._HELPERS)
    assert list(fp.recompute.values()) == [False]


def test_residual_stream_into_layer_norms_is_stored_not_recomputed_ever_longer():
    """x = x + f(layer_norm(x)) over layers: layer_norm takes the open add chain as its
    prologue and the next residual add needs the same value.  Left to recompute, layer k's
    norm re-read all 2k + 1 earlier branch outputs (its kernel's loads grew a layer at a time);
    the plan stores the stream whenever that moves fewer bytes, so no norm kernel loads more
    than a short chain's inputs and the values stay eager's."""
    layers, d = 8, 32
    lns = [ember.nn.LayerNorm(d) for _ in range(layers)]
    ws = [ember.randn(d, d) * 0.1 for _ in range(layers)]

    def f(x):
        for ln, w in zip(lns, ws):
            x = x + ln(x) @ w
        return x
    with ember.no_grad():
        got, want, cg = run_c(f, ember.randn(16, d))
    check(got, want, rtol=1e-5, atol=1e-5)
    fp = plan(cg.graph, cbackend._HELPERS)
    norms = [n for n in cg.graph.nodes if n.op.name == "layer_norm"]
    decided = [fp.recompute[n.args[0]] for n in norms if n.args[0] in fp.recompute]
    assert len(decided) == layers - 1 and False in decided
    red = [k for k in cg.program.kernels() if "layer_norm" in k.ops]
    assert len(red) == layers
    assert max(k.ops.count("add") for k in red) <= 2, [k.ops for k in red]


# ------------------------------------------------------------------------------ (c) horizontal
def test_reductions_over_one_input_share_a_nest_across_other_work():
    def f(x, y):
        s = x.sum(-1, keepdim=True)
        z = x / s                   # an epilogue of the sum's kernel
        w = y * 2.0                 # another shape
        return z, w, x.amax(-1), x.mean(-1)

    x, y = ember.rand(16, 24) + 0.5, ember.randn(5, 7)
    got, want, cg = run_c(f, x, y)
    check(got, want, rtol=1e-5, atol=1e-6)
    fp = plan(cg.graph, cbackend._HELPERS)
    assert len(fp.horizontal) == 1 and len(fp.horizontal[0]) == 3
    red = [k for k in cg.program.kernels() if type(k).__name__ == "ReduceKernel"]
    assert len(red) == 1 and {"sum", "amax", "mean"} <= set(red[0].ops)
    assert cg.stats.kernels < greedy_kernels(cg)


# ------------------------------------------------------------------------------ the log
def test_decisions_are_logged(monkeypatch, capsys):
    def f(x, y):
        s = x.sum(-1, keepdim=True)
        v = x * 2.0
        return x / s, y.t() * 2.0, x.amax(-1), v.sum(-1), v + 1.0

    _, _, cg = run_c(f, ember.rand(8, 4), ember.randn(4, 8))
    monkeypatch.setattr(config, "logs", frozenset({"fusion"}))
    capsys.readouterr()
    plan(cg.graph, cbackend._HELPERS)
    err = capsys.readouterr().err
    assert "[ember.compiler fusion] plan: reductions" in err
    assert "recompute (" in err or "store (" in err
