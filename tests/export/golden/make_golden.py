"""Regenerate the golden export archive (run only on purpose, when the format version changes:
the test that loads it guards that files written by earlier embers keep loading).

    PYTHONPATH=$PWD python tests/export/golden/make_golden.py
"""

from pathlib import Path

import numpy as np

import ember
import ember.nn as nn
from ember.export import Dim, export, save

HERE = Path(__file__).parent


class Golden(nn.Module):
    """fc(x).relu() * scale, viewed as (-1, 2); weights are closed-form so a test can check them
    with NumPy alone."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        w = (np.arange(24, dtype=np.float32).reshape(6, 4) - 11.5) / 10
        b = np.linspace(-1, 1, 6, dtype=np.float32)
        self.fc.weight.data = ember.tensor(w)
        self.fc.bias.data = ember.tensor(b)
        self.register_buffer("scale", ember.tensor(np.full(6, 0.5, np.float32)))

    def forward(self, x):
        return (self.fc(x).relu() * self.scale).view(-1, 2)


if __name__ == "__main__":
    x = ember.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4))
    ep = export(Golden(), (x,), dynamic_shapes={"x": {0: Dim("batch", max=64)}})
    save(ep, HERE / "golden_v1_0.ep.zip", extra_files={"README": "ember export golden v1.0"})
