"""ember.library custom ops against torch 2.13's torch.library (docs examples: a NumPy sin, a
mutating op, a data-dependent output size, autograd registration, opcheck), under eager,
ember.compile and ember.export."""


import io
import typing
from typing import Optional

import numpy as np
import pytest

import ember
from ember import Tensor
from ember.library import custom_op, infer_schema, opcheck

torch = pytest.importorskip("torch")

_counter = [0]


@pytest.fixture(autouse=True)
def _unregister_test_ops():
    """Custom ops are global; drop the ones a test made so that registry-wide tests (every
    OpDef in the OpInfo table) run the same after this module."""
    before, packets = set(ember.ops.REGISTRY), set(ember.ops.PACKETS)
    yield
    for k in set(ember.ops.REGISTRY) - before:
        del ember.ops.REGISTRY[k]
    for k in set(ember.ops.PACKETS) - packets:
        del ember.ops.PACKETS[k]


def _ns() -> str:
    """A fresh namespace per test (ops are global, as in PyTorch)."""
    _counter[0] += 1
    return f"emtest{_counter[0]}"


# ------------------------------------------------------------------------------ schemas
def _pair(src: str) -> tuple:
    """The same function annotated with ember types and with torch types."""
    out = []
    for mod in (ember, torch):
        ns = {"Tensor": mod.Tensor, "Optional": Optional, "typing": typing, "dtype": mod.dtype,
              "device": mod.device, "f32": mod.float32}
        exec(src, ns)  # noqa: S102
        out.append(ns["f"])
    return tuple(out)


SCHEMA_CASES = [
    ("def f(x: Tensor, y: int, z: float = 2.0, w: Optional[Tensor] = None, "
     "l: Optional[list[int]] = None, s: str = 'a', b: bool = False, *, k: int = 3) "
     "-> tuple[Tensor, Tensor]: ...", ()),
    ("def f(x: Tensor, out: Tensor) -> None: ...", {"out"}),
    ("def f(x: Tensor, out: Tensor) -> None: ...", "unknown"),
    ("def f(xs: list[Tensor], a: typing.Sequence[float], n: Optional[int] = None) "
     "-> list[Tensor]: ...", ()),
    ("def f(x: Tensor, d: dtype = f32) -> Tensor: ...", ()),
    ("def f(x: Tensor, v: Optional[device] = None) -> int: ...", ()),
    ("def f(x: Tensor, v: typing.List[bool]) -> float: ...", ()),
    ("def f(xs: list[Optional[Tensor]], a: list[float], n: Optional[list[int]] = None, "
     "g: Optional[typing.Sequence[float]] = None, s: Optional[str] = None, "
     "b: Optional[list[bool]] = None) -> Tensor: ...", ()),
    ("def f(xs: typing.Sequence[Optional[Tensor]], ys: list[Tensor]) -> None: ...", {"ys"}),
]


@pytest.mark.parametrize("src,mutates", SCHEMA_CASES)
def test_infer_schema_matches_torch(src, mutates):
    ef, tf = _pair(src)
    assert infer_schema(ef, mutates_args=mutates) == \
        torch.library.infer_schema(tf, mutates_args=mutates)


BAD_SCHEMAS = [
    "def f(x): pass",
    "def f(x: Tensor, *args) -> Tensor: pass",
    "def f(x: Tensor, /) -> Tensor: pass",
    "def f(x: Tensor, l: list[int] = [1]) -> Tensor: pass",
    "def f(x: Tensor) -> dict: pass",
    "def f(x: Tensor) -> Tensor: pass",
    "def f(x: Optional[list[Tensor]]) -> Tensor: pass",
    "def f(x: Tensor, s: list[str]) -> Tensor: pass",
    "def f(x: Tensor, n: list[Optional[int]]) -> Tensor: pass",
]


@pytest.mark.parametrize("src", BAD_SCHEMAS)
def test_infer_schema_errors_match_torch(src):
    ef, tf = _pair(src)
    mutates = {"nope"} if src == "def f(x: Tensor) -> Tensor: pass" else ()
    with pytest.raises(ValueError) as te:
        torch.library.infer_schema(tf, mutates_args=mutates)
    with pytest.raises(ValueError) as ee:
        infer_schema(ef, mutates_args=mutates)
    # same message up to how each library spells its types
    def head(e):
        text = str(e.value).split(". Got func")[0].split(". The valid")[0]
        return text.replace("ember.tensor.Tensor", "Tensor").replace("torch.Tensor", "Tensor")
    assert head(ee) == head(te)
    assert "Got func with signature" in str(ee.value)


def test_custom_op_requires_mutates_args():
    with pytest.raises(TypeError, match="mutates_args"):
        custom_op(f"{_ns()}::f", lambda x: x)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="namespace::opname"):
        custom_op("noname", mutates_args=())(lambda x: x)


# ------------------------------------------------------------------------------ numpy sin
def _numpy_sin(ns: str, with_autograd: bool = True):
    @custom_op(f"{ns}::numpy_sin", mutates_args=())
    def numpy_sin(x: Tensor) -> Tensor:
        return ember.from_numpy(np.sin(x.numpy()))

    @numpy_sin.register_fake
    def _(x):
        return ember.empty_like(x)

    if with_autograd:
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x.cos()

        numpy_sin.register_autograd(backward, setup_context=setup_context)
    return numpy_sin


def _torch_numpy_sin(ns: str):
    @torch.library.custom_op(f"{ns}::numpy_sin", mutates_args=())
    def numpy_sin(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.sin(x.numpy()))

    @numpy_sin.register_fake
    def _(x):
        return torch.empty_like(x)

    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos()

    numpy_sin.register_autograd(backward, setup_context=setup_context)
    return numpy_sin


def test_numpy_sin_eager_and_grad_match_torch():
    ns = _ns()
    op, top = _numpy_sin(ns), _torch_numpy_sin(ns)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ey, ty = op(ex), top(tx)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
    (ey * 2).sum().backward()
    (ty * 2).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    assert repr(op) == repr(top).replace("torch", "ember") == f"<CustomOpDef({ns}::numpy_sin)>"
    assert op.schema == str(top._schema) == "(Tensor x) -> Tensor"


def test_op_reachable_under_ember_ops():
    ns = _ns()
    op = _numpy_sin(ns)
    assert getattr(ember.ops, ns).numpy_sin is op
    assert getattr(ember.ops, ns).numpy_sin.default is op
    assert ember.ops.REGISTRY[f"{ns}.numpy_sin.default"] is op.opdef
    with pytest.raises(AttributeError):
        getattr(ember.ops, ns).nothing_here


def test_numpy_sin_compiles_as_one_node():
    op = _numpy_sin(_ns())
    x = ember.randn(5)

    def f(x):
        return op(x) * 2 + 1

    want = f(x)
    got = ember.compile(f, fullgraph=True)(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    ex = ember.compiler.explain(f)(x)
    assert ex.graph_break_count == 0
    assert ex.ops_per_graph == [[op.opdef.name, "mul", "add"]]
    assert [e[0] for e in ex.externs] == [op.opdef.name]


def test_compiled_backward_through_custom_op():
    op = _numpy_sin(_ns())
    x0 = np.random.default_rng(1).standard_normal(6).astype(np.float32)

    def step(x):
        y = op(x).sum()
        y.backward()
        return y

    xe, xc = ember.tensor(x0, requires_grad=True), ember.tensor(x0, requires_grad=True)
    step(xe)
    ember.compile(step)(xc)
    np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(xe.grad.numpy(), np.cos(x0), rtol=1e-6)


def test_no_fake_impl_errors_under_compile_like_torch():
    ns = _ns()

    @custom_op(f"{ns}::nofake", mutates_args=())
    def nofake(x: Tensor) -> Tensor:
        return x.clone()

    with pytest.raises(RuntimeError, match=rf"There was no fake impl registered for "
                       rf"<CustomOpDef\({ns}::nofake\)>. This is necessary for "):
        ember.compile(lambda x: nofake(x) + 1, fullgraph=True)(ember.randn(3))


def test_backward_without_autograd_formula_raises_like_torch():
    ns = _ns()
    op = _numpy_sin(ns, with_autograd=False)
    x = ember.randn(3, requires_grad=True)
    y = op(x)
    assert y.requires_grad
    msg = (f"Trying to backward through {ns}.numpy_sin.default but no autograd formula was "
           "registered. Please use register_autograd to add one.")
    with pytest.raises(RuntimeError) as e:
        y.sum().backward()
    assert str(e.value) == msg


def test_output_aliasing_input_raises():
    ns = _ns()

    @custom_op(f"{ns}::bad_alias", mutates_args=())
    def bad_alias(x: Tensor) -> Tensor:
        return x

    @custom_op(f"{ns}::bad_view", mutates_args=())
    def bad_view(x: Tensor) -> Tensor:
        return x[0]

    for fn in (bad_alias, bad_view):
        with pytest.raises(RuntimeError, match=r"The output of this custom operator \(1\) must "
                           r"not also be an input to this custom operator and \(2\) may not "
                           "alias any inputs"):
            fn(ember.randn(2))


# ------------------------------------------------------------------------------ export
def test_export_keeps_op_and_round_trips():
    op = _numpy_sin(_ns())

    class M(ember.nn.Module):
        def forward(self, x):
            return op(x) + 1

    x = ember.randn(4)
    ep = ember.export.export(M(), (x,))
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    assert any(n.target is op.opdef for n in calls)
    np.testing.assert_allclose(ep.module()(x).numpy(), (op(x) + 1).numpy(), rtol=1e-6)
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    ep2 = ember.export.load(buf)
    assert any(n.target is op.opdef for n in ep2.graph.nodes if n.op == "call_function")
    np.testing.assert_allclose(ep2.module()(x).numpy(), (op(x) + 1).numpy(), rtol=1e-6)


def test_export_load_without_the_op_registered_is_a_clear_error():
    op = _numpy_sin(_ns())

    class M(ember.nn.Module):
        def forward(self, x):
            return op(x)

    ep = ember.export.export(M(), (ember.randn(2),))
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    saved = ember.ops.REGISTRY.pop(op.opdef.name)
    try:
        with pytest.raises(Exception, match=f"calls '{op.opdef.name}', which is not an ember op"):
            ember.export.load(buf)
    finally:
        ember.ops.REGISTRY[op.opdef.name] = saved


# ------------------------------------------------------------------------------ mutation
def _add_into(ns: str, lib=ember):
    @lib.library.custom_op(f"{ns}::add_into", mutates_args={"out"})
    def add_into(x: lib.Tensor, out: lib.Tensor) -> None:
        out.numpy()[...] += x.numpy()

    @add_into.register_fake
    def _(x, out):
        return None

    return add_into


def test_mutating_op_eager_compile_export():
    ns = _ns()
    op, top = _add_into(ns), _add_into(ns, torch)
    assert op.schema == str(top._schema) == "(Tensor x, Tensor(a1!) out) -> ()"
    x = ember.arange(3.0)
    out = ember.ones(3)
    v = out._version
    assert op(x, out) is None
    assert out._version > v
    tout = torch.ones(3)
    top(torch.arange(3.0), tout)
    np.testing.assert_array_equal(out.numpy(), tout.numpy())

    def f(x, out):
        op(x, out)
        return out * 2

    out2 = ember.ones(3)
    got = ember.compile(f, fullgraph=True)(x, out2)
    np.testing.assert_array_equal(out2.numpy(), tout.numpy())
    np.testing.assert_array_equal(got.numpy(), tout.numpy() * 2)
    assert opcheck(op, (x, ember.ones(3))) == dict.fromkeys(
        ("test_schema", "test_autograd_registration", "test_faketensor",
         "test_aot_dispatch_dynamic"), "SUCCESS")


def test_mutating_op_cannot_register_autograd():
    op = _add_into(_ns())
    with pytest.raises(RuntimeError, match="mutates"):
        op.register_autograd(lambda ctx, g: g)


def test_opcheck_catches_unreported_mutation_like_torch():
    ns = _ns()
    ops = []
    for lib in (ember, torch):
        @lib.library.custom_op(f"{ns}::liar", mutates_args=())
        def liar(x: lib.Tensor) -> lib.Tensor:
            x.add_(1)
            return x.clone()

        @liar.register_fake
        def _(x, lib=lib):
            return lib.empty_like(x)
        ops.append(liar)
    eres = opcheck(ops[0], (ember.randn(3),), raise_exception=False)
    tres = torch.library.opcheck(ops[1], (torch.randn(3),), raise_exception=False)
    assert str(eres["test_schema"]) == str(tres["test_schema"]) == \
        "Argument x is not defined as mutable but was mutated"
    assert isinstance(eres["test_schema"], RuntimeError)
    with pytest.raises(ember.library.OpCheckError) as e:
        opcheck(ops[0], (ember.randn(3),))
    assert str(e.value) == ("opcheck(op, ...): test_schema failed with Argument x is not defined "
                            "as mutable but was mutated (scroll up for stack trace)")


# ------------------------------------------------------------------------------ data-dependent
def _nonzero(ns: str):
    @custom_op(f"{ns}::numpy_nonzero", mutates_args=())
    def numpy_nonzero(x: Tensor) -> Tensor:
        res = np.stack(np.nonzero(x.numpy()), axis=1)
        return ember.from_numpy(res.astype(np.int64))

    @numpy_nonzero.register_fake
    def _(x):
        ctx = ember.library.get_ctx()
        nnz = ctx.new_dynamic_size()
        return x.new_empty(nnz, x.dim(), dtype=ember.int64)

    return numpy_nonzero


def test_data_dependent_output_size():
    op = _nonzero(_ns())
    x = ember.tensor([[1.0, 0.0], [0.0, 3.0]])
    want = torch.nonzero(torch.tensor(x.numpy())).numpy()
    np.testing.assert_array_equal(op(x).numpy(), want)
    # compile: the size is known only after the kernel ran -> a graph break, same values
    got = ember.compile(lambda x: op(x) + 1)(x)
    np.testing.assert_array_equal(got.numpy(), want + 1)
    assert ember.compiler.explain(lambda x: op(x) + 1)(x).graph_break_count == 1
    # export: an unbacked size u0
    class M(ember.nn.Module):
        def forward(self, x):
            return op(x)

    ep = ember.export.export(M(), (x,))
    node = next(n for n in ep.graph.nodes if n.target is op.opdef)
    assert str(node.meta["val"].shape[0]).startswith("u")
    np.testing.assert_array_equal(ep.module()(ember.tensor([[0.0, 2.0], [5.0, 3.0]])).numpy(),
                                  [[0, 1], [1, 0], [1, 1]])
    assert all(v == "SUCCESS" for v in opcheck(op, (x,)).values())


def test_get_ctx_outside_fake_impl_raises():
    with pytest.raises(RuntimeError, match="get_ctx"):
        ember.library.get_ctx()


# ------------------------------------------------------------------------------ opcheck
def test_opcheck_passes_numpy_sin():
    op = _numpy_sin(_ns())
    res = opcheck(op, (ember.randn(3, requires_grad=True),))
    assert res == dict.fromkeys(("test_schema", "test_autograd_registration", "test_faketensor",
                                 "test_aot_dispatch_dynamic"), "SUCCESS")
    res = opcheck(op, (ember.randn(3),), test_utils="test_faketensor")
    assert res == {"test_faketensor": "SUCCESS"}
    with pytest.raises(ValueError, match="test_utils"):
        opcheck(op, (ember.randn(3),), test_utils="test_nothing")


def test_opcheck_wrong_fake_shape_like_torch():
    ns = _ns()
    ops = []
    for lib in (ember, torch):
        @lib.library.custom_op(f"{ns}::badfake", mutates_args=())
        def badfake(x: lib.Tensor) -> lib.Tensor:
            return x.clone()

        @badfake.register_fake
        def _(x):
            return x.new_empty(x.shape[0] + 1)
        ops.append(badfake)
    e = opcheck(ops[0], (ember.randn(3),), raise_exception=False)["test_faketensor"]
    t = torch.library.opcheck(ops[1], (torch.randn(3),), raise_exception=False)["test_faketensor"]
    assert isinstance(e, RuntimeError) and isinstance(t, RuntimeError)
    assert str(e).replace("ember", "torch") == str(t.reason)


def test_opcheck_missing_fake():
    ns = _ns()

    @custom_op(f"{ns}::nofake", mutates_args=())
    def nofake(x: Tensor) -> Tensor:
        return x.clone()

    res = opcheck(nofake, (ember.randn(3),), raise_exception=False)
    assert res["test_schema"] == "SUCCESS"
    assert "no fake impl registered" in str(res["test_faketensor"])
    assert "no fake impl registered" in str(res["test_aot_dispatch_dynamic"])


# ------------------------------------------------------------------------------ signatures
def test_optional_list_and_kwonly_arguments():
    ns = _ns()

    @custom_op(f"{ns}::combo", mutates_args=())
    def combo(xs: list[Tensor], w: Optional[Tensor] = None, *, scale: float = 1.0,  # noqa: UP045
              n: int = 1) -> tuple[Tensor, Tensor]:
        s = sum(x for x in xs) * scale * n
        return (s if w is None else s + w).clone(), s.sum().reshape(1)

    @combo.register_fake
    def _(xs, w=None, *, scale=1.0, n=1):
        return ember.empty_like(xs[0]), xs[0].new_empty(1)

    assert combo.schema == ("(Tensor[] xs, Tensor? w=None, *, float scale=1.0, SymInt n=1) "
                            "-> (Tensor, Tensor)")
    a, b = ember.ones(2), ember.full((2,), 2.0)

    def f(a, b):
        return combo([a, b], scale=2.0, n=3), combo([a], b)

    (p, q), (r, s) = f(a, b)
    np.testing.assert_array_equal(p.numpy(), [18.0, 18.0])
    np.testing.assert_array_equal(r.numpy(), [3.0, 3.0])
    (p2, q2), (r2, s2) = ember.compile(f, fullgraph=True)(a, b)
    for u, v in ((p, p2), (q, q2), (r, r2), (s, s2)):
        np.testing.assert_array_equal(u.numpy(), v.numpy())
    assert all(v == "SUCCESS" for v in opcheck(combo, ([a, b],), {"scale": 2.0}).values())


def test_register_kernel_and_device_types():
    ns = _ns()

    @custom_op(f"{ns}::dev", mutates_args=(), device_types="cpu")
    def dev(x: Tensor) -> Tensor:
        return x + 1

    np.testing.assert_array_equal(dev(ember.zeros(2)).numpy(), [1.0, 1.0])

    @dev.register_kernel("cpu")
    def _(x):
        return x + 2

    np.testing.assert_array_equal(dev(ember.zeros(2)).numpy(), [2.0, 2.0])
    ember.library.register_kernel(dev, "cpu", lambda x: x + 3)
    np.testing.assert_array_equal(dev(ember.zeros(2)).numpy(), [3.0, 3.0])

    @custom_op(f"{ns}::cuda_only", mutates_args=(), device_types="cuda")
    def cuda_only(x: Tensor) -> Tensor:
        return x + 1

    with pytest.raises(RuntimeError, match="no kernel registered for device 'cpu'"):
        cuda_only(ember.zeros(2))


def test_free_function_registration():
    ns = _ns()

    @custom_op(f"{ns}::twice", mutates_args=())
    def twice(x: Tensor) -> Tensor:
        return x * 2

    ember.library.register_fake(f"{ns}::twice", lambda x: ember.empty_like(x))
    ember.library.register_autograd(f"{ns}::twice", lambda ctx, g: g * 2)
    x = ember.randn(3, requires_grad=True)
    twice(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(ember.compile(twice, fullgraph=True)(x.detach()).numpy(),
                               x.detach().numpy() * 2)


# ------------------------------------------------------------------------------ Library
def test_library_define_impl():
    ns = _ns()
    lib = ember.library.Library(ns, "DEF")
    tlib = torch.library.Library(ns, "DEF")
    for L in (lib, tlib):
        L.define("scale(Tensor x, float c) -> Tensor")
    with pytest.raises(RuntimeError, match="Tried to register an operator"):
        lib.define("scale(Tensor x, float c) -> Tensor")
    lib.impl("scale", lambda x, c: x * c, "CPU")
    lib.impl("scale", lambda x, c: ember.empty_like(x), "Meta")
    op = getattr(ember.ops, ns).scale
    np.testing.assert_array_equal(op(ember.ones(2), 3.0).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(
        ember.compile(lambda x: op(x, 2.0) + 1, fullgraph=True)(ember.ones(2)).numpy(), [3, 3])
    res = opcheck(op, (ember.ones(2, requires_grad=True), 2.0), raise_exception=False)
    assert isinstance(res["test_autograd_registration"], AssertionError)
    assert "does not have an autograd kernel defined at an autograd key" in \
        str(res["test_autograd_registration"])
    with pytest.raises(ValueError, match="Unsupported kind: BAD"):
        ember.library.Library(ns, "BAD")


def test_library_int_schema_and_composite_implicit():
    ns = _ns()
    ember.library.define(f"{ns}::addn", "(Tensor x, int n) -> Tensor")
    ember.library.impl(f"{ns}::addn", "CompositeImplicitAutograd", lambda x, n: x + n)
    op = getattr(ember.ops, ns).addn
    assert op.schema == "(Tensor x, int n) -> Tensor"
    x = ember.ones(2, requires_grad=True)
    y = op(x, 2)
    y.sum().backward()  # autograd flows through the decomposition
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(y.detach().numpy(), [3.0, 3.0])


def test_library_define_without_impl_raises():
    ns = _ns()
    ember.library.define(f"{ns}::noimpl", "(Tensor x) -> Tensor")
    with pytest.raises(NotImplementedError, match=f"Could not run '{ns}::noimpl'"):
        getattr(ember.ops, ns).noimpl(ember.ones(1))


def test_composite_explicit_kernel_is_lowered_not_extern():
    ns = _ns()
    lib = ember.library.Library(ns, "FRAGMENT")
    lib.define("axpy(Tensor x, Tensor y, float a) -> Tensor")
    lib.impl("axpy", lambda x, y, a: x * a + y, "CompositeExplicitAutograd")
    lib.impl("axpy", lambda x, y, a: ember.empty_like(x), "Meta")
    op = getattr(ember.ops, ns).axpy

    def f(x, y):
        return op(x, y, 3.0).exp()

    x, y = ember.randn(4), ember.randn(4)
    ex = ember.compiler.explain(f)(x, y)
    assert ex.ops_per_graph == [[op.opdef.name, "exp"]] and ex.extern_count == 0
    np.testing.assert_allclose(ember.compile(f)(x, y).numpy(), f(x, y).numpy(), rtol=1e-6)


def test_opcheck_catches_kernel_reading_outside_state():
    ns = _ns()
    calls = [0]

    @custom_op(f"{ns}::stateful", mutates_args=())
    def stateful(x: Tensor) -> Tensor:
        calls[0] += 1
        return x + calls[0]

    stateful.register_fake(lambda x: ember.empty_like(x))
    res = opcheck(stateful, (ember.zeros(2),), raise_exception=False)
    assert res["test_schema"] == "SUCCESS" and res["test_faketensor"] == "SUCCESS"
    assert "differs from eager" in str(res["test_aot_dispatch_dynamic"])


def test_export_mutating_op_on_a_buffer_and_dynamic_dim():
    ns = _ns()
    op = _add_into(ns)
    sin = _numpy_sin(ns)

    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", ember.zeros(3))

        def forward(self, x):
            op(x, self.acc)
            return self.acc * 2

    ep = ember.export.export(M(), (ember.ones(3),))
    assert any(n.target is op.opdef for n in ep.graph.nodes if n.op == "call_function")
    assert "BUFFER_MUTATION target='acc'" in str(ep.graph_signature)
    m = ep.module()
    np.testing.assert_array_equal(m(ember.ones(3)).numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(m.acc.numpy(), [1.0, 1.0, 1.0])

    class K(ember.nn.Module):
        def forward(self, x):
            return sin(x) + 1

    ep = ember.export.export(K(), (ember.ones(4),),
                             dynamic_shapes={"x": {0: ember.export.Dim("n")}})
    x = ember.randn(7)
    np.testing.assert_allclose(ep.module()(x).numpy(), np.sin(x.numpy()) + 1, rtol=1e-6)


def test_data_dependent_op_under_fullgraph_raises_graph_break():
    op = _nonzero(_ns())
    with pytest.raises(ember.compiler.GraphBreakError, match="depends on the data"):
        ember.compile(lambda x: op(x) + 1, fullgraph=True)(ember.ones(3))


def test_combo_schema_matches_torch():
    src = ("def f(xs: list[Tensor], w: Optional[Tensor] = None, *, scale: float = 1.0, "
           "n: int = 1) -> tuple[Tensor, Tensor]: ...")
    ef, tf = _pair(src)
    assert infer_schema(ef, mutates_args=()) == torch.library.infer_schema(tf, mutates_args=())


def test_explicit_schema_string():
    ns = _ns()

    @custom_op(f"{ns}::axpy", mutates_args=(), schema="(Tensor x, Tensor y, float a) -> Tensor")
    def axpy(x, y, a):
        return x * a + y

    assert axpy.schema == "(Tensor x, Tensor y, float a) -> Tensor"
    np.testing.assert_array_equal(axpy(ember.ones(2), ember.ones(2), 2.0).numpy(), [3.0, 3.0])

    @custom_op(f"{ns}::fill", mutates_args={"out"}, schema="(Tensor(a0!) out, float v) -> ()")
    def fill(out, v):
        out.fill_(v)

    t = ember.zeros(2)
    fill(t, 5.0)
    np.testing.assert_array_equal(t.numpy(), [5.0, 5.0])


@pytest.mark.parametrize("name", ["custom_op", "opcheck", "register_fake", "register_autograd",
                                  "register_kernel", "infer_schema", "impl", "define"])
def test_signatures_match_torch(name):
    import inspect

    def params(fn):
        return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]

    assert params(getattr(ember.library, name)) == params(getattr(torch.library, name))


def test_library_method_signatures_match_torch():
    import inspect
    for m in ("define", "impl"):
        e = inspect.signature(getattr(ember.library.Library, m)).parameters
        t = inspect.signature(getattr(torch.library.Library, m)).parameters
        assert list(e) == list(t)


def test_fake_impl_may_use_ops_and_inplace_but_not_data():
    ns = _ns()

    @custom_op(f"{ns}::colsum", mutates_args=())
    def colsum(x: Tensor) -> Tensor:
        return x.sum(0).clone()

    @colsum.register_fake
    def _(x):
        y = ember.empty_like(x).sum(0)
        y.zero_()
        return y * 2

    assert all(v == "SUCCESS" for v in opcheck(colsum, (ember.randn(3, 4),)).values())

    @custom_op(f"{ns}::peek", mutates_args=())
    def peek(x: Tensor) -> Tensor:
        return x.clone()

    @peek.register_fake
    def _(x):
        return ember.empty_like(x) if x.sum().item() > 0 else ember.empty_like(x)

    err = opcheck(peek, (ember.randn(3),), raise_exception=False)["test_faketensor"]
    assert isinstance(err, RuntimeError) and "cannot read tensor data" in str(err)


def test_fast_eager_path_keeps_the_general_paths_semantics():
    # positional calls with no input requiring grad skip binding and flattening
    # (CustomOpDef._call_fast); what the kernel sees and what the caller gets must not change
    ns = _ns()
    seen = []

    @custom_op(f"{ns}::scale", mutates_args=())
    def scale(x: Tensor, a: float) -> Tensor:
        seen.append((ember.is_grad_enabled(), x.requires_grad))
        return x * a

    scale.register_autograd(lambda ctx, g: (g * ctx.a, None),
                            setup_context=lambda ctx, inputs, output: setattr(ctx, "a",
                                                                              inputs[1]))
    x = ember.ones(3)
    np.testing.assert_array_equal(scale(x, 2.0).numpy(), [2.0] * 3)       # fast path
    np.testing.assert_array_equal(scale(x, a=3.0).numpy(), [3.0] * 3)     # general path
    xg = ember.ones(3, requires_grad=True)
    y = scale(xg, 4.0)                                                    # general: autograd
    assert y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), [4.0] * 3)
    assert seen == [(False, False), (False, False), (False, False)]
    with pytest.raises(TypeError, match="missing a required argument"):
        scale(x)


def test_optional_tensor_list_argument():
    ns = _ns()

    @custom_op(f"{ns}::masked_sum", mutates_args=())
    def masked_sum(xs: list[Optional[Tensor]], base: Tensor) -> Tensor:  # noqa: UP045
        out = base.clone()
        for x in xs:
            if x is not None:
                out = out + x
        return out

    @masked_sum.register_fake
    def _(xs, base):
        return ember.empty_like(base)

    masked_sum.register_autograd(
        lambda ctx, g: ([None if n else g for n in ctx.nones], g),
        setup_context=lambda ctx, inputs, output: setattr(
            ctx, "nones", [x is None for x in inputs[0]]))
    assert masked_sum.schema == "(Tensor?[] xs, Tensor base) -> Tensor"
    a = ember.ones(2, requires_grad=True)
    b = ember.full((2,), 2.0)
    y = masked_sum([a, None, b], b)
    np.testing.assert_array_equal(y.detach().numpy(), [5.0, 5.0])
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0])
    got = ember.compile(lambda a, b: masked_sum([None, a, b], b) * 2, fullgraph=True)(a, b)
    np.testing.assert_array_equal(got.detach().numpy(), [10.0, 10.0])
    assert all(v == "SUCCESS" for v in opcheck(masked_sum, ([a, None], b)).values())
