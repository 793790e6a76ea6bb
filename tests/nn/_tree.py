"""The same small module tree built in ember and in PyTorch, for the nn.Module tests."""

from __future__ import annotations

from typing import Any

import numpy as np


def make_classes(lib: Any) -> dict:
    """Tiny Linear / Block / Net classes written against ``lib`` (ember or torch)."""
    nn = lib.nn

    class Linear(nn.Module):
        def __init__(self, i: int, o: int, bias: bool = True) -> None:
            super().__init__()
            self.in_features, self.out_features = i, o
            self.weight = nn.Parameter(lib.empty(o, i))
            if bias:
                self.bias = nn.Parameter(lib.empty(o))
            else:
                self.register_parameter("bias", None)

        def forward(self, x: Any) -> Any:
            return nn.functional.linear(x, self.weight, self.bias)

        def extra_repr(self) -> str:
            return (f"in_features={self.in_features}, out_features={self.out_features}, "
                    f"bias={self.bias is not None}")

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = Linear(4, 3)
            self.register_buffer("running", lib.zeros(3))
            self.register_buffer("scratch", lib.ones(2), persistent=False)

        def forward(self, x: Any) -> Any:
            return self.fc(x) + self.running

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = Block()
            self.head = Linear(3, 2, bias=False)
            self.steps = nn.Sequential(Linear(2, 2), Linear(2, 2))

        def forward(self, x: Any) -> Any:
            return self.steps(self.head(self.block(x)))

    return {"Linear": Linear, "Block": Block, "Net": Net}


def fill_deterministic(lib: Any, module: Any) -> None:
    """Gives every parameter and buffer the same values in both libraries."""
    with lib.no_grad():
        for i, (_, t) in enumerate(list(module.named_parameters())
                                   + list(module.named_buffers())):
            arr = np.linspace(-1, 1, t.numel()).reshape(tuple(t.shape)) * (i + 1) / 3
            t.copy_(lib.tensor(arr, dtype=t.dtype))


def to_np(t: Any) -> np.ndarray:
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)
