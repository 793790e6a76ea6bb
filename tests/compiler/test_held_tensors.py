"""The binder's follow path holds the tensors it makes strongly (``Trace.hold``) instead of
weak references to the tensor and its payload; ``Trace.live_tensors`` sweeps them when the
graph is realized.  What becomes a graph output must be exactly what weak references would
give: the values still reachable, in the order they were made, so that a call following a
known trace ends with the same outputs as the call that recorded it.  torch is the oracle for
values and gradients."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import ember
from ember import _lazy
from ember.compiler import set_stance
from ember.compiler.frontend import api
from tests.compiler.helpers import Counting

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_compiler():
    ember.compiler.reset()
    set_stance("default")
    yield
    ember.compiler.reset()


@pytest.fixture
def captures(monkeypatch):
    n = [0]
    real = api.capture

    def counting(*a, **k):
        n[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(api, "capture", counting)
    return n


def _data():
    a = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32)
    b = np.array([1.5, 0.5, -0.75, 3.0], dtype=np.float32)
    return a, b


def test_dead_intermediates_are_not_outputs(captures):
    """A chain whose intermediates die at once: the graph has the returned value only, and
    from the third call on the calls follow (no capture)."""
    be = Counting()

    def f(x, y):
        a = x * y
        b = a + 1.0
        c = b.exp()
        return c.tanh()

    g = ember.compile(f, backend=be)
    a, b = _data()
    ex, ey = ember.tensor(a), ember.tensor(b)
    want = torch.tanh(torch.exp(torch.tensor(a) * torch.tensor(b) + 1.0)).numpy()
    for _ in range(4):
        np.testing.assert_allclose(g(ex, ey).numpy(), want, rtol=1e-6)
    assert len(be.graphs) == 1 and len(be.graphs[0].outputs) == 1
    assert captures[0] == 1   # the first call; the others follow its trace


def test_kept_intermediates_are_outputs_in_creation_order(captures):
    """Intermediates stored on an object outlive the call: they are outputs, in the order they
    were made, also when the calls follow the known trace."""
    be = Counting()
    box = {}

    def f(x, y):
        a = x * y
        b = a + 1.0
        c = b * a
        box["c"], box["a"] = c, a
        return c.sum()

    g = ember.compile(f, backend=be)
    a, b = _data()
    ta, tb = torch.tensor(a), torch.tensor(b)
    for _ in range(4):
        s = g(ember.tensor(a), ember.tensor(b))
        np.testing.assert_allclose(box["a"].numpy(), (ta * tb).numpy(), rtol=1e-6)
        np.testing.assert_allclose(box["c"].numpy(), ((ta * tb + 1.0) * ta * tb).numpy(),
                                   rtol=1e-6)
        np.testing.assert_allclose(s.item(), ((ta * tb + 1.0) * ta * tb).sum().item(),
                                   rtol=1e-6)
    assert len(be.graphs) == 1
    outs = be.graphs[0].outputs
    assert len(outs) == 3 and [o[1] for o in outs] == sorted(o[1] for o in outs)
    assert captures[0] == 1


def test_payload_shared_by_a_detached_tensor_survives_its_tensor(captures):
    """The tensor the follow path made dies, a detached tensor sharing its payload lives on:
    the payload is realized (and stays in its place among the outputs)."""
    box = {}

    def f(x, y):
        a = x * y
        box["d"] = a.detach()
        b = a + 2.0
        return b * 3.0

    g = ember.compile(f)
    a, b = _data()
    ta, tb = torch.tensor(a), torch.tensor(b)
    for _ in range(4):
        out = g(ember.tensor(a), ember.tensor(b))
        np.testing.assert_allclose(box["d"].numpy(), (ta * tb).numpy(), rtol=1e-6)
        np.testing.assert_allclose(out.numpy(), ((ta * tb + 2.0) * 3.0).numpy(), rtol=1e-6)
    assert captures[0] == 1


def test_newer_tensor_kept_only_by_a_dead_older_one_is_dropped():
    """A tensor that only an older dead tensor references (here an attribute; an in-place
    op's node is another way) dies with it, as with weak references: not an output."""
    be = Counting()

    def f(x, y):
        a = x * 2.0
        b = y.exp()
        a.keep = b
        del a, b
        return (x * y).sum()

    g = ember.compile(f, backend=be)
    a, b = _data()
    for _ in range(4):
        out = g(ember.tensor(a), ember.tensor(b))
        np.testing.assert_allclose(out.item(), (torch.tensor(a) * torch.tensor(b)).sum().item(),
                                   rtol=1e-6)
    assert len(be.graphs) == 1 and len(be.graphs[0].outputs) == 1, str(be.graphs[0])


def test_gradients_through_followed_calls():
    """With grad, tensors saved by autograd nodes stay alive (outputs); gradients are torch's
    on every call, the followed ones included."""

    def f(x, y):
        a = x * y
        b = a.exp()
        c = b * x
        return c.tanh().sum()

    g = ember.compile(f)
    a, b = _data()
    for _ in range(4):
        ex = ember.tensor(a, requires_grad=True)
        ey = ember.tensor(b, requires_grad=True)
        tx = torch.tensor(a, requires_grad=True)
        ty = torch.tensor(b, requires_grad=True)
        g(ex, ey).backward()
        f(tx, ty).backward()
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
        np.testing.assert_allclose(ey.grad.numpy(), ty.grad.numpy(), rtol=1e-5)


def test_sweep_frees_the_dead_and_keeps_the_living():
    """``live_tensors`` directly: held tensors only the trace references are freed."""
    x = ember.ones(4)
    seen = []

    def f(t):
        a = t * 2.0
        b = a + 1.0
        tr = _lazy.STATE.trace
        held = [e for e in tr.lazies if isinstance(e, ember.Tensor)]
        seen.append(len(held))
        return b

    g = ember.compile(f)
    for _ in range(3):
        np.testing.assert_array_equal(g(x).numpy(), np.full(4, 3.0, np.float32))
    gc.collect()
    assert seen[-1] == 2   # the third call followed: both ops' tensors were held


def test_grad_mode_changes_inside_followed_calls():
    """The follow path caches the grad mode on the trace: a change inside the call (no_grad,
    enable_grad, inference_mode between ops) is seen by the next op, on every call."""

    def f(x):
        a = x * 2.0
        with ember.no_grad():
            b = a * 3.0
            with ember.enable_grad():
                c = b * x
        d = c.exp()
        return a, b, c, d

    def ft(x):
        a = x * 2.0
        with torch.no_grad():
            b = a * 3.0
            with torch.enable_grad():
                c = b * x
        d = c.exp()
        return a, b, c, d

    g = ember.compile(f)
    a, _ = _data()
    for _ in range(4):
        ex = ember.tensor(a, requires_grad=True)
        tx = torch.tensor(a, requires_grad=True)
        outs, touts = g(ex), ft(tx)
        assert [o.requires_grad for o in outs] == [o.requires_grad for o in touts]
        assert [o.grad_fn is None for o in outs] == [o.grad_fn is None for o in touts]
        outs[3].sum().backward()
        touts[3].sum().backward()
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5)

    def h(x):
        a = x * 2.0
        with ember.inference_mode():
            b = a * 3.0
        return a, b

    gh = ember.compile(h)
    for _ in range(4):
        a2, b2 = gh(ember.tensor(a))
        assert (a2.is_inference(), b2.is_inference()) == (False, True)


def _writes_grad_state(node) -> bool:
    """An assignment to ``STATE.grad_enabled``/``STATE.inference`` (or ``st.`` / ``_gm.STATE.``)."""
    import ast
    targets = []
    if isinstance(node, ast.Assign):
        for t in node.targets:
            targets += t.elts if isinstance(t, ast.Tuple) else [t]
    for t in targets:
        if isinstance(t, ast.Attribute) and t.attr in ("grad_enabled", "inference"):
            v = t.value
            if (isinstance(v, ast.Name) and v.id in ("STATE", "st")) or \
                    (isinstance(v, ast.Attribute) and v.attr == "STATE"):
                return True
    return False


def _is_bump(node) -> bool:
    import ast
    return isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) and \
        "GENERATION" in ast.unparse(node.target)


def test_every_grad_mode_writer_bumps_the_generation():
    """The follow path re-reads the grad mode only when ``grad_mode.GENERATION`` moved: every
    write of the grad-mode state in ember (or a run of writes) is followed at once by a bump."""
    import ast
    import pathlib
    root = pathlib.Path(ember.__file__).parent
    missing = []
    writes = 0
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if not isinstance(block, list):
                    continue
                for i, stmt in enumerate(block):
                    if not _writes_grad_state(stmt):
                        continue
                    writes += 1
                    j = i + 1
                    while j < len(block) and _writes_grad_state(block[j]):
                        j += 1
                    if j >= len(block) or not _is_bump(block[j]):
                        missing.append(f"{path.relative_to(root)}:{stmt.lineno}")
    assert writes >= 10   # grad_mode's switches, the engine, custom ops
    assert not missing, missing
