"""PyTorch's ``torch._inductor`` AOT entry points, for ``import ember as torch`` deploy scripts
(the implementation is ``ember.aot``; docs/aot.md).

>>> path = ember._inductor.aoti_compile_and_package(ep)
>>> model = ember._inductor.aoti_load_package(path)
"""

from ember._inductor import config, package
from ember.aot import aot_compile, aoti_compile_and_package, aoti_load_package

__all__ = ["aot_compile", "aoti_compile_and_package", "aoti_load_package", "config", "package"]
