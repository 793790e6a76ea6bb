"""``EMBER_DEBUG`` is a ladder (docs/compiler.md, "Debugging"): each level prints what the
levels below it print, plus its own:

1. compile events: one line per compiled graph (ops, lifted numbers, backend, time), the C
   backend's summary (kernels, segments, fallbacks counted per op, library), gcc runs;
2. the graphs (as runnable Python);
3. the loop IR, fusion decisions and each fallback with its reason;
4. the generated C (without the preludes) and the path of the whole translation unit;
5. compiler commands, cache hits, the compiler version probe.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler.c.build import runtime, toolchain
from ember.config import config

MARKERS = {
    1: ["[ember.compiler compile] f (", "[ember.compiler c] graph of 5 ops",
        "eager fallbacks: ", "frexp x1", "[ember.toolchain] compiled graph in"],
    2: ["[ember.compiler graphs] f graph (5 ops)", "def graph(x0):"],
    3: ["[ember.compiler loop_ir]", "[ember.compiler fusion] kernel0: mul add softmax",
        "[ember.compiler fallbacks] node 0 (frexp) runs its eager kernel"],
    4: ["[ember.compiler c_source] (whole unit with the preludes: ",
        "EMBER_EXPORT int ember_entry(void **bufs"],
    5: ["[ember.toolchain] compile: ", "-ffp-contract=off"],
}


def f(x):
    # frexp runs its eager kernel (an extern: a fallback to report)
    return ember.softmax(ember.frexp(x)[0] * 0.5 + 1, -1).sum(0)


def _run(monkeypatch, cache, level):
    monkeypatch.setattr(config, "debug", level)
    monkeypatch.setattr(config, "cache_dir", str(cache))
    ember.compiler.reset()
    toolchain.CACHE.clear()
    runtime.LIBRARIES.clear()
    x = ember.randn(6, 7)
    got = ember.compile(f, backend="c")(x)
    # the row kernel sums in double, eager in float32: a few ulp apart
    np.testing.assert_allclose(got.numpy(), f(x).numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4, 5])
def test_each_level_adds_its_output(level, tmp_path, monkeypatch, capfd):
    _run(monkeypatch, tmp_path, level)  # an empty cache: gcc runs
    err = capfd.readouterr().err
    for lv, markers in MARKERS.items():
        for m in markers:
            if lv <= level:
                assert m in err, f"EMBER_DEBUG={level} should print {m!r}:\n{err}"
            else:
                assert m not in err, f"EMBER_DEBUG={level} printed {m!r} (level {lv}):\n{err}"
    if level == 0:
        assert err == ""
    if level < 4:  # the preludes never go to the terminal; level 4 prints only kernels/entries
        assert "ember_abi_version" not in err
    else:
        assert "ember_abi_version" not in err.split("[ember.compiler c_source]")[1]


def test_warm_start_says_where_things_came_from(tmp_path, monkeypatch, capfd):
    _run(monkeypatch, tmp_path, 0)
    capfd.readouterr()
    _run(monkeypatch, tmp_path, 1)
    err = capfd.readouterr().err
    assert "(run plan from the cache)" in err and "[ember.toolchain] compiled" not in err
    _run(monkeypatch, tmp_path, 5)  # level 3+ lowers again (to print it): the library is a hit
    err = capfd.readouterr().err
    assert "[ember.toolchain] cache hit " in err and "[ember.toolchain] compile: " not in err
