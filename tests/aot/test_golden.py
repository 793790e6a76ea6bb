"""The golden package (tests/aot/golden/make_golden.py, built by ember 0.1.0 for x86-64-v2):
every later ember must load and run it, from Python and from the C runner.  Expected values
come from the generator's closed-form weights, computed with NumPy."""

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import ember

HERE = Path(__file__).parent / "golden"
GOLDEN = HERE / "golden_v1.pt2"
sys.path.insert(0, str(HERE))
from make_golden import bias, weight  # noqa: E402

sys.path.remove(str(HERE))


def _want(x):
    return np.maximum(x @ weight().T + bias(), 0) * 0.5 + 1


def test_golden_package_runs_from_python():
    model = ember._inductor.aoti_load_package(str(GOLDEN))
    meta = model.get_metadata()
    assert meta["golden"] == "ember aot golden v1" and meta["AOTI_CPU_ISA"] == "x86-64-v2"
    assert model.get_constant_fqns() == ["fc.weight", "fc.bias", "scale"]
    for n in (2, 5, 64):
        x = np.linspace(-3, 3, 4 * n, dtype=np.float32).reshape(n, 4)
        np.testing.assert_allclose(model(ember.tensor(x)).numpy(), _want(x), rtol=1e-6)
    with pytest.raises(AssertionError, match="<= 64"):
        model(ember.zeros(65, 4))


def test_golden_package_reexports():
    ep = ember.aot.load_exported_program(str(GOLDEN))
    x = np.linspace(-1, 2, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(ep.module()(ember.tensor(x)).detach().numpy(), _want(x),
                               rtol=1e-6)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="builds libember_aot with gcc")
def test_golden_package_runs_from_c():
    from tests.aot.helpers import CRunner
    c = CRunner()
    rc, h, err = c.load(GOLDEN)
    assert rc == 0, err
    try:
        assert c.metadata(h, "golden") == "ember aot golden v1"
        assert c.metadata(h, "nope") is None
        x = np.linspace(-3, 3, 28, dtype=np.float32).reshape(7, 4)
        rc, outs = c.run(h, [x])
        assert rc == 0, c.error()
        np.testing.assert_allclose(outs[0], _want(x), rtol=1e-6)
        rc, _ = c.run(h, [np.zeros((65, 4), np.float32)])
        assert rc == 7 and "<= 64" in c.error()
        rc, _ = c.run(h, [np.zeros((3, 5), np.float32)])
        assert rc == 7 and "x.size()[1] == 4" in c.error()
    finally:
        c.lib.ember_aot_unload(h)


def test_loading_needs_no_compiler_code():
    """Loading and running a package imports none of the C backend (no lowering, codegen or
    toolchain) and runs no compiler (checked in a fresh process with EMBER_CC pointing nowhere)."""
    import os
    import subprocess
    code = ("import sys, numpy as np, ember, ember.aot; "
            f"m = ember.aot.load_package({str(GOLDEN)!r}); "
            "y = m(ember.ones(3, 4)); assert tuple(y.shape) == (3, 6); "
            "print(' '.join(k for k in sys.modules if k.startswith('ember.compiler.c')))")
    env = {**os.environ, "EMBER_CC": "/nonexistent/cc",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    assert not {m for m in loaded if m.split(".")[3:4] in (["lower"], ["codegen"])}, loaded
    assert "ember.compiler.c.build.toolchain" not in loaded, loaded


GOLDEN_V2 = HERE / "golden_v2_mutable.pt2"  # runtime ABI 2: a buffer updated in place


def test_golden_v2_mutable_buffer_from_python():
    model = ember.aot.load_package(str(GOLDEN_V2))
    meta = model.get_metadata()
    assert meta["ember.runtime_abi"] == "2" and meta["ember.mutated_buffers"] == '["calls"]'
    x = np.linspace(-3, 3, 20, dtype=np.float32).reshape(5, 4)
    for k in (1, 2, 3):  # call k returns fc(x).relu() * k + 1
        want = np.maximum(x @ weight().T + bias(), 0) * k + 1
        np.testing.assert_allclose(model(ember.tensor(x)).numpy(), want, rtol=1e-6)
    assert float(model.get_constant("calls").numpy()[0]) == 3.0
    again = ember.aot.load_package(str(GOLDEN_V2))  # the package itself is unchanged
    np.testing.assert_allclose(again(ember.tensor(x)).numpy(),
                               np.maximum(x @ weight().T + bias(), 0) + 1, rtol=1e-6)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="builds libember_aot with gcc")
def test_golden_v2_mutable_buffer_from_c():
    from tests.aot.helpers import CRunner
    c = CRunner()
    rc, h, err = c.load(GOLDEN_V2)
    assert rc == 0, err
    try:
        x = np.linspace(-3, 3, 28, dtype=np.float32).reshape(7, 4)
        for k in (1, 2, 3):
            rc, outs = c.run(h, [x])
            assert rc == 0, c.error()
            want = np.maximum(x @ weight().T + bias(), 0) * k + 1
            np.testing.assert_allclose(outs[0], want, rtol=1e-6)
    finally:
        c.lib.ember_aot_unload(h)
