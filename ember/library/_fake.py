"""Running a fake impl: ember ops on tensors that carry a shape and a dtype but no data.

``FakeMode`` is a recorder in ``ember.tensor.bind``'s sense (like export's tracer, without a
graph): every op a fake impl calls runs only its ``meta``.  ``get_ctx().new_dynamic_size()``
makes an unbacked ``SymInt`` (``ember.sym``) for a data-dependent output size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import _lazy
from ember.errors import EmberRuntimeError
from ember.sym import ShapeEnv, SymInt, _env_of, is_symbolic
from ember.tensor import Tensor, _wrap


class _Flags:
    writeable = True
    c_contiguous = True
    f_contiguous = False
    owndata = True


class FakePayload:
    """A tensor payload with only ``shape`` and ``dtype``; reading values is an error."""

    __slots__ = ("shape", "dtype", "__weakref__")
    flags = _Flags()
    base = None

    def __init__(self, shape: tuple, np_dtype: Any) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(np_dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> Any:
        n: Any = 1
        for s in self.shape:
            n = n * s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        out, acc = [], self.dtype.itemsize
        for n in reversed(self.shape):
            out.append(acc)
            acc = acc * n
        return tuple(reversed(out))

    def _no_data(self, *a: Any, **k: Any) -> Any:
        raise EmberRuntimeError("[fake impl] a fake impl cannot read tensor data (it runs on "
                                "tensors with shapes and dtypes only); compute only metadata")

    __array__ = __getitem__ = __setitem__ = __float__ = __int__ = __bool__ = _no_data
    tolist = item = copy = astype = reshape = _no_data


def fake_tensor(shape: tuple, dtype: Any) -> Tensor:
    """A tensor with a ``FakePayload``."""
    return _wrap(FakePayload(shape, dtype.np), dtype)


class FakeImplCtx:
    """``get_ctx()`` inside a fake impl (PyTorch's ``FakeImplCtx``)."""

    def __init__(self, env: ShapeEnv) -> None:
        self._env = env
        self.created: list[SymInt] = []

    def new_dynamic_size(self, *, min: int = 0, max: int | None = None) -> SymInt:
        """A fresh size whose value is known only when the real kernel runs.

        >>> n = ctx.new_dynamic_size()       # inside a fake impl  # doctest: +SKIP
        >>> x.new_empty(n, 2)                                      # doctest: +SKIP
        """
        if min < 0:
            raise EmberRuntimeError(f"[new_dynamic_size] min must be >= 0, got {min}")
        s = self._env.create_unbacked_symint(min=min, max=max)
        self.created.append(s)
        return s

    new_data_dependent_symint = new_dynamic_size


_CTX: list[FakeImplCtx] = []


def get_ctx() -> FakeImplCtx:
    """The context of the running fake impl (``new_dynamic_size``)."""
    if not _CTX:
        raise EmberRuntimeError("[get_ctx] torch.library.get_ctx() called outside of a fake "
                                "impl (register_fake)")
    return _CTX[-1]


class FakeMode:
    """Installs itself as the active recorder; ``bind`` runs only ``meta``."""

    owner = None  # the recorder interface: no compiled function owns these tensors

    def __init__(self, shapes: list[tuple]) -> None:
        env = _env_of(*[d for s in shapes for d in s])
        self.ctx = FakeImplCtx(env if env is not None else ShapeEnv())

    def bind(self, op: Any, inputs: tuple, params: dict) -> Any:
        spec = op.meta(*inputs, **params)
        specs = (spec,) if op.num_outputs == 1 else tuple(spec)
        outs = tuple(fake_tensor(tuple(self.ctx.new_dynamic_size() if d is None else d
                                       for d in s), dt) for s, dt in specs)
        return outs[0] if op.num_outputs == 1 else outs

    def graph_break(self, reason: str) -> None:
        raise EmberRuntimeError(f"[fake impl] {reason}: a fake impl may compute only shapes "
                                "and dtypes")

    def register_tensor(self, t: Any) -> None:
        pass

    def write(self, t: Tensor, new: Tensor) -> bool:
        t._data = FakePayload(tuple(new.shape), new._dtype.np)
        return True

    def __enter__(self) -> FakeImplCtx:
        self._saved = _lazy.STATE.trace
        _lazy.STATE.trace = self  # type: ignore[assignment]
        _CTX.append(self.ctx)
        return self.ctx

    def __exit__(self, *exc: Any) -> None:
        _lazy.STATE.trace = self._saved
        _CTX.pop()

    def size_of(self, d: Any) -> Any:
        """A dim as ``meta`` reports it: None where it depends on the data."""
        if is_symbolic(d):
            made = {s.expr for s in self.ctx.created}
            if made & set(getattr(d.expr, "free_symbols", ())):
                return None
        return d


__all__ = ["FakeImplCtx", "FakeMode", "FakePayload", "fake_tensor", "get_ctx"]
