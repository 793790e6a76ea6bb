"""Regenerate the golden runtime-ABI-2 package (run only on purpose: the test that loads it
guards that packages with a buffer the model updates in place, built by this ember, keep
loading and running on later ones, from Python and from C).

    PYTHONPATH=$PWD python tests/aot/golden/make_golden_v2.py

Same weights and build options as ``make_golden.py`` (x86-64-v2, no generated C).
"""

from pathlib import Path

import numpy as np

import ember
import ember.nn as nn
from ember.export import Dim, export

HERE = Path(__file__).parent
PATH = HERE / "golden_v2_mutable.pt2"


class GoldenV2(nn.Module):
    """Counts its calls in a buffer: call k returns fc(x).relu() * k + 1."""

    def __init__(self) -> None:
        super().__init__()
        import sys
        sys.path.insert(0, str(HERE))
        from make_golden import bias, weight
        sys.path.remove(str(HERE))
        self.fc = nn.Linear(4, 6)
        self.fc.weight.data = ember.tensor(weight())
        self.fc.bias.data = ember.tensor(bias())
        self.register_buffer("calls", ember.zeros(1))

    def forward(self, x):
        self.calls.add_(1)
        return self.fc(x).relu() * self.calls + 1


if __name__ == "__main__":
    x = ember.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4))
    ep = export(GoldenV2().eval(), (x,), dynamic_shapes={"x": {0: Dim("batch", max=64)}})
    ember.aot.compile_and_package(ep, package_path=str(PATH), inductor_configs={
        "aot_inductor.march": "x86-64-v2", "aot_inductor.package_source": False,
        "aot_inductor.metadata": {"golden": "ember aot golden v2 (mutable buffer)"}})
    print(PATH, PATH.stat().st_size, "bytes")
