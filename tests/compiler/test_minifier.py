"""The minifier (ember.compiler.minifier, docs/minifier.md): a C backend failure with
EMBER_MINIFIER=1 writes minifier_launcher.py; running it writes repro.py, a graph of a few ops
that fails the same way.  Failures come from the test-only codegen injection
(``config.inject_bug_testing_only``: one op, relu by default, miscompiled)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.compiler.frontend.graph import Graph, Node, Sym
from ember.compiler.minifier import AccuracyError, check_outputs, maybe_dump
from ember.compiler.minifier.check import compare
from ember.compiler.minifier.serde import PREAMBLE, graph_source
from ember.compiler.minifier.shrink import ddmin, subgraph
from ember.config import config
from ember.errors import CompileError, EmberRuntimeError
from ember.ops.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[2]

# injected kind -> (the error ember.compile raises, the launcher's kind)
KINDS = {"compile_error": (CompileError, "compile"),
         "runtime_error": (EmberRuntimeError, "runtime"),
         "accuracy": (AccuracyError, "accuracy")}


def fifteen_ops(x, y):
    """16 graph ops, one relu (the injected culprit) in the middle."""
    a = x * y
    b = (a + 1).tanh().exp() * x
    c = b - b.sum(1, keepdim=True)
    d = (c.relu() * 0.5).sigmoid() + y
    return (d.neg().abs().sqrt() * 3, )


def _inputs():
    rng = np.random.default_rng(0)
    return [ember.tensor(rng.standard_normal((4, 8)).astype(np.float32)) for _ in range(2)]


def _env(tmp_path: Path, inject: str | None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), EMBER_MINIFIER_DIR=str(tmp_path))
    env.pop("EMBER_MINIFIER", None)
    env.pop("EMBER_INJECT_BUG_TESTING_ONLY", None)
    if inject is not None:
        env["EMBER_INJECT_BUG_TESTING_ONLY"] = inject
    return env


def _run(script: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          cwd=script.parent, env=env, timeout=300)


def _load_graph(script: Path) -> Graph:
    ns: dict = {"__name__": "not_main", "__file__": str(script)}
    exec(compile(script.read_text(), str(script), "exec"), ns)
    return ns["GRAPH"]


@pytest.fixture
def minifier_on(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_MINIFIER", "1")
    monkeypatch.setenv("EMBER_MINIFIER_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("inject", list(KINDS))
def test_launcher_shrinks_each_failure_kind_to_a_repro(inject, minifier_on, monkeypatch):
    error, kind = KINDS[inject]
    monkeypatch.setattr(config, "inject_bug_testing_only", inject)
    with pytest.raises(error):
        ember.compile(fifteen_ops, backend="inductor")(*_inputs())
    launcher = minifier_on / "minifier_launcher.py"
    assert launcher.exists() and (minifier_on / "minifier_inputs.safetensors").exists()
    assert f"KIND = {kind!r}" in launcher.read_text()
    assert len(_load_graph(launcher)) >= 15

    env = _env(minifier_on, inject)
    if inject == "compile_error":  # `run` only builds and runs the whole graph once
        again = _run(launcher, env, "run")
        assert again.returncode == 1 and "compile failure reproduced" in again.stderr
    out = _run(launcher, env)
    assert out.returncode == 0, out.stderr[-3000:]
    repro = minifier_on / "repro.py"
    small = _load_graph(repro)
    assert 1 <= len(small) <= 5 and "relu" in small.ops(), small.ops()

    got = _run(repro, env)  # the repro fails the same way, with ember alone
    assert got.returncode != 0
    assert (error.__name__ in got.stderr) if kind != "accuracy" else \
        "accuracy failure" in got.stdout
    fixed = _run(repro, _env(minifier_on, None))  # and passes once the "bug" is gone
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert "does not reproduce" in fixed.stdout


def test_no_failure_writes_nothing(minifier_on):
    x, y = _inputs()
    got = ember.compile(fifteen_ops, backend="inductor")(x, y)[0]
    np.testing.assert_allclose(got.numpy(), fifteen_ops(x, y)[0].numpy(), rtol=1.3e-6,
                               atol=1e-5)
    assert not any(minifier_on.iterdir())


def test_minifier_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("EMBER_MINIFIER", raising=False)
    monkeypatch.setenv("EMBER_MINIFIER_DIR", str(tmp_path))
    monkeypatch.setattr(config, "inject_bug_testing_only", "compile_error")
    with pytest.raises(CompileError):
        ember.compile(fifteen_ops, backend="inductor")(*_inputs())
    assert not any(tmp_path.iterdir())


def test_without_the_minifier_a_c_entry_error_reruns_eagerly(tmp_path, monkeypatch):
    """The C backend's behaviour off the minifier is unchanged: a kernel's error reruns the
    graph eagerly (right values); the error is counted for the minifier."""
    from ember.compiler.c.backend import last_compiled
    monkeypatch.delenv("EMBER_MINIFIER", raising=False)
    monkeypatch.setenv("EMBER_MINIFIER_DIR", str(tmp_path))
    monkeypatch.setattr(config, "inject_bug_testing_only", "runtime_error")
    x, y = _inputs()
    got = ember.compile(fifteen_ops, backend="inductor")(x, y)[0]
    np.testing.assert_array_equal(got.numpy(), fifteen_ops(x, y)[0].numpy())
    assert last_compiled().entry_errors == 1 and not any(tmp_path.iterdir())


def test_an_error_eager_raises_too_is_not_a_compiler_bug(minifier_on):
    def f(a, b):
        return (a * 2) // b + 1
    with pytest.raises(EmberRuntimeError, match="ZeroDivisionError"):
        ember.compile(f, backend="inductor")(ember.tensor([1, 2, 3]), ember.tensor([1, 0, 2]))
    assert not any(minifier_on.iterdir())


def test_repro_level_and_repro_after(tmp_path, monkeypatch):
    monkeypatch.delenv("EMBER_MINIFIER", raising=False)
    monkeypatch.setenv("EMBER_MINIFIER_DIR", str(tmp_path))
    monkeypatch.setattr(config, "inject_bug_testing_only", "accuracy")
    monkeypatch.setattr(ember.compiler.config, "repro_after", "dynamo")
    monkeypatch.setattr(ember.compiler.config, "repro_level", 2)  # accuracy is level 4
    x, y = _inputs()
    ember.compile(fifteen_ops, backend="inductor")(x, y)  # wrong, but not checked
    assert not any(tmp_path.iterdir())
    ember.compiler.reset()
    monkeypatch.setattr(ember.compiler.config, "repro_level", 4)
    with pytest.raises(AccuracyError, match="differs from eager"):
        ember.compile(fifteen_ops, backend="inductor")(x, y)
    assert (tmp_path / "minifier_launcher.py").exists()


def _sample_graph() -> Graph:
    f32 = ember.float32
    nodes = [Node(REGISTRY["mul"], (("i", 0), ("i", 1)), {}, (((4, 8), f32),)),
             Node(REGISTRY["add"], (("n", 0, 0), float("nan")), {}, (((4, 8), f32),)),
             Node(REGISTRY["sum"], (("n", 1, 0),), {"dims": (1,), "keepdim": True},
                  (((4, 1), f32),)),
             Node(REGISTRY["relu"], (("n", 2, 0),), {}, (((4, 1), f32),))]
    return Graph([((4, 8), f32), ((4, 8), f32)], nodes, [("n", 3, 0), ("n", 1, 0)])


def test_graph_source_round_trips():
    g = _sample_graph()
    ns: dict = {}
    exec(PREAMBLE + "G = " + graph_source(g), ns)
    assert ns["G"].python() == g.python()
    from ember.compiler.minifier.serde import lit
    vals = [ember.bfloat16, Sym(2, "size"), np.array([np.nan, 1.5], np.float32), -float("inf"),
            (1,), {"a": [slice(1, None), ...]}, np.int64(7)]
    for v in vals:
        back = eval(lit(v), ns)
        if isinstance(v, np.ndarray):
            assert back.dtype == v.dtype and np.array_equal(back, v, equal_nan=True)
        else:
            assert back == v and type(back) is type(v)
    with pytest.raises(ValueError, match="cannot write"):
        lit(object())


def test_subgraph_replaces_dropped_nodes_with_their_values():
    g = _sample_graph()
    values = {("i", 0): np.ones((4, 8), np.float32), ("i", 1): np.ones((4, 8), np.float32),
              ("n", 0, 0): np.full((4, 8), 2, np.float32),
              ("n", 1, 0): np.full((4, 8), 3, np.float32),
              ("n", 2, 0): np.full((4, 1), 4, np.float32)}
    small, arrays = subgraph(g, [3], values)
    assert small.ops() == ["relu"] and small.inputs == [((4, 1), ember.float32)]
    assert np.array_equal(arrays[0], values[("n", 2, 0)])
    mid, arrays = subgraph(g, [1, 2], values)  # node 1 stays an output (the graph's)
    assert mid.ops() == ["add", "sum"] and mid.outputs == [("n", 0, 0), ("n", 1, 0)]
    mid.verify()


def test_subgraph_inputs_take_the_size_of_their_value():
    """A dynamic graph's specs carry the sizes of the trace that built it; a dropped node's
    value enters the candidate with its own size."""
    f32 = ember.float32
    g = Graph([((Sym(0, "size"), 3), f32)],
              [Node(REGISTRY["exp"], (("i", 0),), {}, (((4, 3), f32),)),
               Node(REGISTRY["relu"], (("n", 0, 0),), {}, (((4, 3), f32),))],
              [("n", 1, 0)], 1, ("size",))
    values = {("i", 0): np.zeros((6, 3), np.float32), ("n", 0, 0): np.ones((6, 3), np.float32)}
    small, arrays = subgraph(g, [1], values)
    assert small.inputs == [((6, 3), f32)] and arrays[0].shape == (6, 3)
    assert subgraph(g, [0], values)[0].inputs == g.inputs


def test_ddmin_finds_a_one_minimal_set():
    tried = set()

    def fails(s):
        tried.add(frozenset(s))
        return {3, 11} <= set(s)
    assert sorted(ddmin(list(range(16)), fails)) == [3, 11]
    assert len(tried) <= 25  # distinct candidates (shrink memoizes): each is one C build
    tried.clear()

    def one(s):
        tried.add(frozenset(s))
        return 9 in s
    assert ddmin(list(range(16)), one) == [9]
    assert len(tried) <= 8


def test_the_minifier_reaches_the_c_backend_through_the_registry():
    import ast
    for path in (ROOT / "ember" / "compiler" / "minifier").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "ember.compiler.c" or n.startswith("ember.compiler.c.")
                           for n in names), (path.name, names)


def test_compare_uses_the_dtype_tolerance():
    a = np.array([1.0, np.nan], np.float32)
    assert compare([a], [a.copy()]) is None
    assert compare([a + np.float32(1e-7)], [a]) is None
    assert "differ" in compare([a + np.float32(1e-3)], [a])
    assert "differ" in compare([np.array([1, 2])], [np.array([1, 3])])
    assert "shape" in compare([a[:1]], [a])


def test_compare_accepts_what_is_as_close_to_float64_as_eager():
    """A cancelling float32 sum: eager and C round differently, both far from each other
    in relative terms; C (double accumulation) is no further from float64 than eager."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4096).astype(np.float32)
    x -= x.mean(dtype=np.float64).astype(np.float32)
    exact = np.sum(x, dtype=np.float64)
    eager = np.array(np.sum(x, dtype=np.float32) * np.float32(1e4), np.float32)
    c = np.array(np.float32(exact) * np.float32(1e4), np.float32)
    ref64 = np.array(exact * 1e4)
    assert compare([c], [eager]) is not None  # beyond float32's tolerance
    assert compare([c], [eager], [ref64]) is None
    wrong = c + np.float32(1)
    assert "further from float64" in compare([wrong], [eager], [ref64])


def test_float64_reference_widens_dtypes():
    from ember.compiler.minifier.check import eager_float64, float64_graph
    f32, f16 = ember.float32, ember.float16
    g = Graph([((3,), f32)], [Node(REGISTRY["mul"], (("i", 0), 3.0), {}, (((3,), f32),)),
                              Node(REGISTRY["convert_element_type"], (("n", 0, 0),),
                                   {"dtype": f16}, (((3,), f16),))], [("n", 1, 0)])
    wide = float64_graph(g)
    assert wide.inputs[0][1] == ember.float64 and wide.nodes[1].params["dtype"] == ember.float64
    x = np.array([0.1, 0.2, 0.3], np.float32)
    out = eager_float64(g, [x], [])
    assert out[0].dtype == np.float64
    np.testing.assert_array_equal(out[0], x.astype(np.float64) * 3.0)


def test_maybe_dump_hook_for_aot(tmp_path, monkeypatch):
    """AOT packaging's hook: ``inductor_configs`` switch it on without the variable."""
    monkeypatch.delenv("EMBER_MINIFIER", raising=False)
    monkeypatch.setenv("EMBER_MINIFIER_DIR", str(tmp_path))
    g = _sample_graph()
    arrays = [np.ones((4, 8), np.float32)] * 2
    err = CompileError("[compile] gcc failed")
    assert maybe_dump(g, arrays, err, kind="compile") is None
    assert maybe_dump(g, arrays, err, kind="accuracy",
                      configs={"aot_inductor.dump_minifier": True,
                               "aot_inductor.repro_level": 2}) is None
    path = maybe_dump(g, arrays, err, kind="compile", backend="c",
                      configs={"aot_inductor.dump_minifier": True})
    assert path == tmp_path / "minifier_launcher.py"
    assert _load_graph(path).python() == g.python()
    assert "gcc failed" in path.read_text()
    # after running a loaded package: outputs checked against eager
    on = {"aot_inductor.dump_minifier": True}
    f32 = ember.float32
    mul = Graph([((4, 8), f32)] * 2, [Node(REGISTRY["mul"], (("i", 0), ("i", 1)), {},
                                            (((4, 8), f32),))], [("n", 0, 0)])
    right = mul.run(arrays)
    check_outputs(mul, arrays, [], right, configs=on)
    assert "KIND = 'compile'" in path.read_text()  # nothing new written
    with pytest.raises(AccuracyError, match="output 0"):
        check_outputs(mul, arrays, [], [right[0] + 1], configs=on)
    assert "KIND = 'accuracy'" in path.read_text()
    maybe_dump(g, arrays, err, kind="compile", configs=on)
    # the graph compiles fine without an injected bug: the launcher says so, writes nothing
    out = _run(path, _env(tmp_path, None))
    assert out.returncode == 2 and "nothing to minify" in out.stderr
    assert not (tmp_path / "repro.py").exists()
