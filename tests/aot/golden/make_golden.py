"""Regenerate the golden AOT package (run only on purpose: the test that loads it guards that
packages built by earlier embers keep loading and running, from Python and from C).

    PYTHONPATH=$PWD python tests/aot/golden/make_golden.py

Built for the baseline ISA x86-64-v2 (loads on AVX2-only AMD and AVX-512 Intel hosts alike),
without the generated C (``aot_inductor.package_source``: False) to stay small.
"""

from pathlib import Path

import numpy as np

import ember
import ember.nn as nn
from ember.export import Dim, export

HERE = Path(__file__).parent
PATH = HERE / "golden_v1.pt2"


class Golden(nn.Module):
    """fc(x).relu() * scale + 1 with closed-form weights (a test checks them with NumPy)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.fc.weight.data = ember.tensor(weight())
        self.fc.bias.data = ember.tensor(bias())
        self.register_buffer("scale", ember.tensor(np.full(6, 0.5, np.float32)))

    def forward(self, x):
        return self.fc(x).relu() * self.scale + 1


def weight() -> np.ndarray:
    return (np.arange(24, dtype=np.float32).reshape(6, 4) - 11.5) / 10


def bias() -> np.ndarray:
    return np.linspace(-1, 1, 6, dtype=np.float32)


if __name__ == "__main__":
    x = ember.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4))
    ep = export(Golden().eval(), (x,), dynamic_shapes={"x": {0: Dim("batch", max=64)}})
    ember.aot.compile_and_package(ep, package_path=str(PATH), inductor_configs={
        "aot_inductor.march": "x86-64-v2", "aot_inductor.package_source": False,
        "aot_inductor.metadata": {"golden": "ember aot golden v1"}})
    print(PATH, PATH.stat().st_size, "bytes")
