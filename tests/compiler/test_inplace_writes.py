"""In-place writes from C (``ember/compiler/c/inplace.py``): compiled steps that update
parameters, optimizer moments or KV-cache buffers compute the new values in the inputs' own
memory.  Checked against PyTorch (several optimizer steps, a KV-cache loop, aliasing edge cases)
and against eager's version counters."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler.c import backend

torch = pytest.importorskip("torch")

C = "inductor"   # the C backend (this module is not in conftest's _C_MODULES)


def _pair(shape: tuple, seed: int = 0) -> tuple:
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(a.copy()), torch.tensor(a.copy())


def _mlp(lib, seed: int):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    if lib is torch:
        return m
    e = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
    e.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                       for k, v in m.state_dict().items()})
    return e


_OPTS = {
    "sgd_momentum": lambda lib, ps: lib.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
    "adam": lambda lib, ps: lib.optim.Adam(ps, lr=0.01),
    "adamw": lambda lib, ps: lib.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
}


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
@pytest.mark.parametrize("name", sorted(_OPTS))
def test_training_steps_match_torch_and_write_in_place(name, mode):
    tm, em = _mlp(torch, 3), _mlp(ember, 3)
    topt, eopt = _OPTS[name](torch, tm.parameters()), _OPTS[name](ember, em.parameters())
    xs = [_pair((5, 6), seed=s) for s in range(6)]
    ys = [_pair((5, 3), seed=10 + s) for s in range(6)]

    def estep(x, y):
        eopt.zero_grad()
        loss = ember.nn.functional.mse_loss(em(x), y)
        loss.backward()
        eopt.step()
        return loss

    f = ember.compile(estep, backend=C, mode=mode)
    arrays = [p._data for p in em.parameters()]
    for (ex, tx), (ey, ty) in zip(xs, ys):
        topt.zero_grad()
        tl = torch.nn.functional.mse_loss(tm(tx), ty)
        tl.backward()
        tv = [p._version for p in tm.parameters()]
        topt.step()
        ev0 = [p._version for p in em.parameters()]
        el = f(ex, ey)
        np.testing.assert_allclose(el.item(), tl.item(), rtol=1e-5, atol=1e-6)
        for ep, tp in zip(em.parameters(), tm.parameters()):
            np.testing.assert_allclose(ep.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
        # the version counters move as PyTorch's do (one bump per in-place op of the step)
        assert [p._version - v for p, v in zip(em.parameters(), ev0)] == \
            [p._version - v for p, v in zip(tm.parameters(), tv)]
    # the parameters kept their memory (written in place, never replaced)
    assert all(p._data is a for p, a in zip(em.parameters(), arrays))
    for group, tgroup in zip(eopt.param_groups, topt.param_groups):
        for ep, tp in zip(group["params"], tgroup["params"]):
            for k, tv in topt.state[tp].items():
                if isinstance(tv, torch.Tensor) and tv.ndim:
                    np.testing.assert_allclose(eopt.state[ep][k].numpy(), tv.numpy(),
                                               rtol=1e-5, atol=1e-6)


def test_optimizer_outputs_are_donated():
    em = _mlp(ember, 1)
    opt = ember.optim.AdamW(em.parameters(), lr=0.01)
    x, _ = _pair((4, 6))

    def step(x):
        opt.zero_grad()
        em(x).sum().backward()
        opt.step()

    f = ember.compile(step, backend=C)
    for _ in range(3):
        f(x)
    cg = backend.last_compiled()
    # parameter, exp_avg, exp_avg_sq and step of 4 parameters: all 16 computed in place
    assert len(cg.source_graph.mutated) == 16
    assert len(cg._donated) == 16


def test_kv_cache_loop_matches_torch_and_views_see_writes():
    ek, tk = _pair((2, 8, 4))

    def ewrite(cache, pos, new):
        cache.index_copy_(1, pos, new)
        return (cache * 2).sum(dim=1)

    f = ember.compile(ewrite, backend=C)
    eview, tview = ek[:, 3], tk[:, 3]   # views made before the loop see every write
    for p in range(8):
        en, tn = _pair((2, 1, 4), seed=20 + p)
        v0 = ek._version
        got = f(ek, ember.tensor([p]), en)
        tk.index_copy_(1, torch.tensor([p]), tn)
        want = (tk * 2).sum(dim=1)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(ek.numpy(), tk.numpy())
        np.testing.assert_array_equal(eview.numpy(), tview.numpy())
        assert ek._version == v0 + 1 and eview._version == ek._version
    assert backend.last_compiled()._donated  # the index_put wrote the cache itself


def test_input_read_after_its_write_in_the_graph():
    def body(lib, x):
        y = x * 2
        s = x.sum()
        x.add_(1)
        return x * 3 + y + s, x.flip(0).sum(0)

    ex, tx = _pair((4, 3))
    f = ember.compile(lambda x: body(ember, x), backend=C)
    for _ in range(3):
        got = f(ex)
        want = body(torch, tx)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(ex.numpy(), tx.numpy())


def test_write_that_reads_other_elements_of_the_input():
    def body(x):
        x.copy_(x.flip(0) + x.roll(1, 1))   # every element's new value reads others
        return x

    ex, tx = _pair((5, 4))
    f = ember.compile(body, backend=C)
    for _ in range(3):
        f(ex)
        body(tx)
        np.testing.assert_allclose(ex.numpy(), tx.numpy(), rtol=1e-6)


def test_noncontiguous_view_written_in_place():
    def body(v):
        v.mul_(2).add_(1)

    eb, tb = _pair((4, 6))
    f = ember.compile(body, backend=C)
    for _ in range(2):
        f(eb.t())
        body(tb.t())
        f(eb[:, ::2])
        body(tb[:, ::2])
        np.testing.assert_allclose(eb.numpy(), tb.numpy(), rtol=1e-6)


def test_view_and_its_base_both_passed():
    def body(b, v):
        y = v * 2          # the old value of the view, read before the base is written
        b.add_(1)
        return y, v * 1

    eb, tb = _pair((3, 4))
    f = ember.compile(body, backend=C)
    for _ in range(3):
        got = f(eb, eb[1])
        want = body(tb, tb[1])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(eb.numpy(), tb.numpy())


def test_same_tensor_passed_twice():
    def body(a, b):
        r = b * 2
        a.mul_(3)
        return r + b

    ex, tx = _pair((6,))
    f = ember.compile(body, backend=C)
    for _ in range(3):
        got = f(ex, ex)
        want = body(tx, tx)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(ex.numpy(), tx.numpy())


def test_returned_new_value_does_not_alias_the_input():
    def body(x):
        y = x * 2
        x.copy_(y)
        return y

    ex, tx = _pair((3, 3))
    f = ember.compile(body, backend=C)
    for _ in range(2):
        ey, ty = f(ex), body(tx)
    ex.add_(100)
    tx.add_(100)
    np.testing.assert_array_equal(ey.numpy(), ty.numpy())
    np.testing.assert_array_equal(ex.numpy(), tx.numpy())


def test_version_counters_match_torch():
    def body(x, m):
        x.mul_(0.5)
        x.add_(1)
        m.lerp_(x, 0.1)
        return x.sum()

    (ex, tx), (em, tm) = _pair((8,)), _pair((8,), 1)
    f = ember.compile(body, backend=C)
    for _ in range(3):
        f(ex, em)
        body(tx, tm)
        assert (ex._version, em._version) == (tx._version, tm._version)
        np.testing.assert_allclose(em.numpy(), tm.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["sgd_momentum", "adamw"])
def test_step_with_zero_grad_last_moves_gemm_products_out_of_the_inputs(name):
    """zero_grad() after step(): a weight gradient is a temporary that the GEMM writes into the
    buffer its fused optimizer epilogue then overwrites (``schedule._in_place``); when that
    buffer is donated, the product gets a temporary of its own again (``_split_product``)."""
    from ember.compiler.c.ir.kernels import GemmKernel

    def make(lib):
        torch.manual_seed(4)
        nn = torch.nn
        m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 10))
        if lib is torch:
            return m
        e = ember.nn.Sequential(ember.nn.Linear(32, 64), ember.nn.ReLU(),
                                ember.nn.Linear(64, 64), ember.nn.ReLU(),
                                ember.nn.Linear(64, 10))
        e.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                           for k, v in m.state_dict().items()})
        return e

    tm, em = make(torch), make(ember)
    topt, eopt = _OPTS[name](torch, tm.parameters()), _OPTS[name](ember, em.parameters())
    ex, tx = _pair((32, 32), seed=5)
    labels = np.random.default_rng(6).integers(0, 10, 32)
    ey, ty = ember.tensor(labels), torch.tensor(labels)

    def estep():
        loss = ember.nn.functional.cross_entropy(em(ex), ey)
        loss.backward()
        eopt.step()
        eopt.zero_grad()
        return loss

    f = ember.compile(estep, backend=C)
    for _ in range(4):
        el = f()
        tl = torch.nn.functional.cross_entropy(tm(tx), ty)
        tl.backward()
        topt.step()
        topt.zero_grad()
        np.testing.assert_allclose(el.item(), tl.item(), rtol=1e-5)
        for ep, tp in zip(em.parameters(), tm.parameters()):
            np.testing.assert_allclose(ep.detach().numpy(), tp.detach().numpy(), rtol=1e-4,
                                       atol=1e-6)
    cg = backend.last_compiled()
    assert len(cg._donated) == len(cg.source_graph.mutated) > 0
    assert any(isinstance(k, GemmKernel) and k.out.name.endswith("_p")
               for k in cg.program.kernels())


def test_one_value_written_into_two_inputs():
    def body(a, b, x):
        y = x * 2 + 1
        a.copy_(y)
        b.copy_(y)
        return a.sum() + b.sum()

    (ea, ta), (eb, tb), (ex, tx) = _pair((4, 5)), _pair((4, 5), 1), _pair((4, 5), 2)
    f = ember.compile(body, backend=C)
    for _ in range(2):
        got, want = f(ea, eb, ex), body(ta, tb, tx)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    ea.add_(1)   # a and b hold their own memory after the call
    ta.add_(1)
    np.testing.assert_array_equal(eb.numpy(), tb.numpy())
    np.testing.assert_array_equal(ea.numpy(), ta.numpy())
