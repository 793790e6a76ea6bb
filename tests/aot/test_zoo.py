"""The export issue's model zoo (tests/export/test_zoo_vs_torch.py) packaged and run from the
package on new shapes, from Python and from the C runner (libember_aot via ctypes), against
``ep.module()``; and against torch's own AOTInductor package when a test has the time for it
is in benchmarks/bench_aot.py, not here.  The conv net's convolutions and max_pool lower over
runtime batch and spatial sizes, so every zoo model packages with its dynamic dims."""

import shutil

import numpy as np
import pytest

import ember
from tests.aot.helpers import CRunner

pytest.importorskip("torch")
from tests.export.test_zoo_vs_torch import CASES, E_MODELS, IDS, _inputs, _specs  # noqa: E402


@pytest.fixture(scope="module")
def crunner():
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc for libember_aot")
    return CRunner()


def _flat(x):
    return list(x) if isinstance(x, tuple) else [x]


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_zoo_package_matches_ep_module(case, dynamic, tmp_path, crunner):
    k, shapes, news = CASES[case]
    ember.manual_seed(k)
    m = E_MODELS[k]().eval()
    ep = ember.export.export(m, _inputs(shapes)[0],
                             dynamic_shapes=_specs(ember.export.Dim, k) if dynamic else None)
    if not dynamic:
        news = [shapes]
    path = ember.aot.compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))
    model = ember.aot.load_package(path)
    rc, h, err = crunner.load(path)
    assert rc == 0, err
    try:
        for new in news:
            args = _inputs(new, seed=1)[0]
            want = [w.detach().numpy() for w in _flat(ep.module()(*args))]
            got = [g.numpy() for g in _flat(model(*args))]
            rc, c_got = crunner.run(h, [a.numpy() for a in args])
            assert rc == 0, crunner.error()
            assert len(got) == len(c_got) == len(want)
            for g, c, w in zip(got, c_got, want):
                assert g.shape == c.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
                np.testing.assert_allclose(c, g, rtol=1e-6, atol=1e-7)  # the same library
    finally:
        crunner.lib.ember_aot_unload(h)
