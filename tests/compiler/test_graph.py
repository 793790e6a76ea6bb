"""The graph IR and the lazy payload: printing, verify, custom backends, live outputs, cache."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler import Graph
from ember.errors import EmberRuntimeError


class Recorder:
    """A custom backend that keeps every graph it is given and runs ``graph.forward``."""

    def __init__(self):
        self.graphs = []
        self.examples = []

    def __call__(self, graph, example_inputs):
        self.graphs.append(graph)
        self.examples.append(example_inputs)
        return graph.forward


def _f(x, w):
    h = (x @ w).relu()
    return h.sum(1) * 2.5


def test_custom_backend_gets_graph_and_examples():
    ember.compiler.reset()
    rec = Recorder()
    x, w = ember.randn(4, 3), ember.randn(3, 5)
    out = ember.compile(_f, backend=rec)(x, w)
    assert ember.equal(out, _f(x, w))
    (g,) = rec.graphs
    assert isinstance(g, Graph)
    assert g.ops() == ["matmul", "relu", "sum", "mul"]
    assert [tuple(e.shape) for e in rec.examples[0]] == [(4, 3), (3, 5)]
    # only the returned value is live: one output
    assert len(g.outputs) == 1


def test_second_call_hits_the_cache():
    ember.compiler.reset()
    rec = Recorder()
    cf = ember.compile(_f, backend=rec)
    for _ in range(3):
        x, w = ember.randn(4, 3), ember.randn(3, 5)
        assert ember.equal(cf(x, w), _f(x, w))
    assert len(rec.graphs) == 1


def test_printed_graph_is_runnable_python():
    ember.compiler.reset()
    rec = Recorder()
    x, w = ember.randn(4, 3), ember.randn(3, 5)
    ember.compile(_f, backend=rec)(x, w)
    g = rec.graphs[0]
    src = g.python("my_graph")
    assert "def my_graph(x0, x1):" in src and "matmul" in src
    ns: dict = {"ember": ember, "np": np}
    exec(compile(src, "<graph>", "exec"), ns)
    (out,) = ns["my_graph"](x, w)
    assert ember.equal(out, _f(x, w))
    assert str(g) == src.replace("my_graph", "graph")


def test_verify_accepts_recorded_and_rejects_broken_graphs():
    ember.compiler.reset()
    rec = Recorder()
    ember.compile(_f, backend=rec)(ember.randn(4, 3), ember.randn(3, 5))
    g = rec.graphs[0]
    g.verify()
    bad = Graph(g.inputs, list(g.nodes), [("n", 7, 0)])
    with pytest.raises(EmberRuntimeError, match="bad ref"):
        bad.verify()
    n0 = g.nodes[1]
    wrong = Graph(g.inputs, [g.nodes[0], type(n0)(n0.op, n0.args, n0.params,
                                                    (((9, 9), n0.specs[0][1]),))], [("n", 1, 0)])
    with pytest.raises(EmberRuntimeError, match="differ from meta"):
        wrong.verify()


def test_live_intermediates_become_outputs_dead_ones_do_not():
    ember.compiler.reset()
    rec = Recorder()
    keep = []

    def f(x):
        a = x * 2
        b = a + 1          # dies
        c = b.exp()
        keep.append(a)     # stays alive: an output
        return c

    x = ember.randn(5)
    out = ember.compile(f, backend=rec)(x)
    assert len(rec.graphs[0].outputs) == 2
    assert ember.equal(keep[0], x * 2) and ember.equal(out, ((x * 2) + 1).exp())
    assert type(keep[0]._data) is np.ndarray  # realized when the call returned


def test_unknown_backend_and_bad_mode_fail_early():
    with pytest.raises(EmberRuntimeError, match="unknown backend"):
        ember.compile(_f, backend="nope")
    with pytest.raises(EmberRuntimeError, match="Either mode or options"):
        ember.compile(_f, mode="default", options={})


def test_views_of_returned_tensors_share_memory_after_realization():
    def f(x):
        y = x * 2
        return y, y[1:], y.t()

    x = ember.randn(3, 3)
    y, v, t = ember.compile(f)(x)
    y.add_(1)
    assert ember.equal(v, y[1:]) and ember.equal(t, y.t())


def test_metadata_of_lazy_tensors_matches_eager():
    seen = {}

    def f(x):
        y = (x + 1).t()
        seen["lazy"] = (tuple(y.shape), y.stride(), y.is_contiguous(), y.storage_offset(),
                        y.dtype, y.ndim, y.numel())
        return y

    x = ember.randn(3, 4)
    y = f(x)
    eager = (tuple(y.shape), y.stride(), y.is_contiguous(), y.storage_offset(), y.dtype,
             y.ndim, y.numel())
    ember.compile(f)(x)
    assert seen["lazy"] == eager
