"""``Parameter``: a Tensor that a ``Module`` registers as one of its learnable weights."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.errors import EmberTypeError
from ember.tensor import Tensor, _init

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A leaf Tensor that requires grad by default and that ``Module.__setattr__`` registers.

    >>> p = ember.nn.Parameter(ember.zeros(2))
    >>> p.requires_grad, p.is_leaf
    (True, True)

    It shares memory (and the version counter) with ``data``; ops on it return plain Tensors.
    """

    _is_param = True  # read by layers below nn (serialization) without importing nn

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            arr = np.empty((0,), dtype=_dt.get_default_dtype().np)
            data = Tensor._from_array(arr, _dt.get_default_dtype())
        if not isinstance(data, Tensor):
            raise EmberTypeError(
                f"[Parameter] data must be an ember.Tensor, got {type(data).__name__}"
            )
        p = object.__new__(cls)
        _init(p, data._data, data._dtype)
        p._version_counter = data._version_counter
        if requires_grad:
            p.requires_grad = True
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # everything happens in __new__ (Tensor.__init__ would rebuild the payload)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(Tensor._from_array(self._data.copy(), self._dtype),
                            self._requires_grad)
        if self.grad is not None:
            result.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol: int) -> Any:
        return (_rebuild_parameter,
                (np.ascontiguousarray(self._data), self._dtype.name, self._requires_grad))


def _rebuild_parameter(arr: np.ndarray, dtype_name: str, requires_grad: bool) -> Parameter:
    return Parameter(Tensor._from_array(arr, _dt.by_name(dtype_name)), requires_grad)
