"""Build mlp.pt2 for app.c: a small MLP (8 -> 16 -> 4, GELU) exported with a dynamic batch.

    python examples/aot_c/build_package.py [OUT.pt2]
"""

import sys

import ember
import ember.nn as nn
from ember.export import Dim, export


def make_model() -> nn.Module:
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).eval()


def build(path: str) -> str:
    ep = export(make_model(), (ember.randn(2, 8),), dynamic_shapes=({0: Dim("batch")},))
    return ember.aot.compile_and_package(
        ep, package_path=path, inductor_configs={"aot_inductor.metadata": {"example": "mlp"}})


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "mlp.pt2"))
