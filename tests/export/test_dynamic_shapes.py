"""dynamic_shapes spec forms and their errors, against torch.export 2.13 where both run."""

import pytest

import ember
from ember._dynamo.exc import UserError
from ember.export import Dim, ShapesCollection, dims, export

torch = pytest.importorskip("torch")


def _model(T):
    class M(T.nn.Module):
        def forward(self, x, y, n=3):
            return x * n + y
    return M()


def _run(T, spec_fn, kwargs_y=False):
    D = T.export.Dim
    x, y = T.randn(4, 3), T.randn(4, 3)
    args, kw = ((x,), {"y": y}) if kwargs_y else ((x, y), {})
    try:
        ep = T.export.export(_model(T), args, kw, dynamic_shapes=spec_fn(D, T.export))
    except Exception as e:  # noqa: BLE001 (compared with torch's outcome)
        # torch appends a link to its docs to some messages
        return type(e).__name__, str(e).split("\n")[0].split(" For more information about")[0]
    shapes = [tuple(str(d)[0] if not str(d).isdigit() else str(d) for d in n.meta["val"].shape)
              for n in ep.graph.nodes if n.op == "placeholder"]
    ranges = sorted((int(v.lower), None if str(v.upper) in ("inf", "int_oo") else int(v.upper))
                    for v in ep.range_constraints.values())
    return shapes, ranges


SPECS = {
    "dict": lambda D, E: {"x": {0: D("b")}, "y": {0: D("b")}},
    "tuple": lambda D, E: ({0: D("b")}, {0: D("b")}),
    "per-dim tuple/list": lambda D, E: {"x": [D.AUTO, None], "y": (D.AUTO, D.STATIC)},
    "dims()": lambda D, E: {"x": {0: E.dims("a", "c", max=9)[0]}, "y": None},
    "ranges": lambda D, E: {"x": {0: D("b", min=3, max=50)}, "y": {0: D.DYNAMIC(max=40)}},
    "tuple too long": lambda D, E: ({0: D("b")}, {0: D("b")}, None),
    "dict with a non-argument": lambda D, E: {"x": None, "y": None, "n": {0: D.AUTO}},
    "dict missing an argument": lambda D, E: {"x": {0: D.AUTO}},
    "a hint for a whole tensor": lambda D, E: {"x": D.AUTO, "y": None},
    "a Dim for a whole tensor": lambda D, E: {"x": D("b"), "y": None},
}


@pytest.mark.parametrize("name", list(SPECS))
def test_spec_forms_like_torch(name):
    assert _run(ember, SPECS[name]) == _run(torch, SPECS[name])


def test_kwargs_inputs_like_torch():
    spec = SPECS["dict"]
    assert _run(ember, spec, kwargs_y=True) == _run(torch, spec, kwargs_y=True)
    ep = export(_model(ember), (ember.randn(4, 3),), {"y": ember.randn(4, 3)},
                dynamic_shapes={"x": {0: Dim("b")}, "y": {0: Dim("b")}})
    assert ep.module()(ember.randn(6, 3), y=ember.randn(6, 3)).shape == (6, 3)


def test_shapes_collection():
    x, y = ember.randn(4, 3), ember.randn(4, 3)
    sc = ShapesCollection()
    b = Dim("b")
    sc[x] = {0: b}
    sc[y] = {0: b}
    assert sc.dynamic_shapes(_model(ember), (x, y)) == {"x": {0: b}, "y": {0: b}}
    ep = export(_model(ember), (x, y), dynamic_shapes=sc)
    shapes = [tuple(map(str, n.meta["val"].shape)) for n in ep.graph.nodes if n.op == "placeholder"]
    assert shapes[:2] == [("s0", "3"), ("s0", "3")]


def test_dim_objects_like_torch():
    for D in (Dim, torch.export.Dim):
        assert repr(D("b")) == "Dim('b', min=0)"
        assert repr(D("c", min=3, max=9)) == "Dim('c', min=3, max=9)"
        d = 2 * D("b") + 1
        assert repr(d) == "2*b + 1" and (d.min, d.fn(3)) == (1, 7)
        with pytest.raises(AssertionError, match="inconsistent min=5, max=2"):
            D("b", min=5, max=2)
        with pytest.raises(AssertionError, match="valid identifier, got 1x"):
            D("1x")
        with pytest.raises(NotImplementedError, match="positive integer was expected"):
            D("b") * D("b")
        with pytest.raises(NotImplementedError, match="where an integer was expected"):
            D("b") + 0.5
    assert [repr(d) for d in dims("x", "y", max=8)] == ["Dim('x', min=0, max=8)",
                                                         "Dim('y', min=0, max=8)"]
    assert repr(Dim.AUTO) == "DimHint(AUTO)" and repr(Dim.DYNAMIC(max=5)) == \
        "DimHint(DYNAMIC, max=5)"


@pytest.mark.parametrize("spec, match", [
    ({"x": {5: Dim.AUTO}, "y": None}, r"Dimension 5 is out of range for inputs\['x'\]"),
    ({"x": {0: "dynamic"}, "y": None}, r"inputs\['x'\].shape\[0\]: 'dynamic'"),
    ({"x": (Dim.AUTO,), "y": None}, r"at inputs\['x'\] to have length 2"),
    ({"x": {0: 5}, "y": None}, r"inputs\['x'\].shape\[0\] to be equal to 5, but got 4"),
    ({"x": {0: Dim("b", max=3)}, "y": None}, r"inputs\['x'\].shape\[0\] to be <= 3, but got 4"),
    ({"x": 7, "y": None}, r"Unexpected input tensor shape 7 specified at `dynamic_shapes\['x'\]`"),
])
def test_invalid_specs_name_the_argument_path(spec, match):
    with pytest.raises(UserError, match=match):
        export(_model(ember), (ember.randn(4, 3), ember.randn(4, 3)), dynamic_shapes=spec)


def test_derived_dim_needs_an_integer_root():
    d = Dim("d")
    with pytest.raises(UserError, match=r"to be of the form 2\*d \+ 1, where d is an integer"):
        export(_model(ember), (ember.randn(4, 3), ember.randn(4, 3)),
               dynamic_shapes={"x": {0: 2 * d + 1}, "y": None})
