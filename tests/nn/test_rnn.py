"""nn.RNN / LSTM / GRU and their cells against torch.nn with identical weights (torch's state
dict copied through NumPy): outputs, final states, gradients of inputs, initial states and every
parameter; packed sequences, dropout, errors, reprs, state-dict layout."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.nn.modules.rnn as ember_rnn
from tests.nn._layer_utils import load_from_torch, to_np

torch = pytest.importorskip("torch")
tnn = torch.nn

SEQ, BATCH, IN, HID = 4, 3, 5, 6
TOLS = {"float64": dict(rtol=1e-10, atol=1e-11), "float32": dict(rtol=2e-5, atol=2e-6)}
KINDS = {  # name -> (ember class, torch class, extra constructor kwargs)
    "rnn_tanh": ("RNN", {}),
    "rnn_relu": ("RNN", {"nonlinearity": "relu"}),
    "lstm": ("LSTM", {}),
    "gru": ("GRU", {}),
}


def rand(*shape, seed=0, dtype="float64"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def make_pair(kind, dtype="float64", **kwargs):
    cls, extra = KINDS[kind]
    kwargs = {**extra, **kwargs}
    t = getattr(tnn, cls)(IN, HID, dtype=getattr(torch, dtype), **kwargs)
    e = getattr(ember.nn, cls)(IN, HID, dtype=getattr(ember, dtype), **kwargs)
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    load_from_torch(e, t)
    return e, t


def states(kind, hx):
    """Final states as a tuple (LSTM: (h, c); others: (h,))."""
    return tuple(hx) if kind == "lstm" else (hx,)


def as_lib(arrays, lib, grad=True):
    return [lib.tensor(a, requires_grad=grad) for a in arrays]


def backward_both(e_outs, t_outs, seed=7):
    """Backward of sum(out_i * g_i) over every output, the same random g_i in both."""
    rng = np.random.default_rng(seed)
    e_loss, t_loss = 0, 0
    for eo, to in zip(e_outs, t_outs):
        g = rng.standard_normal(tuple(to.shape)).astype(to_np(to).dtype)
        e_loss = e_loss + (eo * ember.tensor(g)).sum()
        t_loss = t_loss + (to * torch.tensor(g)).sum()
    e_loss.backward()
    t_loss.backward()


def assert_grads(e_mod, t_mod, e_in, t_in, tol):
    for a, b in zip(e_in, t_in):
        np.testing.assert_allclose(to_np(a.grad), to_np(b.grad), **tol)
    tp = dict(t_mod.named_parameters())
    for name, p in e_mod.named_parameters():
        assert p.grad is not None, name
        np.testing.assert_allclose(to_np(p.grad), to_np(tp[name].grad), err_msg=name, **tol)


def state_inputs(kind, e_mod, batch, dtype, seed=3):
    n = e_mod.num_layers * (2 if e_mod.bidirectional else 1)
    h_size = e_mod.proj_size or HID
    arrays = [rand(n, batch, h_size, seed=seed, dtype=dtype)]
    if kind == "lstm":
        arrays.append(rand(n, batch, HID, seed=seed + 1, dtype=dtype))
    return arrays


def run_and_compare(kind, e, t, x, dtype, with_h0, unbatched=False):
    arrays = [x]
    if with_h0:
        hs = state_inputs(kind, e, BATCH, dtype)
        arrays += [h[:, 0] for h in hs] if unbatched else hs
    e_in, t_in = as_lib(arrays, ember), as_lib(arrays, torch)
    e_hx = t_hx = None
    if with_h0:
        e_hx = tuple(e_in[1:]) if kind == "lstm" else e_in[1]
        t_hx = tuple(t_in[1:]) if kind == "lstm" else t_in[1]
    e_out, e_h = e(e_in[0], e_hx)
    t_out, t_h = t(t_in[0], t_hx)
    tol = TOLS[dtype]
    e_all, t_all = (e_out, *states(kind, e_h)), (t_out, *states(kind, t_h))
    for a, b in zip(e_all, t_all):
        assert tuple(a.shape) == tuple(b.shape)
        assert a.dtype == getattr(ember, dtype)
        np.testing.assert_allclose(to_np(a), to_np(b), **tol)
    backward_both(e_all, t_all)
    assert_grads(e, t, e_in, t_in, tol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["no_h0", "h0"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("kind", list(KINDS))
def test_matches_torch(kind, num_layers, bidirectional, batch_first, with_h0, dtype):
    e, t = make_pair(kind, dtype, num_layers=num_layers, bidirectional=bidirectional,
                     batch_first=batch_first)
    shape = (BATCH, SEQ, IN) if batch_first else (SEQ, BATCH, IN)
    run_and_compare(kind, e, t, rand(*shape, dtype=dtype), dtype, with_h0)


@pytest.mark.parametrize("with_h0", [False, True], ids=["no_h0", "h0"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_unbatched_input(kind, batch_first, with_h0):
    e, t = make_pair(kind, num_layers=2, bidirectional=True, batch_first=batch_first)
    run_and_compare(kind, e, t, rand(SEQ, IN), "float64", with_h0, unbatched=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["no_h0", "h0"])
def test_lstm_proj_size(with_h0, bidirectional, dtype):
    e, t = make_pair("lstm", dtype, num_layers=2, bidirectional=bidirectional, proj_size=4,
                     batch_first=True)
    assert tuple(e.weight_hr_l0.shape) == (4, HID)
    assert tuple(e.weight_hh_l1.shape) == (4 * HID, 4)
    run_and_compare("lstm", e, t, rand(BATCH, SEQ, IN, dtype=dtype), dtype, with_h0)


@pytest.mark.parametrize("kind", list(KINDS))
def test_no_bias(kind):
    e, t = make_pair(kind, num_layers=2, bias=False, bidirectional=True)
    assert "bias_ih_l0" not in dict(e.named_parameters())
    run_and_compare(kind, e, t, rand(SEQ, BATCH, IN), "float64", True)


# ------------------------------------------------------------------------- packed sequences
LENGTHS = [3, 5, 1, 4]


def packed_pair(x, lengths, batch_first):
    from torch.nn.utils import rnn as trnn

    from ember.nn.utils import rnn as ernn
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ep = ernn.pack_padded_sequence(ex, lengths, batch_first=batch_first, enforce_sorted=False)
    tp = trnn.pack_padded_sequence(tx, lengths, batch_first=batch_first, enforce_sorted=False)
    return ex, tx, ep, tp


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["no_h0", "h0"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_packed_variable_lengths(kind, bidirectional, with_h0, batch_first):
    from torch.nn.utils import rnn as trnn

    from ember.nn.utils import rnn as ernn
    e, t = make_pair(kind, num_layers=2, bidirectional=bidirectional, batch_first=batch_first)
    b, steps = len(LENGTHS), max(LENGTHS)
    x = rand(*((b, steps, IN) if batch_first else (steps, b, IN)))
    ex, tx, ep, tp = packed_pair(x, LENGTHS, batch_first)
    e_in, t_in = [ex], [tx]
    e_hx = t_hx = None
    if with_h0:
        hs = state_inputs(kind, e, b, "float64")
        e_in += as_lib(hs, ember)
        t_in += as_lib(hs, torch)
        e_hx = tuple(e_in[1:]) if kind == "lstm" else e_in[1]
        t_hx = tuple(t_in[1:]) if kind == "lstm" else t_in[1]
    e_out, e_h = e(ep, e_hx)
    t_out, t_h = t(tp, t_hx)
    assert isinstance(e_out, ernn.PackedSequence)
    np.testing.assert_array_equal(to_np(e_out.batch_sizes), to_np(t_out.batch_sizes))
    np.testing.assert_array_equal(to_np(e_out.unsorted_indices), to_np(t_out.unsorted_indices))
    e_pad, e_len = ernn.pad_packed_sequence(e_out, batch_first=batch_first)
    t_pad, t_len = trnn.pad_packed_sequence(t_out, batch_first=batch_first)
    np.testing.assert_array_equal(to_np(e_len), to_np(t_len))
    e_all, t_all = (e_pad, *states(kind, e_h)), (t_pad, *states(kind, t_h))
    for a, c in zip(e_all, t_all):
        np.testing.assert_allclose(to_np(a), to_np(c), **TOLS["float64"])
    backward_both(e_all, t_all)
    assert_grads(e, t, e_in, t_in, TOLS["float64"])


def test_packed_sorted_input_and_pack_sequence():
    from torch.nn.utils import rnn as trnn

    from ember.nn.utils import rnn as ernn
    e, t = make_pair("lstm", num_layers=2)
    seqs = [rand(n, IN, seed=n) for n in (5, 3, 3, 1)]
    ep = ernn.pack_sequence([ember.tensor(s) for s in seqs])
    tp = trnn.pack_sequence([torch.tensor(s) for s in seqs])
    assert ep.sorted_indices is None and ep.unsorted_indices is None
    (eo, (eh, ec)), (to, (th, tc)) = e(ep), t(tp)
    for a, b in ((eo.data, to.data), (eh, th), (ec, tc)):
        np.testing.assert_allclose(to_np(a), to_np(b), **TOLS["float64"])


# ------------------------------------------------------------------------- dropout
@pytest.mark.parametrize("kind", list(KINDS))
def test_dropout_eval_equals_torch(kind):
    e, t = make_pair(kind, num_layers=3, dropout=0.5, bidirectional=True)
    e.eval()
    t.eval()
    run_and_compare(kind, e, t, rand(SEQ, BATCH, IN), "float64", True)


@pytest.mark.parametrize("kind", list(KINDS))
def test_dropout_one_in_training_zeroes_between_layers(kind):
    # p=1 drops every element deterministically in both libraries: layer 2 sees zeros
    e, t = make_pair(kind, num_layers=2, dropout=1.0)
    run_and_compare(kind, e, t, rand(SEQ, BATCH, IN), "float64", True)


def test_dropout_training_is_random_between_layers_only():
    e, _ = make_pair("lstm", num_layers=2, dropout=0.5)
    x = ember.tensor(rand(SEQ, BATCH, IN))
    ember.manual_seed(0)
    a, _ = e(x)
    b, _ = e(x)
    e.eval()
    c, _ = e(x)
    assert not np.allclose(to_np(a), to_np(b))
    assert not np.allclose(to_np(a), to_np(c))
    one, _ = make_pair("lstm", num_layers=1)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        single = ember.nn.LSTM(IN, HID, 1, dropout=0.5, dtype=ember.float64)
    single.load_state_dict(one.state_dict())
    np.testing.assert_array_equal(to_np(single(x)[0]), to_np(one(x)[0]))


# ------------------------------------------------------------------------- cells
CELLS = {"rnn_tanh": ("RNNCell", {}), "rnn_relu": ("RNNCell", {"nonlinearity": "relu"}),
         "lstm": ("LSTMCell", {}), "gru": ("GRUCell", {})}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("with_hx", [False, True], ids=["no_hx", "hx"])
@pytest.mark.parametrize("kind", list(CELLS))
def test_cells_match_torch(kind, with_hx, batched, bias, dtype):
    cls, extra = CELLS[kind]
    t = getattr(tnn, cls)(IN, HID, bias=bias, dtype=getattr(torch, dtype), **extra)
    e = getattr(ember.nn, cls)(IN, HID, bias=bias, dtype=getattr(ember, dtype), **extra)
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert repr(e) == repr(t)
    load_from_torch(e, t)
    lead = (BATCH,) if batched else ()
    arrays = [rand(*lead, IN, dtype=dtype)]
    if with_hx:
        arrays += [rand(*lead, HID, seed=s, dtype=dtype)
                   for s in ((1, 2) if kind == "lstm" else (1,))]
    e_in, t_in = as_lib(arrays, ember), as_lib(arrays, torch)
    e_hx = (tuple(e_in[1:]) if kind == "lstm" else e_in[1]) if with_hx else None
    t_hx = (tuple(t_in[1:]) if kind == "lstm" else t_in[1]) if with_hx else None
    e_out, t_out = e(e_in[0], e_hx), t(t_in[0], t_hx)
    e_all = e_out if kind == "lstm" else (e_out,)
    t_all = t_out if kind == "lstm" else (t_out,)
    for a, b in zip(e_all, t_all):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(to_np(a), to_np(b), **TOLS[dtype])
    backward_both(e_all, t_all)
    assert_grads(e, t, e_in, t_in, TOLS[dtype])


def test_cell_loop_equals_layer():
    """An LSTMCell stepped over time gives nn.LSTM's output (same weights)."""
    cell = ember.nn.LSTMCell(IN, HID, dtype=ember.float64)
    lstm = ember.nn.LSTM(IN, HID, dtype=ember.float64)
    with ember.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).copy_(getattr(lstm, name + "_l0"))
    x = ember.tensor(rand(SEQ, BATCH, IN))
    out, (hn, cn) = lstm(x)
    h = c = ember.zeros(BATCH, HID, dtype=ember.float64)
    for step in range(SEQ):
        h, c = cell(x[step], (h, c))
        np.testing.assert_allclose(to_np(h), to_np(out[step]), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(to_np(c), to_np(cn[0]), rtol=1e-12, atol=1e-13)


# ------------------------------------------------------------------------- layout, init, repr
@pytest.mark.parametrize("kwargs", [{}, {"num_layers": 2, "bidirectional": True},
                                    {"num_layers": 3, "proj_size": 2, "bias": False},
                                    {"num_layers": 2, "proj_size": 3, "bidirectional": True,
                                     "batch_first": True, "dropout": 0.25}])
def test_layout_matches_torch(kwargs):
    t, e = tnn.LSTM(IN, HID, **kwargs), ember.nn.LSTM(IN, HID, **kwargs)
    assert repr(e) == repr(t)
    assert e._flat_weights_names == t._flat_weights_names
    assert [[tuple(p.shape) for p in ws] for ws in e.all_weights] == \
        [[tuple(p.shape) for p in ws] for ws in t.all_weights]
    assert {k: tuple(v.shape) for k, v in e.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in t.state_dict().items()}
    assert all(a is b for a, b in zip(e._flat_weights, e.parameters()))
    for name in ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                 "bidirectional", "proj_size", "mode"):
        assert getattr(e, name) == getattr(t, name), name
    assert e.flatten_parameters() is None


@pytest.mark.parametrize("kind", ["rnn_tanh", "rnn_relu", "gru"])
def test_reprs_and_modes(kind):
    cls, extra = KINDS[kind]
    args = (IN, HID, 2)
    t = getattr(tnn, cls)(*args, batch_first=True, bidirectional=True, **extra)
    e = getattr(ember.nn, cls)(*args, batch_first=True, bidirectional=True, **extra)
    assert repr(e) == repr(t)
    assert e.mode == t.mode
    if cls == "RNN":  # nonlinearity also works positionally, as in PyTorch
        assert ember.nn.RNN(IN, HID, 1, "relu").mode == tnn.RNN(IN, HID, 1, "relu").mode


def test_init_bounds_and_class_paths():
    e = ember.nn.GRU(4, 16, 2, bidirectional=True)
    for p in e.parameters():
        v = to_np(p)
        assert np.abs(v).max() <= 0.25 and np.abs(v).max() > 0.2 and v.std() > 0.1
    assert ember_rnn.LSTM is ember.nn.LSTM and ember.nn.modules.rnn.GRU is ember.nn.GRU
    assert isinstance(ember.nn.LSTM(2, 3), ember.nn.RNNBase)
    assert isinstance(ember.nn.GRUCell(2, 3), ember.nn.RNNCellBase)


def test_state_dict_from_torch_runs_identically():
    torch.manual_seed(0)
    t = tnn.LSTM(IN, HID, num_layers=2, bidirectional=True, proj_size=3).double()
    e = ember.nn.LSTM(IN, HID, num_layers=2, bidirectional=True, proj_size=3,
                      dtype=ember.float64)
    sd = {k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()}
    result = e.load_state_dict(sd, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    x = rand(SEQ, BATCH, IN)
    (eo, (eh, ec)), (to, (th, tc)) = e(ember.tensor(x)), t(torch.tensor(x))
    for a, b in ((eo, to), (eh, th), (ec, tc)):
        np.testing.assert_allclose(to_np(a), to_np(b), **TOLS["float64"])
    # and back: ember's state dict loads into torch
    t2 = tnn.LSTM(IN, HID, num_layers=2, bidirectional=True, proj_size=3).double()
    t2.load_state_dict({k: torch.tensor(to_np(v)) for k, v in e.state_dict().items()})
    np.testing.assert_allclose(to_np(t2(torch.tensor(x))[0]), to_np(to), rtol=0, atol=0)


# ------------------------------------------------------------------------- errors
def outcome(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - comparing error types with torch's
            return exc
    return None


def assert_same_error(e_fn, t_fn):
    e_exc, t_exc = outcome(e_fn), outcome(t_fn)
    assert t_exc is not None, "torch accepted it"
    assert e_exc is not None, f"ember accepted it; torch raised {t_exc!r}"
    assert isinstance(e_exc, type(t_exc)), (e_exc, t_exc)
    assert isinstance(e_exc, ember.errors.EmberError), e_exc
    assert str(e_exc).startswith("["), e_exc
    t_msg = str(t_exc).replace("torch.", "ember.")
    assert t_msg in str(e_exc), (str(e_exc), t_msg)


CTOR_CASES = [
    ("LSTM", (IN, HID), {"dropout": 1.5}),
    ("LSTM", (IN, HID), {"dropout": True}),
    ("LSTM", (IN, HID), {"bias": 1}),
    ("LSTM", (IN, HID), {"batch_first": None}),
    ("LSTM", (IN, 0), {}),
    ("LSTM", (2.0, HID), {}),
    ("LSTM", (IN, HID), {"num_layers": 0}),
    ("LSTM", (IN, HID), {"proj_size": HID}),
    ("LSTM", (IN, HID), {"proj_size": -1}),
    ("GRU", (IN, HID), {"proj_size": 2}),
    ("RNN", (IN, HID), {"nonlinearity": "gelu"}),
]


@pytest.mark.parametrize("cls,args,kwargs", CTOR_CASES)
def test_constructor_errors(cls, args, kwargs):
    assert_same_error(lambda: getattr(ember.nn, cls)(*args, **kwargs),
                      lambda: getattr(tnn, cls)(*args, **kwargs))


def forward_cases():
    x3, x4 = rand(SEQ, BATCH, IN), rand(SEQ, BATCH, IN, 1)
    bad_in, h_ok = rand(SEQ, BATCH, IN + 2), rand(2, BATCH, HID)
    return [
        ("LSTM", (x4,)), ("GRU", (x4,)), ("RNN", (x4,)),
        ("LSTM", (bad_in,)), ("GRU", (bad_in,)), ("RNN", (bad_in,)),
        ("LSTM", (x3.astype("float32"),)),
        ("GRU", (x3, rand(1, BATCH, HID))), ("RNN", (x3, rand(2, BATCH + 1, HID))),
        ("LSTM", (x3, (rand(1, BATCH, HID), h_ok))), ("LSTM", (x3, (h_ok, rand(2, BATCH, 2)))),
        ("LSTM", (x3, (h_ok[0], h_ok[0]))), ("GRU", (x3, h_ok[0])),
        ("RNN", (x3[:, 0], h_ok)), ("LSTM", (x3[:, 0], (h_ok, h_ok))),
    ]


@pytest.mark.parametrize("case", range(len(forward_cases())))
def test_forward_errors(case):
    cls, args = forward_cases()[case]
    e = getattr(ember.nn, cls)(IN, HID, 2, dtype=ember.float64)
    t = getattr(tnn, cls)(IN, HID, 2, dtype=torch.float64)

    def conv(lib, a):
        return tuple(conv(lib, v) for v in a) if isinstance(a, tuple) else lib.tensor(a)
    assert_same_error(lambda: e(*conv(ember, args)), lambda: t(*conv(torch, args)))


@pytest.mark.parametrize("cls,inp,hx", [
    ("LSTMCell", (BATCH, IN + 1), None),
    ("LSTMCell", (BATCH, IN), ((BATCH + 1, HID), (BATCH, HID))),
    ("LSTMCell", (BATCH, IN), ((BATCH, HID), (BATCH, HID + 1))),
    ("LSTMCell", (BATCH, IN, 1), None),
    ("LSTMCell", (BATCH, IN), ((BATCH, HID, 1), (BATCH, HID))),
    ("GRUCell", (BATCH, IN), (BATCH, HID + 2)),
    ("GRUCell", (BATCH, IN), (BATCH, HID, 1)),
    ("RNNCell", (BATCH, IN), (BATCH + 2, HID)),
    ("RNNCell", (1, 1, 1, IN), None),
])
def test_cell_errors(cls, inp, hx):
    e = getattr(ember.nn, cls)(IN, HID, dtype=ember.float64)
    t = getattr(tnn, cls)(IN, HID, dtype=torch.float64)

    def args(lib):
        h = None
        if hx is not None:
            h = (tuple(lib.tensor(rand(*s)) for s in hx) if isinstance(hx[0], tuple)
                 else lib.tensor(rand(*hx)))
        return lib.tensor(rand(*inp)), h
    assert_same_error(lambda: e(*args(ember)), lambda: t(*args(torch)))


def test_unknown_cell_nonlinearity():
    e, t = ember.nn.RNNCell(IN, HID, nonlinearity="x"), tnn.RNNCell(IN, HID, nonlinearity="x")
    assert_same_error(lambda: e(ember.randn(2, IN)), lambda: t(torch.randn(2, IN)))


# ------------------------------------------------------------------------- misc behaviour
def test_parameter_replacement_is_seen():
    """Assigning a new Parameter is used by the next forward (``_flat_weights`` is live)."""
    e = ember.nn.RNN(IN, HID, dtype=ember.float64)
    e.weight_hh_l0 = ember.nn.Parameter(ember.zeros(HID, HID, dtype=ember.float64))
    x = ember.tensor(rand(SEQ, BATCH, IN))
    out, _ = e(x)
    ref = (x @ e.weight_ih_l0.T + e.bias_ih_l0 + e.bias_hh_l0).tanh()
    np.testing.assert_allclose(to_np(out), to_np(ref), rtol=1e-12, atol=1e-13)
    assert e._flat_weights[1] is e.weight_hh_l0



@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_double_backward_matches_torch(kind):
    e, t = make_pair(kind, num_layers=2, bidirectional=True)
    x = rand(SEQ, BATCH, IN)
    results = []
    for lib, mod in ((ember, e), (torch, t)):
        xi = lib.tensor(x, requires_grad=True)
        out, _ = mod(xi)
        (gx,) = lib.autograd.grad((out ** 2).sum(), [xi], create_graph=True)
        w = mod.weight_hh_l0
        (gw,) = lib.autograd.grad((gx ** 2).sum(), [w])
        results.append((gx, gw))
    for a, b in zip(*results):
        np.testing.assert_allclose(to_np(a), to_np(b), **TOLS["float64"])


def test_deepcopy_pickle_and_dtype_conversion():
    import copy
    import pickle
    m = ember.nn.LSTM(IN, HID, 2, bidirectional=True)
    x = ember.tensor(rand(SEQ, BATCH, IN, dtype="float32"))
    want = to_np(m(x)[0])
    for other in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        np.testing.assert_array_equal(to_np(other(x)[0]), want)
        assert other._flat_weights[0] is other.weight_ih_l0
    m.double()
    assert m(x.double())[0].dtype == ember.float64


def test_lstm_frozen_recurrent_weight_and_partial_state_grads():
    """lstm_scan's vjp with some inputs not needing gradients (frozen W_hh, h0 constant)."""
    e, t = make_pair("lstm", num_layers=2, bidirectional=True)
    for mod in (e, t):
        mod.weight_hh_l0.requires_grad_(False)
        mod.weight_hh_l1_reverse.requires_grad_(False)
    h0, c0 = state_inputs("lstm", e, BATCH, "float64")
    x = rand(SEQ, BATCH, IN)
    grads = []
    for lib, mod in ((ember, e), (torch, t)):
        c = lib.tensor(c0, requires_grad=True)
        out, (hn, cn) = mod(lib.tensor(x), (lib.tensor(h0), c))
        ((out ** 2).sum() + (cn * hn).sum()).backward()
        grads.append([c.grad] + [p.grad for p in mod.parameters()])
    for a, b in zip(*grads):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(to_np(a), to_np(b), **TOLS["float64"])


def test_lstm_under_no_grad_and_compiled_inference():
    e, t = make_pair("lstm", num_layers=2, bidirectional=True, batch_first=True)
    x = rand(BATCH, SEQ, IN)
    with ember.no_grad():
        out, (hn, _) = e(ember.tensor(x))
    assert out.grad_fn is None and not out.requires_grad
    np.testing.assert_allclose(to_np(out), to_np(t(torch.tensor(x))[0]), **TOLS["float64"])
    compiled = ember.compile(lambda v: e(v)[0])
    np.testing.assert_allclose(to_np(compiled(ember.tensor(x))), to_np(out), rtol=1e-12,
                               atol=1e-13)
