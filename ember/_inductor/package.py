"""``torch._inductor.package``: several models in one archive.

>>> files = ember._inductor.aot_compile(ep, options={"aot_inductor.package": True})
>>> ember._inductor.package.package_aoti("pkg.pt2", {"model1": files})
>>> m = ember._inductor.package.load_package("pkg.pt2", "model1")
"""

from typing import Any

from ember.aot import AOTIModel, package_aoti
from ember.aot import load_package as _load

AOTICompiledModel = AOTIModel


def load_package(path: Any, model_name: str = "model", run_single_threaded: bool = False,
                 num_runners: int = 1, device_index: int = -1) -> AOTIModel:
    """Load model ``model_name`` of a package (a path or a binary file object); ``num_runners``
    and ``device_index`` are accepted for PyTorch's signature (a loaded model is stateless
    between calls, on the CPU).

    >>> m = ember._inductor.package.load_package("pkg.pt2", "enc")
    """
    return _load(path, model_name, run_single_threaded)

__all__ = ["AOTICompiledModel", "load_package", "package_aoti"]
