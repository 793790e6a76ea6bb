"""The bound C call of a replay (compiler/c/bound.py): fixed inputs, persistent temporaries.

A ``mode="reduce-overhead"`` replay of a one-entry C graph prepares the C call once with the
arrays of the parameters and buffers it reads fixed; the guards must still notice a parameter
replaced, given a new array (``.data =``, also of another size) or flipped to requires_grad,
and in-place changes of a parameter must be seen without a new recording.  The oracle is torch
running the same module with the same weights; the graphs run on the C backend ("inductor").

"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.compiler.c.bound import BoundCall

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


class Step(nn.Module):
    """A decode-like step: two products, a static cache written in place at a 0-d position."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 8, bias=False)

    @ember.no_grad()
    def forward(self, x: ember.Tensor, pos: ember.Tensor, cache: ember.Tensor) -> ember.Tensor:
        h = ember.nn.functional.gelu(self.a(x))
        cache.index_copy_(0, pos.view(1), h)
        return self.b(cache.sum(0, keepdim=True) * 0.5)


def _torch_step(m: Step, x, pos, cache):
    with torch.no_grad():
        h = torch.nn.functional.gelu(torch.nn.functional.linear(
            x, torch.tensor(m.a.weight.detach().numpy()), torch.tensor(m.a.bias.detach().numpy())))
        cache.index_copy_(0, pos.view(1), h)
        return torch.nn.functional.linear(cache.sum(0, keepdim=True) * 0.5,
                                          torch.tensor(m.b.weight.detach().numpy()))


def _close(a: ember.Tensor, b) -> None:
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def _run(m: Step, step, n: int, start: int = 0, cache=None, tcache=None):
    """``n`` steps from position ``start``, ember's replayed step against torch's."""
    rng = np.random.default_rng(start)
    cache = ember.zeros(6, 16) if cache is None else cache
    tcache = torch.zeros(6, 16) if tcache is None else tcache
    outs = []
    for p in range(start, start + n):
        x = rng.standard_normal((1, 8)).astype(np.float32)
        y = step(ember.tensor(x), ember.tensor(p), cache)
        ty = _torch_step(m, torch.tensor(x), torch.tensor(p), tcache)
        _close(y, ty)
        outs.append((y, ty))
    _close(cache, tcache)
    return cache, tcache, outs


def _bound(step) -> BoundCall:
    (entry,), = step._entries.values()
    assert entry.replay is not None and isinstance(entry.replay.bound, BoundCall)
    return entry.replay.bound


def test_bound_replay_equals_torch_and_keeps_outputs():
    ember.manual_seed(0)
    m = Step()
    step = ember.compile(m, mode="reduce-overhead", backend="inductor")
    cache, tcache, outs = _run(m, step, 5)
    assert step._compiled.record_count == 1 and step._compiled.replay_count == 4
    b = _bound(step._compiled)
    assert len(b.var_inputs) < len(b.cg._inputs)   # the weights are fixed in the template
    for y, ty in outs:   # outputs of earlier calls are not overwritten by later ones
        _close(y, ty)


def test_parameter_changed_in_place_is_seen_without_recording():
    ember.manual_seed(1)
    m = Step()
    step = ember.compile(m, mode="reduce-overhead", backend="inductor")
    cache, tcache, _ = _run(m, step, 3)
    with ember.no_grad():
        m.a.weight.mul_(2.0)
        m.b.weight.add_(0.25)
    _run(m, step, 3, start=3, cache=cache, tcache=tcache)
    assert step._compiled.record_count == 1


def test_parameter_replaced_or_given_new_data_records_again():
    ember.manual_seed(2)
    m = Step()
    step = ember.compile(m, mode="reduce-overhead", backend="inductor")
    cache, tcache, _ = _run(m, step, 3)
    m.b.weight = nn.Parameter(ember.randn(8, 16))     # a new Parameter object
    cache, tcache, _ = _run(m, step, 1, start=3, cache=cache, tcache=tcache)
    assert step._compiled.record_count == 2
    m.a.weight.data = ember.randn(16, 8)               # the same object, a new array
    _run(m, step, 2, start=4, cache=cache, tcache=tcache)
    assert step._compiled.record_count == 3


def test_parameter_resized_records_again():
    ember.manual_seed(3)
    m = Step()
    step = ember.compile(m, mode="reduce-overhead", backend="inductor")
    _run(m, step, 2)
    m.b.weight.data = ember.randn(5, 16)               # another size: 5 outputs
    cache, tcache, outs = _run(m, step, 2)
    assert tuple(outs[-1][0].shape) == (1, 5)
    assert step._compiled.record_count == 2


def test_requires_grad_flip_records_again():
    ember.manual_seed(4)
    m = Step()
    step = ember.compile(m, mode="reduce-overhead", backend="inductor")
    cache, tcache, _ = _run(m, step, 2)
    m.a.weight.requires_grad_(False)
    _run(m, step, 2, start=2, cache=cache, tcache=tcache)
    assert step._compiled.record_count == 2


def test_busy_bound_call_takes_the_unbound_path():
    ember.manual_seed(5)
    m = Step()
    step = ember.compile(m, mode="reduce-overhead", backend="inductor")
    cache, tcache, _ = _run(m, step, 2)
    b = _bound(step._compiled)
    assert b._lock.acquire(False)     # as if another thread were inside the bound call
    try:
        _run(m, step, 2, start=2, cache=cache, tcache=tcache)
    finally:
        b._lock.release()
    assert step._compiled.record_count == 1 and step._compiled.replay_count == 3


def test_guards_see_a_new_child_module_and_a_hook():
    ember.manual_seed(6)
    m = Step()
    step = ember.compile(m, mode="reduce-overhead", backend="inductor")
    cache, tcache, _ = _run(m, step, 2)
    m.b = nn.Linear(16, 8, bias=False)     # a new child module
    cache, tcache, _ = _run(m, step, 1, start=2, cache=cache, tcache=tcache)
    assert step._compiled.record_count == 2
    seen = []
    h = m.a.register_forward_hook(lambda mod, i, o: seen.append(1))
    _run(m, step, 1, start=3, cache=cache, tcache=tcache)
    assert seen and step._compiled.record_count == 3
    h.remove()
