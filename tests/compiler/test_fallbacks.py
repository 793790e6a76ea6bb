"""Fallbacks are visible: ``explain`` and ``CompiledGraph`` list the ops that run as eager
externs with their reasons, and a compiled graph warns once per op per process
(``ember.compiler.config.warn_fallbacks``; the suite's conftest turns it off)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.compiler import FallbackWarning
from ember.compiler.c import backend as cbackend
from ember.config import config


def _f(x):
    y = x * 2
    mantissa, exponent = ember.frexp(y)  # frexp has no C lowering (yet): the extern here
    return mantissa, exponent, F.mse_loss(x, y)


def _args() -> tuple:
    return (ember.randn(4, 3),)


@pytest.fixture
def warn_on():
    prev = config.warn_fallbacks
    ember.compiler.config.warn_fallbacks = True
    cbackend.reset_fallback_warnings()
    yield
    config.warn_fallbacks = prev
    cbackend.reset_fallback_warnings()


def test_explain_reports_externs_with_reasons():
    out = ember.compiler.explain(_f)(*_args())
    assert out.extern_count == 1
    assert out.externs == [("frexp", "extern op (no C lowering yet)")]
    assert out.externs_per_graph == [[("frexp", "extern op (no C lowering yet)")]]
    text = str(out)
    assert "Extern Count: 1" in text and "frexp x1: extern op (no C lowering yet)" in text


def test_explain_of_a_fully_lowered_graph_has_no_externs():
    out = ember.compiler.explain(lambda a, b: F.mse_loss(a, b) + 1)(ember.randn(3),
                                                                   ember.randn(3))
    assert out.extern_count == 0 and out.externs == []


def test_compiled_graph_lists_its_externs():
    ember.compiler.reset()
    ember.compile(_f, backend="c")(*_args())
    cg = cbackend.last_compiled()
    assert cg.extern_count == cg.stats.externs == 1
    assert cg.externs == [("frexp", "extern op (no C lowering yet)")]


def test_fallback_warns_once_per_op(warn_on):
    (x,) = _args()
    ember.compiler.reset()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        r1 = ember.compile(_f, backend="c")(x)
        ember.compile(lambda a: _f(a)[0] - 1, backend="c")(x)
    msgs = [str(w.message) for w in rec if issubclass(w.category, FallbackWarning)]
    assert msgs == ["[compile] frexp runs as an eager extern inside compiled graphs "
                    "(extern op (no C lowering yet)); set ember.compiler.config.warn_fallbacks"
                    " = False (EMBER_WARN_FALLBACKS=0) to silence"]
    assert issubclass(FallbackWarning, UserWarning)
    np.testing.assert_allclose(r1[0].numpy(), _f(x)[0].numpy())


def test_fallback_warning_opt_out(warn_on):
    ember.compiler.config.warn_fallbacks = False
    assert config.warn_fallbacks is False
    ember.compiler.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ember.compile(_f, backend="c")(*_args())


def test_warn_fallbacks_reads_the_environment():
    import os
    import subprocess
    import sys
    code = "from ember.config import config; print(config.warn_fallbacks)"
    env = dict(os.environ, EMBER_WARN_FALLBACKS="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, check=True)
    assert out.stdout.strip() == "False"
