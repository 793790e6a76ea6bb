"""The LSTM, GRU and plain RNN recurrences as one op each (``lstm_scan``/``gru_scan``/
``rnn_scan`` and their backwards, ember/ops/rnn.py, rnn_gru.py, rnn_plain.py) and their C kernel
(``LstmKernel``, compiler/c/lower/rnn.py): values and gradients against torch's nn.LSTM/GRU/RNN
with copied weights, compiled against eager, and no extern in a compiled training step.

Sizes cover the C kernel's cases: hidden sizes that are not a multiple of the packed panel
width, batches that are not a multiple of the micro-kernel's row block, one and two threads
(each thread owns a range of hidden units), both directions, float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.ops import OPS, bind

torch = pytest.importorskip("torch")

TOL = {"float32": {"rtol": 2e-4, "atol": 2e-5}, "float64": {"rtol": 1e-10, "atol": 1e-12}}


def _pair(inp, hid, layers, bidirectional, dtype, kind="LSTM"):
    ember.manual_seed(0)
    e = getattr(ember.nn, kind)(inp, hid, layers, bidirectional=bidirectional)
    t = getattr(torch.nn, kind)(inp, hid, layers, bidirectional=bidirectional)
    t.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in
                       e.state_dict().items()})
    if dtype == "float64":
        e.double()
        t.double()
    return e, t


def _step(lib, mod, x, h0, c0):
    """One training-step body: forward, a loss over every output, backward; returns the loss,
    the grads of x and c0 and of every parameter."""
    xi = lib.tensor(x, requires_grad=True)
    ci = lib.tensor(c0, requires_grad=True)
    if not isinstance(mod, (ember.nn.LSTM, torch.nn.LSTM)):  # c0 is the initial h here
        out, hn = mod(xi, ci * 1.0)
        cn = hn + lib.tensor(h0)
    else:
        out, (hn, cn) = mod(xi, (lib.tensor(h0), ci))
    loss = (out * out).sum() + (hn * 0.5).sum() + (cn * cn).sum()
    loss.backward()
    return [loss.detach(), xi.grad, ci.grad] + [p.grad for p in mod.parameters()]


def _np(v):
    return v.detach().numpy() if hasattr(v, "detach") else np.asarray(v)


@pytest.fixture
def threads():
    before = ember.get_num_threads()
    yield
    ember.set_num_threads(before)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n_threads,hid,batch,bidirectional", [
    (1, 40, 7, True),      # partial panels (40 = 32 + 8), batch 7 (padded row blocks)
    (1, 33, 20, False),    # batch 20 (two row blocks of 10)
    (2, 160, 7, True),     # two threads, each its own hidden units, both directions
    (2, 130, 3, False),    # two threads, a range ending inside a panel
])
def test_compiled_training_step_matches_torch_without_externs(kind, dtype, n_threads, hid, batch,
                                                              bidirectional, threads):
    ember.set_num_threads(n_threads)
    e, t = _pair(6, hid, 2, bidirectional, dtype, kind)
    d = 2 if bidirectional else 1
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, batch, 6)).astype(dtype)
    h0 = rng.standard_normal((2 * d, batch, hid)).astype(dtype) * 0.5
    c0 = rng.standard_normal((2 * d, batch, hid)).astype(dtype) * 0.5
    want = _step(torch, t, x, h0, c0)
    eager = _step(ember, e, x, h0, c0)
    e.zero_grad(set_to_none=True)
    ember.compiler.reset()
    cbackend._RECENT.clear()
    got = ember.compile(lambda a, b, c: _step(ember, e, a, b, c), backend="c")(x, h0, c0)
    graphs = list(cbackend._RECENT)
    assert graphs, "nothing was compiled"
    kinds = [type(k).__name__ for g in graphs for k in g.program.kernels()]
    assert kinds.count("LstmKernel") == 4 * d, kinds     # forward and backward per direction
    for g in graphs:
        assert g.stats.externs == 0 and g.stats.fallbacks == [], g.stats.fallbacks
    for a, b, c in zip(got, eager, want):
        np.testing.assert_allclose(_np(a), _np(c), **TOL[dtype])
        np.testing.assert_allclose(_np(a), _np(b), **TOL[dtype])


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_scan_op_against_a_step_loop(reverse):
    """The op's five outputs (out, h_n, c_n, activated gates, cell states) against a NumPy
    step loop written from PyTorch's LSTM equations (gate order i, f, g, o)."""
    rng = np.random.default_rng(2)
    t_n, b, h = 4, 3, 5
    xw = rng.standard_normal((t_n, b, 4 * h))
    h0, c0 = rng.standard_normal((b, h)), rng.standard_normal((b, h))
    w = rng.standard_normal((4 * h, h)) * 0.3
    outs = bind(OPS.lstm_scan, *(ember.tensor(v) for v in (xw, h0, c0, w)), reverse=reverse)

    def sig(v):
        return 1 / (1 + np.exp(-v))

    hh, cc = h0, c0
    want = np.zeros((t_n, b, h))
    acts, cs = np.zeros((t_n, b, 4 * h)), np.zeros((t_n, b, h))
    for s in (range(t_n - 1, -1, -1) if reverse else range(t_n)):
        z = xw[s] + hh @ w.T
        i, f, o = sig(z[:, :h]), sig(z[:, h:2 * h]), sig(z[:, 3 * h:])
        g = np.tanh(z[:, 2 * h:3 * h])
        cc = f * cc + i * g
        hh = o * np.tanh(cc)
        want[s], cs[s] = hh, cc
        acts[s] = np.concatenate([i, f, g, o], 1)
    for got, ref in zip(outs, (want, hh, cc, acts, cs)):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-12)


def test_compiled_lstm_op_equals_eager_with_strided_operands():
    """A bidirectional output's gradient reaches the backward kernel as a strided slice; the
    initial state as a transposed view: C reads both through their strides."""
    rng = np.random.default_rng(3)
    t_n, b, h = 6, 4, 24
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((t_n, b, 4 * h), (h, b), (b, h), (4 * h, h), (t_n, b, 2 * h))]

    def fn(xw, h0t, c0, w, g):
        out, hn, cn, acts, cs = bind(OPS.lstm_scan, xw, h0t.t(), c0, w, reverse=True)
        d = bind(OPS.lstm_scan_backward, g[:, :, :h], hn * 0, cn, acts, cs, c0, w,
                 reverse=True)
        return (out, hn, cn) + tuple(d)

    ts = [ember.tensor(a) for a in args]
    want = fn(*ts)
    ember.compiler.reset()
    cbackend._RECENT.clear()
    got = ember.compile(fn, backend="c", fullgraph=True)(*ts)
    assert cbackend._RECENT[-1].stats.externs == 0
    for a, b_ in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b_.numpy(), rtol=1e-5, atol=1e-5)


def test_lstm_scan_bad_input_names_the_op():
    x = ember.zeros(3, 2, 8)
    with pytest.raises(ember.errors.ShapeError, match=r"\[lstm_scan\]"):
        bind(OPS.lstm_scan, x, ember.zeros(2, 3), ember.zeros(2, 3), ember.zeros(8, 3),
             reverse=False)
    with pytest.raises(ember.errors.DTypeError, match=r"\[lstm_scan\]"):
        bind(OPS.lstm_scan, x, ember.zeros(2, 2), ember.zeros(2, 2, dtype=ember.float64),
             ember.zeros(8, 2), reverse=False)


@pytest.mark.parametrize("march", ["x86-64-v3", "x86-64"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_other_instruction_sets_match_eager(monkeypatch, march, kind, threads):
    """The packed-product path for AVX2 machines (x86-64-v3: 8-wide vectors, 4/6-row blocks)
    and the BLAS-per-step path (x86-64: no AVX), built explicitly for that level whatever the
    host is, against eager."""
    from ember.compiler.c.build.toolchain import host_can_run

    if not host_can_run(march):
        pytest.skip(f"the host cannot run {march} code")
    monkeypatch.setattr(cbackend, "EXTRA_FLAGS", cbackend.EXTRA_FLAGS + (f"-march={march}",
                                                                         "-mno-avx512f"))
    ember.set_num_threads(2)
    e, _ = _pair(5, 150, 1, True, "float32", kind)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 9, 5)).astype(np.float32)
    h0 = rng.standard_normal((2, 9, 150)).astype(np.float32) * 0.5
    eager = _step(ember, e, x, h0, h0)
    e.zero_grad(set_to_none=True)
    ember.compiler.reset()
    cbackend._RECENT.clear()
    got = ember.compile(lambda a, b, c: _step(ember, e, a, b, c), backend="c")(x, h0, h0)
    assert all(g.stats.externs == 0 for g in cbackend._RECENT)
    for a, b in zip(got, eager):
        np.testing.assert_allclose(_np(a), _np(b), **TOL["float32"])
