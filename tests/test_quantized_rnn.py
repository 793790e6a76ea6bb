"""Dynamic quantized recurrent modules (``ember.ao.nn.quantized.dynamic.LSTMCell``,
``GRUCell``, ``RNNCell``, ``LSTM``, ``GRU``) against torch 2.13's ``quantize_dynamic``:
classes, reprs, the default qconfig set, numerics (int8 products bit for bit, float gates to
the last bits), state dict keys; and their export (the forward is ember ops, nothing reads a
value)."""

import numpy as np
import pytest

import ember
from ember.ao.nn.quantized import dynamic as nnqd
from ember.ops import _qlinear_c

torch = pytest.importorskip("torch")
tq = torch.ao.quantization

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.skipif(torch.backends.quantized.engine not in ("x86", "fbgemm"),
                                 reason="the reference is torch's x86/fbgemm kernel")]

CELLS = [("LSTMCell", {}), ("GRUCell", {}), ("RNNCell", {}),
         ("RNNCell", {"nonlinearity": "relu"})]


@pytest.fixture(params=["c", "numpy"])
def kernel(request: pytest.FixtureRequest):  # noqa: ANN201
    """The eager C kernel (when it builds) and the NumPy path (blocked float32 BLAS)."""
    old = _qlinear_c.set_enabled(request.param == "c")
    if request.param == "c" and not _qlinear_c.available():
        _qlinear_c.set_enabled(old)
        pytest.skip("the eager C kernel could not be built here")
    yield request.param
    _qlinear_c.set_enabled(old)


def _rand(shape: tuple, seed: int, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + rng.uniform(-0.3, 0.3)).astype(np.float32)


def _pair(name: str, kw: dict, *sizes: int, seed: int = 0) -> tuple:
    torch.manual_seed(seed)
    t = getattr(torch.nn, name)(*sizes, **kw)
    e = getattr(ember.nn, name)(*sizes, **kw)
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return t, e


def _call(m, x, h, lstm: bool, lib):  # noqa: ANN001, ANN202
    """One call of a cell with state ``h`` ((h, c) for an LSTM cell) made of ``lib`` tensors."""
    to = torch.from_numpy if lib is torch else ember.tensor
    if h is None:
        return m(to(x))
    return m(to(x), tuple(to(v) for v in h) if lstm else to(h))


@pytest.mark.parametrize("name,kw", CELLS)
def test_cells_match_torch(name: str, kw: dict, kernel: str) -> None:
    """``quantize_dynamic`` (default set) makes torch's cell classes; a loop of steps that
    feeds each step's state back gives torch's outputs within 1e-6 (int8 products bit for
    bit, float32 gates to the last bits)."""
    t, e = _pair(name, kw, 12, 20, seed=len(name))
    t_q = tq.quantize_dynamic(torch.nn.Sequential(t))
    e_q = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(e))
    assert type(e_q[0]) is getattr(nnqd, name)
    assert type(e_q[0]).__name__ == type(t_q[0]).__name__
    assert repr(e_q).replace("ember.", "torch.") == repr(t_q)
    lstm = name == "LSTMCell"
    xs = _rand((6, 4, 12), 1, 2.0)
    for h0 in (None, _rand((4, 20), 2, 0.3)):
        th = eh = None if h0 is None else ((h0, h0 * 0.5) if lstm else h0)
        for x in xs:
            want = _call(t_q[0], x, th, lstm, torch)
            got = _call(e_q[0], x, eh, lstm, ember)
            ws = want if lstm else (want,)
            gs = got if lstm else (got,)
            for g, w in zip(gs, ws):
                assert g.dtype is ember.float32 and tuple(g.shape) == tuple(w.shape)
                np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=0, atol=1e-6)
            th = tuple(v.detach().numpy() for v in ws) if lstm else ws[0].detach().numpy()
            eh = tuple(v.numpy() for v in gs) if lstm else gs[0].numpy()


def test_cell_products_bit_for_bit_with_torch() -> None:
    """An RNNCell with ReLU has no transcendental gate: its output is torch's bits."""
    t, e = _pair("RNNCell", {"nonlinearity": "relu"}, 300, 40, seed=3)
    t_q = tq.quantize_dynamic(torch.nn.Sequential(t), {torch.nn.RNNCell})
    e_q = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(e), {ember.nn.RNNCell})
    x, h = _rand((9, 300), 4, 3.0), _rand((9, 40), 5)
    np.testing.assert_array_equal(
        e_q[0](ember.tensor(x), ember.tensor(h)).numpy(),
        t_q[0](torch.from_numpy(x), torch.from_numpy(h)).detach().numpy())


def _zoo(lib) -> object:  # noqa: ANN001
    nn = lib.nn
    return nn.Sequential(nn.Linear(4, 4), nn.LSTM(4, 4), nn.GRU(4, 4), nn.LSTMCell(4, 4),
                         nn.GRUCell(4, 4), nn.RNNCell(4, 4), nn.ReLU())


@pytest.mark.parametrize("spec", [None, "LSTMCell", "GRUCell", "RNNCell", "cells"])
def test_default_set_and_spec_like_torch(spec: str | None) -> None:
    """No qconfig_spec: torch's default set (Linear, LSTM, GRU and the three cells); a set of
    cell types: only those."""
    names = {"cells": ["LSTMCell", "GRUCell", "RNNCell"], None: None}.get(spec, [spec])
    t_spec = None if names is None else {getattr(torch.nn, n) for n in names}
    e_spec = None if names is None else {getattr(ember.nn, n) for n in names}
    t_q = tq.quantize_dynamic(_zoo(torch), t_spec)
    e_q = ember.ao.quantization.quantize_dynamic(_zoo(ember), e_spec)
    assert [type(m).__name__ for m in e_q] == [type(m).__name__ for m in t_q]
    assert [m._get_name() for m in e_q] == [m._get_name() for m in t_q]
    assert repr(e_q).replace("ember.", "torch.") == repr(t_q)
    assert set(ember.ao.quantization.get_default_dynamic_quant_module_mappings()) == {
        ember.nn.Linear, ember.nn.LSTM, ember.nn.GRU, ember.nn.LSTMCell, ember.nn.GRUCell,
        ember.nn.RNNCell}


def test_cell_errors_like_torch() -> None:
    with pytest.raises(AssertionError, match="mod.bias must be True"):
        tq.quantize_dynamic(torch.nn.Sequential(torch.nn.LSTMCell(4, 3, bias=False)))
    with pytest.raises(ember.EmberValueError, match=r"\[quantized.dynamic.LSTMCell\] mod.bias"):
        ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(ember.nn.LSTMCell(4, 3,
                                                                                     bias=False)))
    q = nnqd.GRUCell.from_float(ember.nn.GRUCell(4, 3))
    with pytest.raises(IndexError, match=r"\[quantized.dynamic.GRUCell\]"):
        q(ember.zeros(4))                        # torch: IndexError (input.size(1))
    with pytest.raises(TypeError, match=r"\[quantized.dynamic.GRUCell\]"):
        q(ember.zeros(2, 4, dtype=ember.float64))
    with pytest.raises(RuntimeError, match=r"inconsistent input_size: got 5, expected 4"):
        q(ember.zeros(2, 5))
    with pytest.raises(RuntimeError, match=r"batch size 2 doesn't match hidden batch size 3"):
        q(ember.zeros(2, 4), ember.zeros(3, 3))
    with pytest.raises(RuntimeError, match=r"hidden\[1\] has inconsistent hidden_size"):
        nnqd.LSTMCell.from_float(ember.nn.LSTMCell(4, 3))(
            ember.zeros(2, 4), (ember.zeros(2, 3), ember.zeros(2, 5)))
    with pytest.raises(TypeError, match=r"from_float only works for nn.LSTMCell"):
        nnqd.RNNCell.from_float(ember.nn.Linear(4, 3))


@pytest.mark.parametrize("name", ["LSTMCell", "GRU", "LSTM"])
def test_state_dict_keys_codes_and_round_trip(name: str, tmp_path) -> None:  # noqa: ANN001
    """Keys are torch's (``_packed_weight_ih``/``_hh``; ``_all_weight_values.<k>.param``); the
    values are ember's (weight, bias) pairs (torch's are ScriptObjects ember cannot read), the
    int8 codes are torch's, ``torch.load(weights_only=True)`` reads ember's file, and a fresh
    quantized model that loads it gives the original's bits."""
    args = (6, 5) if "Cell" in name else (6, 5, 2)
    kw = {} if "Cell" in name else {"bidirectional": True}
    t, e = _pair(name, kw, *args, seed=7)
    t_q = tq.quantize_dynamic(torch.nn.Sequential(t))
    e_q = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(e))
    sd, tsd = e_q.state_dict(), t_q.state_dict()
    assert list(sd) == list(tsd)
    w_e, w_t = e_q[0].get_weight(), t_q[0].get_weight()
    assert list(w_e) == list(w_t)
    for k in w_t:
        np.testing.assert_array_equal(w_e[k].int_repr().numpy(), w_t[k].int_repr().numpy())
        assert w_e[k].q_scale() == w_t[k].q_scale()
    b_e, b_t = e_q[0].get_bias(), t_q[0].get_bias()
    assert list(b_e) == list(b_t)
    for k in b_t:
        np.testing.assert_array_equal(b_e[k].numpy(), b_t[k].detach().numpy())
    first = sd["0._packed_weight_ih" if "Cell" in name else "0._all_weight_values.0.param"]
    np.testing.assert_array_equal(first[0].int_repr().numpy(),
                                  next(iter(w_t.values())).int_repr().numpy())
    ember.save(sd, tmp_path / "q.pt")
    assert list(torch.load(tmp_path / "q.pt", weights_only=True)) == list(tsd)
    fresh = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(
        getattr(ember.nn, name)(*args, **kw)))
    fresh.load_state_dict(ember.load(tmp_path / "q.pt"))
    x = ember.tensor(_rand((3, 6) if "Cell" in name else (4, 3, 6), 8))
    a, b = fresh(x), e_q(x)
    for u, v in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_array_equal(u.numpy(), v.numpy())


def _leaves(out) -> list:  # noqa: ANN001
    return [v for o in out for v in _leaves(o)] if isinstance(out, tuple) else [out]


class _Seq(ember.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = ember.nn.LSTM(8, 16, 2, bidirectional=True, batch_first=True)
        self.gru = ember.nn.GRU(32, 12)
        self.cell = ember.nn.LSTMCell(12, 8)
        self.rnn = ember.nn.RNNCell(8, 6)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        o, (h, c) = self.lstm(x)
        g, _ = self.gru(o.transpose(0, 1))
        hc, _ = self.cell(g[-1])
        return self.rnn(hc) + h.sum(0)[:, :6]


def test_export_quantized_lstm_gru_and_cells_equals_eager(tmp_path) -> None:  # noqa: ANN001
    """``ember.export.export`` of a model with quantized LSTM, GRU and cells: one
    ``qlinear_dynamic`` node per product (the input projections of a sequence once, the
    hidden ones per step), the packed weights lifted as constants named by FQN, and
    ``ep.module()`` (also after save and load) gives eager's bits, for the traced batch size
    and another (dynamic)."""
    ember.manual_seed(0)
    q = ember.ao.quantization.quantize_dynamic(_Seq())
    x = ember.tensor(_rand((3, 5, 8), 9, 2.0))
    ep = ember.export.export(q, (x,), dynamic_shapes=({0: ember.export.Dim("b")},))
    targets = [getattr(n.target, "name", str(n.target)) for n in ep.graph.nodes]
    # LSTM: 2 layers x 2 directions x (1 + 5 steps); GRU: 1 + 5; cells: 2 each
    assert targets.count("qlinear_dynamic") == 4 * 6 + 6 + 2 + 2
    consts = {s.target for s in ep.graph_signature.input_specs if s.kind.name ==
              "CONSTANT_TENSOR"}
    assert "lstm._all_weight_values.3.param._packed_weight_hh._packed_weight" in consts
    assert "cell._packed_weight_ih._packed_colsum" in consts
    ember.export.save(ep, tmp_path / "q.pt2")
    loaded = ember.export.load(tmp_path / "q.pt2")
    for batch in (3, 7):
        xb = ember.tensor(_rand((batch, 5, 8), batch, 2.0))
        np.testing.assert_array_equal(ep.module()(xb).numpy(), q(xb).numpy())
        np.testing.assert_array_equal(loaded.module()(xb).numpy(), q(xb).numpy())


def test_compiled_quantized_lstm_is_one_graph() -> None:
    """Under ``ember.compile(fullgraph=True)`` the quantized LSTM/GRU/cells do not break; the
    compiled float gate kernels round like eager's to float32's last bits."""
    ember.manual_seed(1)
    q = ember.ao.quantization.quantize_dynamic(_Seq())
    x = ember.tensor(_rand((2, 4, 8), 10))
    f = ember.compile(q, fullgraph=True)
    for _ in range(2):
        np.testing.assert_allclose(f(x).numpy(), q(x).numpy(), rtol=0, atol=1e-6)


def test_aot_package_of_quantized_lstm(tmp_path) -> None:  # noqa: ANN001
    """An AOT package of an exported quantized LSTM (dynamic batch) runs without Python's
    kernels and gives the compiled graph's values (float gates to float32's last bits)."""
    ember.manual_seed(2)
    lstm = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(ember.nn.LSTM(8, 16)))

    class Out(ember.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = lstm

        def forward(self, x: ember.Tensor) -> ember.Tensor:
            return self.m(x)[0]

    w = Out()
    ep = ember.export.export(w, (ember.randn(4, 3, 8),),
                             dynamic_shapes=({1: ember.export.Dim("b")},))
    path = ember._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "q.pt2"))
    m = ember._inductor.aoti_load_package(path)
    for b in (3, 6):
        x = ember.tensor(_rand((4, b, 8), b))
        np.testing.assert_allclose(m(x).numpy(), w(x).numpy(), rtol=0, atol=1e-6)


def _f16_zoo(lib) -> object:  # noqa: ANN001
    nn = lib.nn
    return nn.Sequential(nn.Linear(300, 40), nn.LSTM(8, 16, 2, bidirectional=True),
                         nn.GRU(8, 16), nn.LSTMCell(8, 16), nn.GRUCell(8, 16), nn.RNNCell(8, 16))


def test_float16_dynamic_matches_torch() -> None:
    """``dtype=ember.float16``: PyTorch's default set with ``float16_dynamic_qconfig``;
    weights stored as float16 (clamped to +-65504, rounded to nearest even: torch's
    ``weight()`` bits), float32 activations and accumulation, the bias added after."""
    torch.manual_seed(4)
    t = _f16_zoo(torch)
    with torch.no_grad():
        t[0].weight[0, :3] = torch.tensor([1e6, 1.00048828125, 1e-5])   # saturate, tie, sub
    e = _f16_zoo(ember)
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    t_q = tq.quantize_dynamic(t, dtype=torch.float16)
    e_q = ember.ao.quantization.quantize_dynamic(e, dtype=ember.float16)
    assert repr(e_q).replace("ember.", "torch.") == repr(t_q)
    assert e_q[0]._packed_params._weight16.dtype is ember.float16
    np.testing.assert_array_equal(e_q[0].weight().numpy(), t_q[0].weight().numpy())
    x = _rand((5, 300), 11, 2.0)
    np.testing.assert_allclose(e_q[0](ember.tensor(x)).numpy(),
                               t_q[0](torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    xs = _rand((6, 3, 8), 12)
    for i in range(1, 6):
        inp = xs if i < 3 else xs[0]
        a, b = e_q[i](ember.tensor(inp)), t_q[i](torch.from_numpy(inp))
        for u, v in zip(_leaves(a), _leaves(b), strict=True):
            np.testing.assert_allclose(u.numpy(), v.detach().numpy(), rtol=0, atol=1e-6)
    assert list(e_q.state_dict()) == list(t_q.state_dict())


def test_float16_linear_state_dict_both_ways_with_torch(tmp_path) -> None:  # noqa: ANN001
    """The float16 Linear's state dict is torch's (``_packed_params._packed_params`` =
    (float32 weight, bias)): torch loads ember's file and ember loads torch's, same outputs."""
    t, e = _pair("Linear", {}, 64, 10, seed=5)
    t_q = tq.quantize_dynamic(torch.nn.Sequential(t), {torch.nn.Linear}, dtype=torch.float16)
    e_q = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(e), {ember.nn.Linear},
                                                 dtype=ember.float16)
    x = _rand((7, 64), 13)
    ember.save(e_q.state_dict(), tmp_path / "e.pt")
    t2 = tq.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(64, 10)), dtype=torch.float16)
    t2.load_state_dict(torch.load(tmp_path / "e.pt", weights_only=True))
    np.testing.assert_array_equal(t2(torch.from_numpy(x)).detach().numpy(),
                                  t_q(torch.from_numpy(x)).detach().numpy())
    torch.save(t_q.state_dict(), tmp_path / "t.pt")
    e2 = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(ember.nn.Linear(64, 10)),
                                                dtype=ember.float16)
    e2.load_state_dict(ember.load(tmp_path / "t.pt"))
    np.testing.assert_array_equal(e2(ember.tensor(x)).numpy(), e_q(ember.tensor(x)).numpy())


def test_float16_dynamic_exports() -> None:
    """The float16 Linear / LSTM forward is ember ops: it exports, the float16 weights lifted
    as constants by FQN, and ``ep.module()`` gives eager's bits."""
    ember.manual_seed(3)
    m = ember.nn.Sequential(ember.nn.LSTM(8, 16), ember.nn.Linear(16, 4))

    class Net(ember.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = ember.ao.quantization.quantize_dynamic(m, dtype=ember.float16)

        def forward(self, x: ember.Tensor) -> ember.Tensor:
            return self.m[1](self.m[0](x)[0])

    net = Net()
    x = ember.tensor(_rand((5, 2, 8), 14))
    ep = ember.export.export(net, (x,))
    consts = {s.target for s in ep.graph_signature.input_specs if s.kind.name ==
              "CONSTANT_TENSOR"}
    assert "m.1._packed_params._weight16" in consts
    np.testing.assert_array_equal(ep.module()(x).numpy(), net(x).numpy())


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "GRU"])
def test_per_channel_weights_match_torch(name: str) -> None:
    """``per_channel_dynamic_qconfig`` on the recurrent modules: per-row int8 weights, as
    torch quantizes them."""
    t, e = _pair(name, {}, 8, 16, seed=9)
    tqc = {getattr(torch.nn, name): tq.per_channel_dynamic_qconfig}
    eqc = {getattr(ember.nn, name): ember.ao.quantization.per_channel_dynamic_qconfig}
    t_q = tq.quantize_dynamic(torch.nn.Sequential(t), tqc)
    e_q = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(e), eqc)
    w = e_q[0].get_weight()
    assert all(v.qscheme() == "per_channel_affine" for v in w.values())
    x = _rand((5, 8) if "Cell" in name else (4, 5, 8), 15, 2.0)
    for u, v in zip(_leaves(e_q[0](ember.tensor(x))), _leaves(t_q[0](torch.from_numpy(x))),
                    strict=True):
        np.testing.assert_allclose(u.numpy(), v.detach().numpy(), rtol=0, atol=1e-6)


def test_direct_construction_like_torch() -> None:
    """``nnqd.LSTM(4, 3)`` / ``nnqd.GRU(..., dtype=float16)`` / ``nnqd.LSTMCell(4, 3)`` are
    usable modules (torch packs random weights), with torch's ``dtype``/``weight_dtype``."""
    for lib, nnq in ((torch, torch.ao.nn.quantized.dynamic), (ember, nnqd)):
        lstm, gru = nnq.LSTM(4, 3), nnq.GRU(4, 3, 2, dtype=lib.float16)
        cell = nnq.LSTMCell(4, 3)
        out, (h, c) = lstm(lib.zeros(5, 2, 4))
        assert tuple(out.shape) == (5, 2, 3) and tuple(h.shape) == (1, 2, 3)
        assert tuple(gru(lib.zeros(5, 2, 4))[0].shape) == (5, 2, 3)
        assert tuple(cell(lib.zeros(2, 4))[1].shape) == (2, 3)
        assert (lstm.dtype, gru.dtype, cell.weight_dtype) == (lib.qint8, lib.float16, lib.qint8)
        assert [repr(m).replace("ember.", "torch.") for m in (lstm, gru, cell)] == [
            "DynamicQuantizedLSTM(4, 3)", "DynamicQuantizedGRU(4, 3, num_layers=2)",
            "DynamicQuantizedLSTMCell(4, 3)"]
    with pytest.raises(ember.DTypeError, match=r"\[quantized.dynamic.LSTM\]"):
        nnqd.LSTM(4, 3, dtype=ember.int8)
