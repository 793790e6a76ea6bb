"""``config.check_meta`` covers the eager fast paths (``ember/_meta_check.py``): under it (the
suite's conftest turns it on) the fast paths run as they do for users and ``check_results``
checks their results as it checks the general path's; ``config.check_fast_paths`` off sends
every op down the general path instead."""

import numpy as np
import pytest

import ember
from ember import _frontend
from ember._bind_fast import _check_expand, expand_view
from ember._meta_check import check_results
from ember.autograd.graph import FullReduceNode, SameShapeNode
from ember.config import config
from ember.ops import pointwise as P
from ember.ops import shape as S


@pytest.fixture(autouse=True)
def _checked():
    prev = config.check_meta, config.check_fast_paths
    config.check_meta, config.check_fast_paths = True, True
    yield
    config.check_meta, config.check_fast_paths = prev


def _xs(grad: bool = True) -> tuple:
    a = ember.tensor([1.0, -2.0, 3.0], requires_grad=grad)
    return a, ember.tensor([0.5, 0.25, 2.0])


def test_fast_paths_run_under_check_meta() -> None:
    a, b = _xs()
    assert isinstance((a + b).grad_fn, SameShapeNode)      # fast_operator
    assert isinstance(a.sum().grad_fn, FullReduceNode)     # full_reduce
    assert expand_view(ember.tensor(2.0), (3,)) is not None
    config.check_fast_paths = False                        # the general path, asked for
    assert not isinstance((a + b).grad_fn, SameShapeNode)
    assert not isinstance(a.sum().grad_fn, FullReduceNode)
    assert expand_view(ember.tensor(2.0), (3,)) is None


def test_a_fast_path_with_a_wrong_dtype_fails_the_check() -> None:
    """A kernel of the small-array path that returns the wrong dtype: users would get it
    silently; under check_meta every fast path that runs it (``a + b``, ``add(a, b)``,
    ``a + b`` broadcast by NumPy) fails ``check_results``."""
    real = P.ADD._ufunc
    assert real is not None
    object.__setattr__(P.ADD, "_ufunc", lambda x, y: np.add(x, y).astype(np.float64))
    try:
        a, b = _xs(grad=False)
        config.check_meta = False
        assert (a + b).dtype == ember.float64   # the bug, unseen without the check
        config.check_meta = True
        with pytest.raises(AssertionError, match="add"):
            a + b                                    # fast_operator
        with pytest.raises(AssertionError, match="add"):
            ember.add(a, b)                          # binary -> _eager_pointwise
        with pytest.raises(AssertionError, match="add"):
            a + ember.tensor([[1.0], [2.0]])         # NumPy broadcasting (_numpy_broadcasts)
    finally:
        object.__setattr__(P.ADD, "_ufunc", real)


def test_the_broadcasting_ufunc_path_runs_and_is_checked(monkeypatch) -> None:
    seen = []
    real = _frontend.core._eager_pointwise

    def spy(op, x, y):  # noqa: ANN001, ANN202
        seen.append(op)
        return real(op, x, y)
    monkeypatch.setattr(_frontend.core, "_eager_pointwise", spy)
    a, _ = _xs(grad=False)
    out = a * ember.tensor([[1.0], [2.0]])
    assert seen == [P.MUL] and out.shape == (2, 3)
    np.testing.assert_array_equal(out.numpy(), [[1, -2, 3], [2, -4, 6]])


def test_the_check_reads_the_autograd_node() -> None:
    a, b = _xs()
    y = a * b                                        # _record2's node
    check_results(P.MUL, (a, b), {}, (y,))
    y.grad_fn.needs_input_grad = (True, True)        # what a wrong fast path could record
    with pytest.raises(AssertionError, match="mul"):
        check_results(P.MUL, (a, b), {}, (y,))
    z = (a + b).detach()                             # no node where one is due
    with pytest.raises(AssertionError, match="add"):
        check_results(P.ADD, (a, b), {}, (z,))


def test_the_expand_check_compares_the_geometry() -> None:
    x = ember.tensor(np.arange(3.0, dtype=np.float32))
    t = expand_view(x, (2, 3))
    _check_expand(x, (2, 3), t)
    t._data = np.broadcast_to(x._data[::-1], (2, 3))   # other memory, other strides
    with pytest.raises(AssertionError, match="expand"):
        _check_expand(x, (2, 3), t)
    with pytest.raises(AssertionError, match="expand"):
        check_results(S.EXPAND, (x,), {"shape": (3, 3)}, (t,))
