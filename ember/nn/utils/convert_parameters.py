"""Flattening parameters to one vector and back."""

from __future__ import annotations

from typing import Iterable

from ember.nn.modules._hooks import typename
from ember.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All ``parameters`` flattened and concatenated into one 1-d tensor (differentiable)."""
    from ember import cat
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copies consecutive slices of ``vec`` into ``parameters`` (their ``.data``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected ember.Tensor, but got: {typename(vec)}")
    pointer = 0
    for param in parameters:
        num = param.numel()
        param.data = vec[pointer:pointer + num].view_as(param).data
        pointer += num
