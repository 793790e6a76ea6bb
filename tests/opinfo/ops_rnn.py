"""OpInfo entries for the recurrence ops (``lstm_scan``, ``gru_scan``, ``rnn_scan`` and their
backwards), reached through PyTorch's ``torch._VF.lstm``/``gru``/``rnn_tanh``/``rnn_relu``
(ember: ``ember.nn.modules._rnn_loop.vf_lstm``/``vf_gru``/``vf_rnn``)."""

from __future__ import annotations

from tests.opinfo.core import OpInfo, Sample, make


def _lstm(t, x, h0, c0, *params, layers=1, bidirectional=False, batch_first=False):
    if t.__name__ == "torch":
        fn = t._VF.lstm
    else:
        from ember.nn.modules._rnn_loop import vf_lstm as fn
    out, h, c = fn(x, (h0, c0), list(params), True, layers, 0.0, False, bidirectional,
                   batch_first)
    return out, h, c


def _gru(t, x, h0, *params, layers=1, bidirectional=False, batch_first=False):
    if t.__name__ == "torch":
        fn = t._VF.gru
    else:
        from ember.nn.modules._rnn_loop import vf_gru as fn
    out, h = fn(x, h0, list(params), True, layers, 0.0, False, bidirectional, batch_first)
    return out, h


def _gru_samples(dtype, rng):
    for s in _samples(dtype, rng, gates=3):
        x, h0, _, *params = s.args
        yield Sample((x, h0, *params), s.kwargs, desc=s.desc)


def _rnn(t, x, h0, *params, layers=1, bidirectional=False, batch_first=False, relu=False):
    if t.__name__ == "torch":
        fn = t._VF.rnn_relu if relu else t._VF.rnn_tanh
        return fn(x, h0, list(params), True, layers, 0.0, False, bidirectional, batch_first)
    from ember.nn.modules._rnn_loop import vf_rnn
    return vf_rnn(x, h0, list(params), True, layers, 0.0, False, bidirectional, batch_first,
                  "relu" if relu else "tanh")


def _rnn_samples(dtype, rng):
    for s in _samples(dtype, rng, gates=1):
        x, h0, _, *params = s.args
        yield Sample((x, h0, *params), s.kwargs, desc=s.desc)
        if s.desc == "bidirectional (reverse direction)":
            yield Sample((x, h0, *params), dict(s.kwargs, relu=True), desc=s.desc + ", relu")
    x, h0, _, *params = next(iter(_samples(dtype, rng, gates=1))).args
    yield Sample((x, h0, *params), {"relu": True, "layers": 1}, desc="relu")


def _samples(dtype, rng, gates=4):
    def r(*s, **kw):
        return make(s, dtype, rng, -1.0, 1.0, **kw)

    def weights(i, h, layers, dirs):
        out = []
        for layer in range(layers):
            for _ in range(dirs):
                inp = i if layer == 0 else h * dirs
                out += [r(gates * h, inp), r(gates * h, h), r(gates * h), r(gates * h)]
        return out

    t, b, i, h = 4, 3, 3, 3  # small enough (<= 64 elements each) for the gradcheck
    yield Sample((r(t, b, i), r(1, b, h), r(1, b, h), *weights(i, h, 1, 1)),
                 desc="one layer")
    yield Sample((r(t, b, i), r(2, b, h), r(2, b, h), *weights(i, h, 1, 2)),
                 {"bidirectional": True}, desc="bidirectional (reverse direction)")
    yield Sample((r(t, b, i), r(2, b, h), r(2, b, h), *weights(i, h, 2, 1)), {"layers": 2},
                 desc="two layers")
    yield Sample((r(b, t, i), r(1, b, h), r(1, b, h), *weights(i, h, 1, 1)),
                 {"batch_first": True}, desc="batch_first")
    yield Sample((r(t, b, i), r(1, b, h, noncontig=True), r(1, b, h, noncontig=True),
                  *weights(i, h, 1, 1)), desc="strided initial state")
    yield Sample((r(1, 1, i), r(1, 1, h), r(1, 1, h), *weights(i, h, 1, 1)),
                 desc="one step, batch 1")


OPINFOS = [
    OpInfo("lstm", _lstm, _samples),
    OpInfo("gru", _gru, _gru_samples),
    OpInfo("rnn", _rnn, _rnn_samples),
]
