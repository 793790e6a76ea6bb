"""cross_entropy (forward and backward) compiled with ``dynamic=True`` runs in C at every batch
size and class count: its ``ignore_index``, ``label_smoothing`` and ``reduction`` are constants
of the user's code (``OpDef.static_params``), never lifted runtime numbers, so no eager extern;
values and gradients match PyTorch's, and a new size does not recompile."""

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend

F = ember.nn.functional

CASES = [{}, {"ignore_index": 3}, {"label_smoothing": 0.1}, {"reduction": "sum"},
         {"reduction": "none", "ignore_index": 1},
         {"reduction": "mean", "label_smoothing": 0.25, "ignore_index": 2}]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items())
                         or "default")
def test_cross_entropy_dynamic_runs_in_c_and_matches_torch(kw, monkeypatch):
    torch = pytest.importorskip("torch")
    externs: list = []
    monkeypatch.setattr(cbackend, "warn_fallbacks", externs.extend)
    builds = []
    real = cbackend.CompiledGraph
    monkeypatch.setattr(cbackend, "CompiledGraph",
                        lambda *a, **k: builds.append(1) or real(*a, **k))
    f = ember.compile(lambda a, b: F.cross_entropy(a, b, **kw), backend="c", dynamic=True)
    rng = np.random.default_rng(0)
    ign = kw.get("ignore_index", -100)
    for n, c in ((8, 5), (11, 5), (5, 7), (8, 5)):
        xa = rng.standard_normal((n, c)).astype(np.float32)
        ta = rng.integers(0, c, n)
        ta[0] = ign                      # one ignored row
        x = ember.tensor(xa, requires_grad=True)
        out = f(x, ember.tensor(ta))
        out.sum().backward()
        tx = torch.tensor(xa, requires_grad=True)
        ref = torch.nn.functional.cross_entropy(tx, torch.tensor(ta), **kw)
        ref.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert externs == [], externs
    # one forward and one backward graph serve every size (batch and class count are
    # runtime ints); a lifted or specialized parameter would build more
    assert len(builds) == 2, len(builds)
