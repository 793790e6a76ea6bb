"""OpInfo entry for ``qlinear_dynamic`` (ember/ops/qlinear.py), reached through the dynamic
quantized Linear module of both libraries (``torch.ao.nn.quantized.dynamic.Linear``, PyTorch's
``quantized::linear_dynamic`` with fbgemm): the same weights give the same int8 codes, the same
input scale and the same output bits."""

from __future__ import annotations

import warnings

from tests.opinfo.core import OpInfo, Sample, make


def _qlinear(t, x, w, b, per_channel=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # torch.ao.quantization's deprecation notices
        lin = t.nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
        with t.no_grad():
            lin.weight.copy_(w)
            if b is not None:
                lin.bias.copy_(b)
        if t.__name__ == "torch":
            import torch.ao.quantization as tq
            spec = {t.nn.Linear: tq.per_channel_dynamic_qconfig} if per_channel else {t.nn.Linear}
            q = tq.quantize_dynamic(t.nn.Sequential(lin), spec, dtype=t.qint8)
        else:
            import ember.ao.quantization as eq
            spec = {t.nn.Linear: eq.per_channel_dynamic_qconfig} if per_channel else {t.nn.Linear}
            q = eq.quantize_dynamic(t.nn.Sequential(lin), spec, dtype=t.qint8)
        with t.no_grad():
            return q(x)


def _samples(dtype, rng):
    def r(*s, **kw):
        return make(s, dtype, rng, -1.0, 1.0, **kw)

    yield Sample((r(5, 12), r(7, 12), r(7)), desc="2-D input")
    yield Sample((r(2, 3, 40), r(50, 40), None), desc="3-D input, no bias")
    yield Sample((r(4, 9), r(3, 9), r(3)), {"per_channel": True}, desc="per-channel weights")
    yield Sample((r(6, 20, noncontig=True), r(8, 20), r(8)), desc="strided input")


OPINFOS = [
    OpInfo("quantized_linear_dynamic", _qlinear, _samples, dtypes=("float32",), grad=False,
           tols={"float32": (0.0, 0.0)}),
]
