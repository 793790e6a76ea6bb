"""The export issue's model zoo (tests/export/test_zoo_vs_torch.py) packaged and run from the
package on new shapes, against ``ep.module()``; and against torch's own AOTInductor package
when a test has the time for it is in benchmarks/bench_aot.py, not here."""

import numpy as np
import pytest

import ember
from ember.aot import ModelSourceError

pytest.importorskip("torch")
from tests.export.test_zoo_vs_torch import CASES, E_MODELS, IDS, _inputs, _specs  # noqa: E402

_LIMIT = ("the C backend lowers {} only for static sizes: with dynamic sizes they run as "
          "Python externs, which a package cannot hold")
XFAIL = {"conv": _LIMIT.format("convolution and max_pool")}


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_zoo_package_matches_ep_module(case, dynamic, tmp_path):
    k, shapes, news = CASES[case]
    ember.manual_seed(k)
    m = E_MODELS[k]().eval()
    ep = ember.export.export(m, _inputs(shapes)[0],
                             dynamic_shapes=_specs(ember.export.Dim, k) if dynamic else None)
    if not dynamic:
        news = [shapes]
    if dynamic and IDS[case] in XFAIL:
        with pytest.raises(ModelSourceError, match="Python"):
            ember.aot.compile_and_package(ep)
        pytest.xfail(XFAIL[IDS[case]])
    path = ember.aot.compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))
    model = ember.aot.load_package(path)
    for new in news:
        args = _inputs(new, seed=1)[0]
        want, got = ep.module()(*args), model(*args)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-4, atol=1e-5)
