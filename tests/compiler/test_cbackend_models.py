"""Whole training steps compiled with the C backend give eager's losses (issue 5, "Tests").

The benchmark models (``benchmarks/bench_models.py``: the MLP 784-512-512-10 and the char GPT
of ``ember.demo``) at small sizes so the suite stays fast: forward, cross_entropy, backward,
AdamW step and zero_grad compiled as one function with ``backend="c"``, 20 steps against the
same steps run eagerly from the same initial weights and batches.

Tolerances: the MLP's C kernels are pointwise float32 arithmetic, relu and AdamW's
sqrt/divide, which round exactly as NumPy does (``-ffp-contract=off``, no fast-math), so its
losses agree to a few ulp (C reductions accumulate in double).  The GPT's C kernels also
compute gelu(approximate="tanh") with
the prelude's vectorized ``ember_tanh`` (1.3 ulp from the float64 function, docs/compiler.md
"Accuracy") where eager calls NumPy's tanh: single activations differ by a few ulp, and 20 AdamW
steps carry that into the weights.  The losses (means over 32 positions, magnitude ~3.7) then
differ by a few ulp of float32 (2.4e-7 = 1 ulp measured here); the test allows 2e-6 relative
(about 30 ulp at 3.7), far below any real error (a wrong kernel moves the loss by > 1e-3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ember
from ember import demo, nn
from ember.compiler.c import backend as cbackend
from tests.compiler.helpers import lm_step

STEPS = 20


def _mlp():
    m = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                      nn.Linear(32, 10))
    rng = np.random.default_rng(0)
    data = [(ember.tensor(rng.standard_normal((16, 64)).astype(np.float32)),
             ember.tensor(rng.integers(0, 10, 16), dtype=ember.int64)) for _ in range(STEPS)]
    return m, data


def _gpt():
    m = demo.CharGPT(40, block=16, d=32, layers=2, heads=2)
    rng = np.random.default_rng(0)
    data = [(ember.tensor(rng.integers(0, 40, (2, 16)), dtype=ember.int64),
             ember.tensor(rng.integers(0, 40, (2, 16)), dtype=ember.int64))
            for _ in range(STEPS)]
    return m, data


def _train(make, backend):
    ember.manual_seed(0)
    m, data = make()
    opt = ember.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.01)
    step = lm_step if backend is None else ember.compile(lm_step, backend=backend)
    losses = [step(m, opt, x, y).item() for x, y in data]
    return m, np.array(losses)


@pytest.mark.parametrize("make", [_mlp, _gpt], ids=["mlp", "gpt"])
def test_training_step_losses_match_eager(make):
    builds = cbackend.BUILDS[0]
    m1, eager = _train(make, None)
    m2, comp = _train(make, "c")
    # the step really ran through C: a graph for the first step (it creates AdamW's state) and
    # one for the steady step, each with C kernels; never a recompile per step
    made = cbackend._RECENT[-(cbackend.BUILDS[0] - builds):]
    assert 1 <= len(made) <= 2, len(made)
    assert all(cg.stats.kernels > 0 and cg.entries for cg in made)
    # C reductions (cross_entropy, the bias gradients' sums) accumulate in double where eager
    # sums float32 pairwise: each differs by about an ulp, so losses agree to a few ulp
    # (measured 1.1e-7 relative for the MLP) and parameters of magnitude <= 0.31 to a few ulp
    # after 20 AdamW steps (measured 7.5e-8 absolute); the GPT's gelu also uses the prelude's tanh
    np.testing.assert_allclose(comp, eager, rtol=2e-6, atol=0)
    if make is _mlp:
        for (name, p), q in zip(m1.named_parameters(), m2.parameters()):
            np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=0,
                                       atol=5e-7, err_msg=name)


def test_gpt_inference_matches_eager():
    """The GPT's forward alone (no_grad, as in generation): logits within float32 rounding of
    the vectorized tanh (measured max difference 1e-7 on logits of magnitude ~0.5)."""
    ember.manual_seed(0)
    m, data = _gpt()
    x = data[0][0]
    with ember.no_grad():
        want = m(x).numpy()
        got = ember.compile(m, backend="c")(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- warm start
def _fresh_process_state():
    """What a new process starts without: compiled functions, the toolchain's memo and the
    loaded libraries' Python objects (the on-disk cache stays)."""
    from ember.compiler.c.build import runtime, toolchain
    ember.compiler.reset()
    toolchain.CACHE.clear()
    runtime.LIBRARIES.clear()


def test_warm_start_uses_the_run_plan_without_lowering(tmp_path, monkeypatch):
    from ember.config import config
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    _fresh_process_state()

    def f(x, w):
        return ember.softmax((x @ w) * 0.5 + 1, -1).sum(0)

    x, w = ember.randn(6, 5), ember.randn(5, 7)
    first = ember.compile(f, backend="c")(x, w).numpy()
    cold = cbackend.last_compiled()
    assert cold._program is not None and list((tmp_path / "plans").rglob("*.json"))
    _fresh_process_state()
    second = ember.compile(f, backend="c")(x, w).numpy()
    warm = cbackend.last_compiled()
    assert warm is not cold and warm._program is None  # nothing was lowered
    np.testing.assert_array_equal(second, first)
    # the row kernel and the sum accumulate in double, eager in float32: a few ulp apart
    np.testing.assert_allclose(second, f(x, w).numpy(), rtol=1e-6, atol=1e-7)
    assert warm.stats.fallbacks == cold.stats.fallbacks
    assert warm.source == cold.source  # lowered again on demand for inspection

    # a plan whose library is gone is not used: the graph is built again (unlink, not
    # overwrite: this process still has the library mapped)
    Path(warm.path).unlink()
    _fresh_process_state()
    third = ember.compile(f, backend="c")(x, w).numpy()
    rebuilt = cbackend.last_compiled()
    assert rebuilt._program is not None
    np.testing.assert_array_equal(third, first)


def test_graph_without_c_segments_needs_no_compiler(tmp_path, monkeypatch):
    """The run-plan cache key includes the compiler's version; without a compiler a graph of
    externs only still runs (uncached), as before."""
    from ember.config import config
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(config, "cc", "ember-no-such-compiler")
    _fresh_process_state()
    x = ember.randn(2, 3)
    got = ember.compile(lambda a: ember.frexp(a)[0], backend="c")(x)  # frexp: an extern
    np.testing.assert_array_equal(got.numpy(), ember.frexp(x)[0].numpy())
    assert cbackend.last_compiled().path is None
