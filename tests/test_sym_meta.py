"""Every OpDef's meta on symbolic shapes (ember-only sweep over the OpInfo table).

Each recorded primitive call (``tests/sym_sweep.py``) is replayed with its input dims >= 2 as
fresh symbols whose hints are the real sizes; the meta's output shape, with the hints put back,
must equal the shape eager produced.  Two modes: params as recorded (concrete ints), and
size-carrying params using the inputs' symbols (as ``x.view(x.shape[1], -1)`` does under
export).  Ops whose meta pins an input symbol to a constant are listed with the reason.
"""

from __future__ import annotations

import pytest

import ember
from ember.ops import REGISTRY
from ember.sym import FakeTensor, ShapeEnv
from tests.sym_sweep import check_other_sizes, core_op_names, record_calls, run_symbolic

# ops whose meta cannot run on symbolic shapes yet: {name: reason} (strict xfail)
EXPECTED_FAIL: dict[str, str] = {}

# ops that pin an input symbol to a constant (mode: size params symbolic), with why
PINS = {
    "adaptive_avg_pool": "in_size/out_size are concrete output sizes (static in PyTorch too)",
    "as_strided_backward": "the src/dst geometry params are concrete sizes and strides",
    "qlinear_dynamic": "the packed weight's in_features is a concrete int the input's last dim "
                       "must equal (parameters' sizes are static, as in PyTorch)",
    "split_with_sizes": "the split sizes are concrete ints that must sum to the dim",
    "storage_write": "the storage geometry param is concrete",
    "unbind": "the number of outputs must be a Python int (PyTorch specializes too)",
    "view": "a shape param that splits a dim into constant factors, (1, 4, 5, 8) -> (1, 2, 2, "
            "5, 8), pins that dim (PyTorch guards too)",
}


@pytest.fixture(scope="module")
def calls() -> dict:
    return record_calls()


@pytest.fixture(scope="module")
def outcomes(calls) -> dict:  # noqa: ANN001
    """{symbolic_params: {op name: [Outcome per call]}}, computed once."""
    return {mode: {n: [run_symbolic(c, mode) for c in cs] for n, cs in calls.items()}
            for mode in (False, True)}


def test_every_opdef_is_swept(calls):
    core = core_op_names(REGISTRY)
    assert core_op_names(calls) == core, sorted(core ^ core_op_names(calls))


@pytest.mark.parametrize("symbolic_params", [False, True], ids=["params", "symparams"])
@pytest.mark.parametrize("name", sorted(core_op_names(REGISTRY)))
def test_meta_runs_symbolically(calls, outcomes, name, symbolic_params, request):
    if name in EXPECTED_FAIL:
        request.applymarker(pytest.mark.xfail(reason=EXPECTED_FAIL[name], strict=True))
    for call, out in zip(calls[name], outcomes[symbolic_params][name]):
        assert out.ok, f"{name} {call.inputs} {call.params}: {out.error}"


def _pins(outcome) -> bool:  # noqa: ANN001
    return any(g.kind == "specialize" or (
        g.kind == "eq" and g.expr.lhs.is_Symbol and g.expr.rhs.is_Integer) for g in outcome.guards)


def test_specializing_ops_are_the_listed_ones(outcomes):
    pinned = sorted({n for n, outs in outcomes[True].items() for o in outs if _pins(o)}
                    & core_op_names(outcomes[True]))
    assert pinned == sorted(PINS), pinned


def test_most_ops_stay_symbolic(outcomes):
    """Most ops (unary, reductions, views...) keep a symbolic output dim without any guard in
    at least one of their calls."""
    free = {n for n, outs in outcomes[True].items() for o in outs if o.symbolic and not o.guards}
    assert len(free) > len(outcomes[True]) // 2, (len(free), len(outcomes[True]))


def test_guard_free_expressions_hold_at_other_sizes(calls, outcomes):
    """A meta that decided everything without a guard claims its output shape for every size:
    check it against the eager kernel at sizes other than the example's."""
    bad, checked = [], 0
    for name, cs in calls.items():
        for call, out in zip(cs, outcomes[False][name]):
            if not (out.ok and out.symbolic and not out.guards):
                continue
            for bump in (1, 3):
                res = check_other_sizes(call, out, bump)
                checked += res is None
                if res not in (None, "skip"):
                    bad.append(f"{name} {call.inputs} {call.params}: {res}")
    assert not bad, "\n".join(bad)
    assert checked > 300, checked


# ---------------------------------------------------------------- targeted metas
def _env(*hints: int) -> tuple:
    env = ShapeEnv()
    return env, [env.create_symbol(h, f"d{i}") for i, h in enumerate(hints)]


def test_reshape_minus_one_infers_a_symbolic_size():
    from ember._frontend.shape import infer_shape, size_args

    env, (n, m) = _env(6, 8)
    x = FakeTensor((n, m), ember.float32)
    shape = infer_shape(size_args((-1, m), "view"), x.numel(), "view")
    out, _ = REGISTRY["view"].meta(x, shape=shape)
    assert tuple(map(str, out)) == ("s0", "s1")
    assert not env.guards, env.format_guards()
    out, _ = REGISTRY["view"].meta(x, shape=infer_shape((-1, 4), x.numel(), "view"))
    assert str(out[0]) == "((s0*s1)//4)" and out[0].hint() == 12
    assert [(str(g.expr), g.kind) for g in env.guards] == [("Eq(Mod(s0*s1, 4), 0)", "divisible")]


def test_matmul_guards_the_inner_dims_equal():
    env, (a, k1, k2, b) = _env(3, 5, 5, 7)
    shape, _ = REGISTRY["matmul"].meta(FakeTensor((a, k1), ember.float32),
                                       FakeTensor((k2, b), ember.float32))
    assert tuple(map(str, shape)) == ("s0", "s3")
    assert {str(k): str(v) for k, v in env.replacements.items()} == {"s2": "s1"}


def test_conv_output_size_is_an_expression():
    env, (n, h) = _env(2, 9)
    shape, _ = REGISTRY["convolution"].meta(
        FakeTensor((n, 3, h, h), ember.float32), FakeTensor((4, 3, 3, 3), ember.float32),
        stride=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=1)
    assert str(shape[2]) == "(((s1 - 1)//2)) + 1" and shape[2].hint() == 5  # as PyTorch prints
    assert not env.guards, env.format_guards()


def test_nonzero_gives_an_unbacked_size():
    env, (n,) = _env(6)
    shape, _ = REGISTRY["nonzero"].meta(FakeTensor((n, 3), ember.bool))
    assert str(shape[0]) == "u0" and shape[1] == 2
    assert env.var_to_range[shape[0].expr].lower == 0


def test_frontend_broadcasting_on_symbolic_shapes():
    from ember._frontend.core import broadcast_shapes
    from ember._frontend.structure import broadcast_shapes as public_broadcast_shapes

    env, (a, b, c, d) = _env(5, 6, 5, 6)
    assert tuple(map(str, broadcast_shapes("add", (a, 1), (1, b)))) == ("s0", "s1")
    assert tuple(map(str, public_broadcast_shapes((a, 1), (b,)))) == ("s0", "s1")
    assert env.guards == []  # size-1 checks decide from the ranges
    assert tuple(map(str, broadcast_shapes("add", (a, b), (c, d)))) == ("s0", "s1")
    assert [str(g.expr) for g in env.guards] == ["Eq(s0, s2)", "Eq(s1, s3)"]
    assert str(c) == "s0"  # the equality became a substitution
    assert broadcast_shapes("add", (a,), (5,)) == (5,)
    assert env.specializations() == {"d0": 5, "d2": 5}  # d2 was already tied to d0
