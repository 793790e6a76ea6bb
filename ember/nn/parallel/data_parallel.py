"""``DataParallel`` on the CPU: a transparent wrapper, as PyTorch's when no GPU exists."""

from __future__ import annotations

from typing import Any, Sequence

from ember.nn.modules.module import Module


class DataParallel(Module):
    """Wrap ``module``; ``forward`` calls it (no devices to scatter to: ``device_ids`` is
    ``[]`` whatever was passed, as in PyTorch without GPUs).

    >>> dp = ember.nn.DataParallel(ember.nn.Linear(2, 2))
    >>> list(dp.state_dict())
    ['module.weight', 'module.bias']
    """

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None,
                 output_device: Any = None, dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.device_ids: list = []
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


def data_parallel(module: Module, inputs: Any, device_ids: Sequence[Any] | None = None,
                  output_device: Any = None, dim: int = 0,
                  module_kwargs: Any = None) -> Any:
    """Call ``module`` on ``inputs`` (no devices to spread the batch over)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
