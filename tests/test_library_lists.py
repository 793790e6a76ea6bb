"""Python custom ops with ``Tensor[]`` results and ``Tensor?[]`` arguments, and the output
aliasing rule on storages, against torch 2.13's torch.library."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _define(lib, name: str):
    """The same op in ember and in torch (``lib`` is ``ember`` or ``torch``)."""
    T = lib.Tensor
    if name == "chunks":
        def chunks(x: T, n: int) -> list[T]:
            return [c.clone() for c in x.chunk(n)]
        return lib.library.custom_op(f"lists_{lib.__name__}::chunks", chunks, mutates_args=())
    if name == "halves":
        def halves(x: T) -> list[T]:
            y = x.clone()
            return [y[:2], y[2:]]   # disjoint views of one new buffer
        return lib.library.custom_op(f"lists_{lib.__name__}::halves", halves, mutates_args=())
    if name == "tail":
        def tail(x: T) -> T:
            return x[1:]            # a view of the input (memory bounds differ from x[:1])
        return lib.library.custom_op(f"lists_{lib.__name__}::tail", tail, mutates_args=())
    def opt_sum(xs: list[T | None], like: T) -> T:
        out = lib.zeros_like(like)
        for t in xs:
            if t is not None:
                out = out + t
        return out
    return lib.library.custom_op(f"lists_{lib.__name__}::opt_sum", opt_sum, mutates_args=())


def test_tensor_list_result_schema_values_and_backward_get_one_list():
    ops = {lib: _define(lib, "chunks") for lib in (ember, torch)}
    assert ops[ember].schema == str(ops[torch]._opoverload._schema).split("chunks", 1)[1]
    seen = {}
    for lib, op in ops.items():
        def backward(ctx, grads, lib=lib):
            seen[lib] = type(grads)
            return lib.cat(list(grads)), None
        op.register_autograd(backward)
    x = ember.randn(5, requires_grad=True)
    tx = torch.from_numpy(x.detach().numpy().copy()).requires_grad_()
    outs = ops[ember](x, 2), ops[torch](tx, 2)
    for got, want in zip(*outs):
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    (outs[0][0].sum() * 2 + outs[0][1].sum() * 3).backward()
    (outs[1][0].sum() * 2 + outs[1][1].sum() * 3).backward()
    assert seen[ember] is seen[torch] is list
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("name", ["halves", "tail"])
def test_outputs_on_one_storage_alias_as_in_torch(name):
    with pytest.raises(RuntimeError, match="may not alias any inputs to this custom operator"):
        _define(torch, name)(torch.arange(4.0))
    with pytest.raises(RuntimeError, match="may not alias any inputs to this custom operator"):
        _define(ember, name)(ember.arange(4.0))


def test_optional_tensor_list_argument_matches_torch():
    ops = {lib: _define(lib, "opt_sum") for lib in (ember, torch)}
    assert ops[ember].schema == str(ops[torch]._opoverload._schema).split("opt_sum", 1)[1]
    xs = [ember.randn(3), None, ember.randn(3)]
    got = ops[ember](xs, ember.ones(3))
    want = ops[torch]([None if t is None else torch.from_numpy(t.numpy().copy()) for t in xs],
                      torch.ones(3))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
