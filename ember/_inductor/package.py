"""``torch._inductor.package``: several models in one archive.

>>> files = ember._inductor.aot_compile(ep, options={"aot_inductor.package": True})
>>> ember._inductor.package.package_aoti("pkg.pt2", {"model1": files})
>>> m = ember._inductor.package.load_package("pkg.pt2", "model1")
"""

from ember.aot import AOTIModel, load_package, package_aoti

AOTICompiledModel = AOTIModel

__all__ = ["AOTICompiledModel", "load_package", "package_aoti"]
