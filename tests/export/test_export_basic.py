"""ember.export end to end on an MLP: the graph, signature, module(), printing (issue 15)."""

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, ExportedProgram, InputKind, OutputKind, export
from ember.sym import FakeTensor, SymInt


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


@pytest.fixture
def mlp_ep():
    ember.manual_seed(0)
    m = MLP()
    return m, export(m, (ember.randn(5, 8),), dynamic_shapes={"x": {0: Dim("batch")}})


def test_graph_is_walkable(mlp_ep):
    _, ep = mlp_ep
    assert isinstance(ep, ExportedProgram)
    nodes = ep.graph.nodes
    assert [n.op for n in nodes[:5]] == ["placeholder"] * 5
    assert [n.name for n in nodes[:5]] == ["p_fc1_weight", "p_fc1_bias", "p_fc2_weight",
                                          "p_fc2_bias", "x"]
    assert nodes[-1].op == "output"
    calls = [n for n in nodes if n.op == "call_function"]
    assert calls and all(n.target.name in ("linear", "relu") for n in calls)
    x = nodes[4]
    assert isinstance(x.meta["val"], FakeTensor)
    s0, eight = x.meta["val"].shape
    assert isinstance(s0, SymInt) and eight == 8
    assert str(s0) == "s0"
    assert calls[0].args[0] is x
    assert str(calls[-1].meta["val"].shape[0]) == "s0"
    ep.validate()


def test_signature_and_state(mlp_ep):
    m, ep = mlp_ep
    sig = ep.graph_signature
    kinds = [s.kind for s in sig.input_specs]
    assert kinds == [InputKind.PARAMETER] * 4 + [InputKind.USER_INPUT]
    assert [s.target for s in sig.input_specs[:4]] == ["fc1.weight", "fc1.bias", "fc2.weight",
                                                      "fc2.bias"]
    assert [s.kind for s in sig.output_specs] == [OutputKind.USER_OUTPUT]
    assert set(ep.state_dict) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert ep.constants == {}
    assert [n for n, _ in ep.named_parameters()] == sig.parameters
    (sym, vr), = ep.range_constraints.items()
    # a named Dim reports the range it declares (Dim("batch"): min 0), as PyTorch does
    assert str(sym) == "s0" and (vr.lower, vr.upper) == (0, float("inf"))
    assert ep.example_inputs[0][0].shape == (5, 8)
    assert ep.dialect == "TRAINING"


def test_module_runs_new_shapes_and_guards(mlp_ep):
    m, ep = mlp_ep
    mod = ep.module()
    assert isinstance(mod, nn.Module)
    assert set(dict(mod.named_parameters())) == set(ep.state_dict)
    for b in (2, 9, 31):
        x = ember.randn(b, 8)
        np.testing.assert_allclose(mod(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[1\] == 8"):
        mod(ember.randn(3, 7))
    with pytest.raises(ValueError, match="Trying to flatten user inputs"):
        mod(ember.randn(3, 8), ember.randn(3, 8))


def test_call_and_str(mlp_ep):
    _, ep = mlp_ep
    with pytest.raises(RuntimeError, match="Unable to call ExportedProgram directly"):
        ep(ember.randn(5, 8))
    s = str(ep)
    assert s.startswith("ExportedProgram:")
    assert 'x: "f32[s0, 8]"' in s
    assert "p_fc1_weight: PARAMETER target='fc1.weight'" in s
    assert "Range constraints: {s0: VR[0, int_oo]}" in s


def test_batchnorm_training_buffer_mutation():
    m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    ep = export(m, (ember.randn(6, 4),), dynamic_shapes={"input": {0: Dim("batch")}})
    assert [str(k) for k in ep.range_constraints] == ["s0"]  # the batch stays dynamic
    outs = ep.graph_signature.output_specs
    muts = {s.target for s in outs if s.kind == OutputKind.BUFFER_MUTATION}
    assert muts == {"1.running_mean", "1.running_var", "1.num_batches_tracked"}
    assert outs[-1].kind == OutputKind.USER_OUTPUT
    # the original module's buffers were restored after tracing
    assert float(m[1].num_batches_tracked) == 0
    np.testing.assert_array_equal(m[1].running_mean.numpy(), np.zeros(3, np.float32))
    mod = ep.module()
    x = ember.randn(11, 4)
    ref = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    ref.load_state_dict(m.state_dict())
    y, y_ref = mod(x), ref(x)
    np.testing.assert_allclose(y.detach().numpy(), y_ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    for b in ("1.running_mean", "1.running_var"):
        np.testing.assert_allclose(mod.get_buffer(b).numpy(), ref.get_buffer(b).numpy(),
                                   rtol=1e-6)
    assert int(mod.get_buffer("1.num_batches_tracked")) == 1
    dec = ep.run_decompositions()
    assert [s.kind for s in dec.graph_signature.output_specs] == [s.kind for s in outs]
    dec.validate()


def test_user_input_mutation():
    class M(nn.Module):
        def forward(self, x, y):
            x.add_(1)
            return x * y

    ep = export(M(), (ember.ones(3), ember.ones(3)))
    kinds = [s.kind for s in ep.graph_signature.output_specs]
    assert kinds == [OutputKind.USER_INPUT_MUTATION, OutputKind.USER_OUTPUT]
    assert ep.graph_signature.output_specs[0].target == "x"
    x = ember.zeros(3)
    out = ep.module()(x, ember.full((3,), 2.0))
    np.testing.assert_array_equal(x.numpy(), np.ones(3, np.float32))
    np.testing.assert_array_equal(out.numpy(), np.full(3, 2.0, np.float32))


def test_value_dependent_code_names_the_line():
    class M(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x

    from ember.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
    with pytest.raises(GuardOnDataDependentSymNode, match="test_export_basic.py"):
        export(M(), (ember.randn(3),))


def test_args_must_be_a_tuple_and_mod_a_module():
    from ember._dynamo.exc import UserError
    with pytest.raises(UserError, match="tuple"):
        export(MLP(), [ember.randn(2, 8)])
    with pytest.raises(ValueError, match="Expected `mod` to be an instance of `torch.nn.Module`"):
        export(lambda x: x * 2, (ember.randn(3),))


class Losses(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, t):
        return ember.nn.functional.mse_loss(self.fc(x), t), ember.nn.functional.glu(x, -1)


def _targets(ep):
    return [n.target.name for n in ep.graph.nodes
            if n.op == "call_function" and hasattr(n.target, "kind")]


def test_run_decompositions_to_primitives():
    ep = export(Losses(), (ember.randn(3, 4), ember.randn(3, 4)),
                dynamic_shapes={"x": {0: Dim.AUTO}, "t": {0: Dim.AUTO}})
    assert {"mse_loss", "glu"} <= set(_targets(ep))
    dec = ep.run_decompositions()
    assert dec is not ep and {"mse_loss", "glu"} <= set(_targets(ep))  # ep is unchanged
    assert not {"mse_loss", "glu"} & set(_targets(dec))
    assert all(n.target.decomp is None for n in dec.graph.nodes
               if n.op == "call_function" and hasattr(n.target, "kind"))
    dec.validate()
    x, t = ember.randn(6, 4), ember.randn(6, 4)
    for a, b in zip(dec.module()(x, t), ep.module()(x, t)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    kept = ep.run_decompositions({"glu": None})
    assert "glu" in _targets(kept) and "mse_loss" not in _targets(kept)


def test_compile_exported_module_matches_eager():
    m = Losses()
    ep = export(m, (ember.randn(3, 4), ember.randn(3, 4)),
                dynamic_shapes={"x": {0: Dim.AUTO}, "t": {0: Dim.AUTO}})
    compiled = ember.compile(ep.module())
    for b in (5, 8):
        x, t = ember.randn(b, 4), ember.randn(b, 4)
        for a, r in zip(compiled(x, t), m(x, t)):
            np.testing.assert_allclose(a.detach().numpy(), r.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)


def test_non_tensor_inputs_are_guarded_constants():
    class M(nn.Module):
        def forward(self, x, n, opts):
            return x * n + opts["shift"]

    ep = export(M(), (ember.ones(3), 3, {"shift": 1.5}))
    mod = ep.module()
    np.testing.assert_array_equal(mod(ember.ones(3), 3, {"shift": 1.5}).numpy(),
                                  np.full(3, 4.5, np.float32))
    with pytest.raises(AssertionError, match="Guard failed: n == 3"):
        mod(ember.ones(3), 4, {"shift": 1.5})
    with pytest.raises(AssertionError, match=r"Guard failed: opts\['shift'\] == 1.5"):
        mod(ember.ones(3), 3, {"shift": 2.5})


def test_module_is_differentiable_like_eager(mlp_ep):
    m, ep = mlp_ep
    mod = ep.module()
    x = ember.randn(6, 8)
    mod(x).sum().backward()
    m.zero_grad()
    m(x).sum().backward()
    for name, p in mod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), m.get_parameter(name).grad.numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_bad_outputs_and_data_dependent_ops_name_the_problem():
    from ember._dynamo.exc import UserError
    from ember.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    class Size(nn.Module):
        def forward(self, x):
            return x * 2, x.shape[0]

    with pytest.raises(UserError, match=r"output\[1\] is a symbolic size"):
        export(Size(), (ember.randn(4, 2),), dynamic_shapes={"x": {0: Dim.AUTO}})

    class Obj(nn.Module):
        def forward(self, x):
            return {"y": x, "f": object()}

    with pytest.raises(UserError, match=r"output\['f'\] is a object"):
        export(Obj(), (ember.randn(4, 2),))

    class NonZero(nn.Module):
        def forward(self, x):
            i = ember.nonzero(x)
            return i if i.shape[0] > 2 else x  # branches on a data-dependent size

    with pytest.raises(GuardOnDataDependentSymNode, match=r"u0.*\n.*test_export_basic.py"):
        export(NonZero(), (ember.randn(4, 2),))


def test_data_dependent_sizes_are_unbacked_symbols():
    class M(nn.Module):
        def forward(self, x):
            return ember.nonzero(x) * 2, x.sum()

    ep = export(M(), (ember.randn(5, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    nz = next(n for n in ep.graph.nodes if n.name == "nonzero")
    assert [str(d) for d in nz.meta["val"].shape] == ["u0", "2"]
    assert {str(k): (v.lower, v.upper) for k, v in ep.range_constraints.items()} == \
        {"u0": (0, float("inf")), "s0": (2, float("inf"))}
    x = ember.tensor([[1.0, 0, 2], [0, 0, 0]])
    np.testing.assert_array_equal(ep.module()(x)[0].numpy(), [[0, 0], [0, 4]])
    import io
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    assert ember.export.load(buf).module()(ember.ones(3, 3))[0].shape == (9, 2)


def test_nested_inputs_and_outputs():
    class M(nn.Module):
        def forward(self, pair, cfg):
            a, b = pair
            return {"sum": a + cfg["w"], "prod": [a * b]}

    args = ((ember.randn(3, 2), ember.randn(3, 2)), {"w": ember.randn(3, 2)})
    ep = export(M(), args, dynamic_shapes={"pair": ({0: Dim("n")}, {0: Dim("n")}),
                                           "cfg": {"w": {0: Dim("n")}}})
    assert ep.graph_signature.user_inputs == ["pair_0", "pair_1", "cfg_w"]
    x = (ember.randn(5, 2), ember.randn(5, 2)), {"w": ember.randn(5, 2)}
    out = ep.module()(*x)
    assert set(out) == {"sum", "prod"} and isinstance(out["prod"], list)
    np.testing.assert_allclose(out["prod"][0].numpy(), (x[0][0] * x[0][1]).numpy())
    with pytest.raises(AssertionError, match=r"Guard failed: pair\[1\].size\(\)\[0\] == "
                                             r"pair\[0\].size\(\)\[0\]"):
        ep.module()((ember.randn(5, 2), ember.randn(4, 2)), {"w": ember.randn(5, 2)})


def test_tensor_attributes_lift_under_their_fqn_as_torch():
    """A plain tensor attribute (not a parameter or buffer) lifts as ``c_<fqn>`` with target
    ``<fqn>``; one in a tuple or made by the forward as ``lifted_tensor_<k>`` (torch's
    ``_gather_constant_attrs``): the signature and constants equal torch 2.13's."""
    torch = pytest.importorskip("torch")

    def build(lib, mod):
        class S(mod.Module):
            def __init__(self):
                super().__init__()
                self.w = lib.ones(3) * 2

            def forward(self, x):
                return x * self.w + self.w.sum()

        class M(mod.Module):
            def __init__(self):
                super().__init__()
                self.sub, self.t = S(), (lib.ones(3),)

            def forward(self, x):
                return self.sub(x) + self.t[0] + lib.tensor([1.0, 2.0, 3.0])
        return M()

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ep = export(build(ember, nn), (ember.tensor(x),))
    tep = torch.export.export(build(torch, torch.nn), (torch.from_numpy(x),))
    sig = [(s.kind.name, s.arg.name, s.target) for s in ep.graph_signature.input_specs]
    tsig = [(s.kind.name, s.arg.name, s.target) for s in tep.graph_signature.input_specs]
    assert sig == tsig
    assert sig[0] == ("CONSTANT_TENSOR", "c_sub_w", "sub.w")
    assert list(ep.constants) == list(tep.constants)
    np.testing.assert_array_equal(ep.module()(ember.tensor(x)).numpy(),
                                  tep.module()(torch.from_numpy(x)).numpy())


def test_tensor_constants_are_lifted():
    class M(nn.Module):
        def forward(self, x):
            return x * ember.tensor([1.0, 2.0, 3.0]) + 1

    ep = export(M(), (ember.ones(4, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    specs = ep.graph_signature.input_specs
    assert [s.kind for s in specs] == [InputKind.CONSTANT_TENSOR, InputKind.USER_INPUT]
    assert specs[0].arg.name == "c_lifted_tensor_0" and specs[0].target == "lifted_tensor_0"
    np.testing.assert_array_equal(ep.constants["lifted_tensor_0"].numpy(), [1, 2, 3])
    np.testing.assert_array_equal(ep.module()(ember.ones(2, 3)).numpy(), [[2, 3, 4]] * 2)
    import io
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    ep2 = ember.export.load(buf)
    np.testing.assert_array_equal(ep2.module()(ember.ones(5, 3)).numpy(), [[2, 3, 4]] * 5)


def test_floor_division_guards_narrow_ranges():
    from ember.sym import ShapeEnv
    env = ShapeEnv()
    h = env.create_symbol(16, "h")
    assert ((h - 2) // 2) >= 2          # a pooled size: learned as h >= 6
    assert (h // 4) < 10                # h <= 39
    (vr,) = env.var_to_range.values()
    assert (vr.lower, vr.upper) == (6, 39)
