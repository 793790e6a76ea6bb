"""OpInfo entries for lgamma, digamma, polygamma(1, .) (ember/ops/special_gamma.py)."""

from __future__ import annotations

from tests.opinfo.core import OpInfo, Sample, make

DTYPES = ("float32", "float64")


def _samples(dtype, rng):
    yield Sample((make((4, 5), dtype, rng, low=0.2, high=8.0),), desc="positive")
    yield Sample((make((7,), dtype, rng, low=-4.8, high=-0.2, exclude_zero=True) + 0.0,),
                 desc="negative (off the poles)")
    yield Sample((make((3,), dtype, rng, low=20.0, high=200.0),), desc="large")


def _trigamma_samples(dtype, rng):
    for s in _samples(dtype, rng):
        yield Sample(s.args, desc=s.desc, grad=False)


OPINFOS = [
    OpInfo("lgamma", lambda t, a: t.lgamma(a), _samples, dtypes=DTYPES,
           tols={"float32": (1e-5, 1e-5)}),
    OpInfo("digamma", lambda t, a: t.digamma(a), _samples, dtypes=DTYPES,
           tols={"float32": (1e-5, 1e-5), "float64": (1e-9, 1e-10)}),
    OpInfo("polygamma1", lambda t, a: t.polygamma(1, a), _trigamma_samples, dtypes=DTYPES,
           grad=False, tols={"float32": (1e-5, 1e-5), "float64": (1e-9, 1e-10)}),
]
