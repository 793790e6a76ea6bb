"""Custom ops in AOT packages.  A kernel op (``triton_op``/``kernel_op``) is inlined into the
model library's C at package time, so its package runs from the C runner too; a Python custom
op (``custom_op``) runs from a package loaded in Python, where it must be registered (the
metadata says the model needs Python, and the C runner refuses it, naming the op)."""

import json
import shutil

import numpy as np
import pytest

import ember
import ember.kernel as tl
from ember import Tensor
from ember.aot import PackageError
from ember.export import Dim, export
from ember.library import custom_op, triton_op, wrap_triton
from ember.ops.registry import REGISTRY
from tests.aot.helpers import CRunner
from tests.kernel.conftest import load_example

sm = load_example("softmax")


@custom_op("aot_tests::shift", mutates_args=())
def shift(x: Tensor, k: int, scale: float) -> Tensor:
    return ember.roll(x, k, dims=1) * scale


@shift.register_fake
def _shift_fake(x, k, scale):
    return ember.empty_like(x)


@custom_op("aot_tests::fail", mutates_args=())
def fail(x: Tensor) -> Tensor:
    raise ValueError("aot_tests::fail was called")


@fail.register_fake
def _fail_fake(x):
    return ember.empty_like(x)


@custom_op("aot_tests::accumulate", mutates_args=("acc",))
def accumulate(acc: Tensor, x: Tensor) -> None:
    acc.add_(x.sum(0))


@accumulate.register_fake
def _accumulate_fake(acc, x):
    return None


@triton_op("aot_tests::softmax", mutates_args=())
def k_softmax(x: Tensor) -> Tensor:
    rows, cols = x.shape
    out = ember.empty_like(x)
    wrap_triton(sm.softmax_kernel)[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                                           BLOCK=sm.next_power_of_2(cols))
    return out


class PyNet(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(8, 16)

    def forward(self, x):
        h = self.fc(x).relu()
        # a non-contiguous argument (copied for the op), a graph input, int/float params
        return shift(h.t().contiguous().t(), 3, 0.5) + h, shift(x, 1, 2.0)


@triton_op("aot_tests::axpy", mutates_args=())
def k_axpy(x: Tensor, y: Tensor, a: float) -> Tensor:
    out = ember.empty_like(x)
    n = x.numel()
    wrap_triton(axpy_kernel)[(tl.cdiv(n, 64),)](x, y, out, n, a, BLOCK=64)
    return out


@tl.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, a, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)


class DynKernelNet(ember.nn.Module):
    """Kernel launches whose grids (rows; cdiv(numel, 64)) and int arguments follow the batch."""

    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(8, 24)

    def forward(self, x):
        h = k_softmax(self.fc(x))
        return k_axpy(h, h * h, 3.0)


class KernelNet(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(8, 16)

    def forward(self, x):
        return k_softmax(self.fc(x)) * 2


@pytest.fixture(scope="module")
def crunner():
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc for libember_aot")
    return CRunner()


@pytest.fixture(scope="module")
def py_package(tmp_path_factory):
    ember.manual_seed(0)
    ep = export(PyNet(), (ember.randn(4, 8),), dynamic_shapes={"x": {0: Dim("b", max=64)}})
    path = tmp_path_factory.mktemp("aot") / "py.pt2"
    return ep, ember.aot.compile_and_package(ep, package_path=str(path))


def test_python_custom_op_runs_from_python(py_package):
    ep, path = py_package
    model = ember.aot.load_package(path)
    meta = model.get_metadata()
    assert meta["ember.needs_python"] == "1"
    assert json.loads(meta["ember.python_ops"]) == ["aot_tests::shift"]
    assert meta["ember.runtime_abi"] == "2"
    for b in (4, 7, 2):
        x = ember.randn(b, 8)
        got, want = model(x), ep.module()(x)
        assert len(got) == len(want) == 2
        for g, w in zip(got, want):
            assert tuple(g.shape) == tuple(w.shape)
            np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_python_custom_op_must_be_registered(py_package, monkeypatch):
    _, path = py_package
    monkeypatch.delitem(REGISTRY, "aot_tests.shift.default")
    with pytest.raises(PackageError, match=r"aot_tests::shift, not registered"):
        ember.aot.load_package(path)


def test_c_runner_refuses_a_package_that_needs_python(py_package, crunner):
    _, path = py_package
    rc, _, err = crunner.load(path)
    assert rc == 5  # EMBER_AOT_ECOMPAT
    assert "needs Python" in err and "aot_tests::shift" in err


def test_python_custom_op_errors_propagate(tmp_path):
    class Failing(ember.nn.Module):
        def forward(self, x):
            return fail(x * 2) + 1

    ep = export(Failing(), (ember.randn(3, 4),))
    model = ember.aot.load_package(
        ember.aot.compile_and_package(ep, package_path=str(tmp_path / "f.pt2")))
    with pytest.raises(ValueError, match="aot_tests::fail was called"):
        model(ember.randn(3, 4))


def test_kernel_op_package_runs_without_python(tmp_path, crunner):
    ember.manual_seed(0)
    m = KernelNet()
    ep = export(m, (ember.randn(4, 8),))
    path = ember.aot.compile_and_package(ep, package_path=str(tmp_path / "k.pt2"))
    model = ember.aot.load_package(path)
    meta = model.get_metadata()
    assert meta["ember.needs_python"] == "0" and meta["ember.python_ops"] == "[]"
    # the package keeps the program with its kernel op, re-exportable as it was
    node_ops = [str(n.target) for n in ember.aot.load_exported_program(path).graph.nodes]
    assert any("aot_tests.softmax" in t for t in node_ops)
    x = ember.randn(4, 8)
    want = ep.module()(x).detach().numpy()
    np.testing.assert_allclose(model(x).numpy(), want, rtol=1e-5, atol=1e-6)
    rc, h, err = crunner.load(path)
    assert rc == 0, err
    try:
        rc, outs = crunner.run(h, [x.numpy()])
        assert rc == 0, crunner.error()
        np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-6)
    finally:
        crunner.lib.ember_aot_unload(h)


def test_python_custom_op_that_mutates_a_buffer(tmp_path):
    """A custom op that updates a buffer in place: the package's private copy of the buffer
    follows ep.module()'s, call by call."""
    class Acc(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", ember.zeros(4))

        def forward(self, x):
            accumulate(self.acc, x)
            return x * 2 + self.acc

    ep = export(Acc(), (ember.randn(3, 4),), dynamic_shapes={"x": {0: Dim("b", max=64)}})
    model = ember.aot.load_package(
        ember.aot.compile_and_package(ep, package_path=str(tmp_path / "acc.pt2")))
    assert model.get_metadata()["ember.mutated_buffers"] == '["acc"]'
    ref = ep.module()
    for b in (3, 5, 2):
        x = ember.randn(b, 4)
        np.testing.assert_allclose(model(x).numpy(), ref(x).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(model.get_constant("acc").numpy(),
                               dict(ref.named_buffers())["acc"].detach().numpy(), rtol=1e-6)


def test_kernel_op_package_with_a_dynamic_batch(tmp_path, crunner):
    """The grid and int arguments are symbolic in the package's C: one library serves every
    batch size, from Python and from the C runner."""
    torch = pytest.importorskip("torch")
    ember.manual_seed(0)
    m = DynKernelNet()
    ep = export(m, (ember.randn(4, 8),), dynamic_shapes={"x": {0: Dim("b", max=512)}})
    path = ember.aot.compile_and_package(ep, package_path=str(tmp_path / "dyn.pt2"))
    model = ember.aot.load_package(path)
    assert model.get_metadata()["ember.needs_python"] == "0"
    tw, tb = (torch.from_numpy(p.detach().numpy().copy()) for p in (m.fc.weight, m.fc.bias))
    rc, h, err = crunner.load(path)
    assert rc == 0, err
    try:
        for b in (1, 3, 17, 300):
            x = ember.randn(b, 8)
            th = torch.softmax(torch.from_numpy(x.numpy()) @ tw.T + tb, -1)
            want = (3.0 * th + th * th).numpy()
            np.testing.assert_allclose(model(x).numpy(), want, rtol=1e-5, atol=1e-6)
            rc, outs = crunner.run(h, [x.numpy()])
            assert rc == 0, crunner.error()
            np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-6)
    finally:
        crunner.lib.ember_aot_unload(h)
