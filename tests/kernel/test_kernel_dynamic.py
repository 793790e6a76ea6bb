"""Kernel ops with launch grids and int arguments derived from dynamic sizes: export keeps them
symbolic, ``ep.module()`` and a compiled exported program run them at other sizes,
``ember.compile(dynamic=True)`` builds one size-generic C unit (the grid and the int arguments
read at run time; no extern, no recompile), and a static graph keeps them as C literals."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.kernel as tl
from ember import Tensor
from ember.compiler.c.backend import last_compiled
from ember.compiler.frontend.backends import lookup_backend
from ember.export import Dim, export
from ember.library import triton_op, wrap_triton
from ember.sym import SymInt
from tests.kernel.conftest import load_example

torch = pytest.importorskip("torch")
sm = load_example("softmax")


@tl.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, a, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a * x + tl.load(y_ptr + offs, mask=m), mask=m)


@triton_op("kernel_dyn_tests::axpy", mutates_args=())
def axpy(x: Tensor, y: Tensor, a: float) -> Tensor:
    out = ember.empty_like(x)
    n = x.numel()
    wrap_triton(axpy_kernel)[(tl.cdiv(n, 64),)](x, y, out, n, a, BLOCK=64)
    return out


@triton_op("kernel_dyn_tests::softmax", mutates_args=())
def k_softmax(x: Tensor) -> Tensor:
    rows, cols = x.shape
    out = ember.empty_like(x)
    wrap_triton(sm.softmax_kernel)[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                                           BLOCK=64)
    return out


def _t(x):
    return torch.from_numpy(x.detach().numpy().copy())


def _ref_axpy(x, y, a):
    return ((_t(x) + 1) * a + _t(y)) * 3


class Axpy(ember.nn.Module):
    def forward(self, x, y):
        return axpy(x + 1, y, 2.5) * 3


class CountingC:
    """The C backend, counting its builds."""

    def __init__(self):
        self.count = 0
        self.c = lookup_backend("c")

    def __call__(self, graph, example_inputs):
        self.count += 1
        return self.c(graph, example_inputs)


def _kernel_launch_nodes(ep):
    return [n for n in ep.graph.nodes if getattr(n.target, "name", "") == "kernel_launch"]


@pytest.mark.parametrize("dim", [Dim("n"), Dim.AUTO])
def test_export_keeps_symbolic_sizes_and_runs_at_other_sizes(dim):
    ep = export(Axpy(), (ember.randn(100), ember.randn(100)),
                dynamic_shapes={"x": {0: dim}, "y": {0: dim}})
    (ph,) = [n for n in ep.graph.nodes if n.name == "x"]
    assert isinstance(ph.meta["val"].shape[0], SymInt)
    ep2 = ep.run_decompositions(decompose_custom_triton_ops=True)
    (launch,) = _kernel_launch_nodes(ep2)
    grid, scalars = launch.kwargs["grid"], launch.kwargs["scalars"]
    # the grid is cdiv(n, 64) and n the size: both symbolic, not the example's 2 and 100
    assert isinstance(grid[0], SymInt) and isinstance(scalars[0], SymInt)
    assert grid[1:] == (1, 1) and scalars[1] == 2.5
    for n in (3, 64, 100, 250):
        x, y = ember.randn(n), ember.randn(n)
        ref = _ref_axpy(x, y, 2.5).numpy()
        for prog in (ep, ep2):
            np.testing.assert_allclose(prog.module()(x, y).numpy(), ref, rtol=1e-5, atol=1e-5)


def test_exported_program_compiles_once_for_every_size():
    ep = export(Axpy(), (ember.randn(100), ember.randn(100)),
                dynamic_shapes={"x": {0: Dim("n")}, "y": {0: Dim("n")}})
    cp = ember.export.compile_program(ep)
    assert last_compiled().extern_count == 0, last_compiled().externs
    for n in (5, 100, 257):
        x, y = ember.randn(n), ember.randn(n)
        np.testing.assert_allclose(cp(x, y).numpy(), _ref_axpy(x, y, 2.5).numpy(),
                                   rtol=1e-5, atol=1e-5)


def test_compile_dynamic_true_one_build_reads_the_grid_at_run_time():
    cb = CountingC()
    f = ember.compile(lambda x, y, a: axpy(x + 1, y, a) * 3, backend=cb, dynamic=True)
    for n, a in ((5, 2.5), (100, 2.5), (300, -1.0), (1000, 0.5)):
        x, y = ember.randn(n), ember.randn(n)
        np.testing.assert_allclose(f(x, y, a).numpy(), _ref_axpy(x, y, a).numpy(),
                                   rtol=1e-5, atol=1e-5)
    assert cb.count == 1
    lc = last_compiled()
    assert lc.extern_count == 0, lc.externs
    # the grid function gets runtime sizes (s<k>), not the first call's literals
    call = next(ln for ln in lc.source.splitlines() if "_grid(s" in ln)
    assert "ek_axpy_kernel_" in call
    assert "1000LL" not in lc.source and "< a_n" in lc.source  # n is read, not folded


def test_automatic_dynamic_then_no_recompile():
    cb = CountingC()
    f = ember.compile(lambda x: k_softmax(x * 2) + 1, backend=cb)
    for rows in (4, 9, 33, 70):
        x = ember.randn(rows, 50)
        np.testing.assert_allclose(f(x).numpy(), (torch.softmax(_t(x) * 2, -1) + 1).numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert cb.count == 2  # the first size, then one size-generic graph for the rest
    assert last_compiled().extern_count == 0, last_compiled().externs


def test_static_graph_keeps_literal_grid_and_ints():
    f = ember.compile(lambda x, y: axpy(x, y, 2.0), fullgraph=True)
    x, y = ember.randn(200), ember.randn(200)
    np.testing.assert_allclose(f(x, y).numpy(), (2 * _t(x) + _t(y)).numpy(), rtol=1e-6)
    src = last_compiled().source
    call = next(ln for ln in src.splitlines() if "ek_axpy_kernel_" in ln and "_grid(" in ln
                and "static void" not in ln)
    assert "_grid(4, 1, 1" in call  # cdiv(200, 64) = 4 folded into the call
    # n = 200 is a literal inside the kernel's masks (they fold)
    assert "< ((int64_t)200LL)" in src


def test_a_size_passed_as_constexpr_specializes():
    @tl.jit
    def fill(out_ptr, N: tl.constexpr):  # noqa: N803
        offs = tl.arange(0, N)
        tl.store(out_ptr + offs, offs.to(tl.float32))

    @triton_op("kernel_dyn_tests::iota", mutates_args=())
    def iota(x: Tensor) -> Tensor:
        out = ember.empty_like(x)
        wrap_triton(fill)[(1,)](out, x.shape[0])
        return out

    class M(ember.nn.Module):
        def forward(self, x):
            return iota(x) + x

    ep = export(M(), (ember.randn(8),), dynamic_shapes={"x": {0: Dim.AUTO}})
    ep2 = ep.run_decompositions(decompose_custom_triton_ops=True)
    x = ember.randn(8)
    np.testing.assert_allclose(ep2.module()(x).numpy(), np.arange(8) + x.numpy(), rtol=1e-6)
    # the constexpr guarded the size: another size is refused by the input guards
    with pytest.raises(AssertionError, match="Guard failed"):
        ep2.module()(ember.randn(5))


def test_blocks_at_an_offset_get_an_unmasked_body(mode):
    # ``pid * BLOCK + arange(0, BLOCK) < n``: programs whose whole block is in range run a
    # second body without masks (chosen per program: pid * 64 + 64 <= n); the last, partial
    # block keeps its masks.  Both bodies must give torch's values.
    for n in (64, 100, 1, 200):
        x, y = ember.randn(n), ember.randn(n)
        out = ember.empty_like(x)
        axpy_kernel[(tl.cdiv(n, 64),)](x, y, out, n, -0.5, BLOCK=64)
        np.testing.assert_allclose(out.numpy(), (-0.5 * _t(x) + _t(y)).numpy(), rtol=1e-6)
    if mode == "c":
        bound = axpy_kernel.bind((x, y, out, 1, 1.0), {"BLOCK": 64})
        src = axpy_kernel.compiled(bound).source
        assert "_full(" in src and "((pid0 * 64LL) + 64 <= a_n)" in src


@tl.jit
def add_into(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)


@triton_op("kernel_dyn_tests::add_", mutates_args={"x"})
def add_(x: Tensor, y: Tensor) -> None:
    n = x.numel()
    wrap_triton(add_into)[(tl.cdiv(n, 64),)](x, y, n, BLOCK=64)


def test_a_mutating_kernel_op_in_a_size_generic_graph():
    # the stored tensor starts as a copy of its value (a memcpy of a runtime size)
    cb = CountingC()

    def f(x, y):
        add_(x, y)
        return x * 2

    cf = ember.compile(f, backend=cb, dynamic=True)
    for n in (5, 100, 300):
        x0, y = ember.randn(n), ember.randn(n)
        x = x0.clone()
        out = cf(x, y)
        want = _t(x0) + _t(y)
        np.testing.assert_allclose(x.numpy(), want.numpy(), rtol=1e-6)
        np.testing.assert_allclose(out.numpy(), (2 * want).numpy(), rtol=1e-6)
    assert cb.count == 1 and last_compiled().extern_count == 0, last_compiled().externs
