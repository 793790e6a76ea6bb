"""Ahead-of-time packages (ARCHITECTURE.md §6, docs/aot.md): compile an ``ExportedProgram``
to a .pt2 package (generated C, the built library, weights, metadata), load it without a
compiler, or run it from C without Python (``ember/include/ember/aot/runner.h``).

>>> path = ember.aot.compile_and_package(ep, package_path="model.pt2")
>>> model = ember.aot.load_package(path)
>>> y = model(x)                     # same outputs as ep.module()(x)
"""

from __future__ import annotations

import os
from typing import Any

from ember.aot._archive import PackageError
from ember.aot._codegen import INCLUDE_DIR, ModelSourceError
from ember.aot._loader import AOTIModel, IncompatiblePackageError, load_package
from ember.aot._package import aot_compile, compile_and_package, package_aoti


def aoti_compile_and_package(exported_program: Any, _deprecated_unused_args: Any = None,
                             _deprecated_unused_kwargs: Any = None, *, package_path: Any = None,
                             inductor_configs: dict | None = None) -> str:
    """PyTorch's name for ``compile_and_package`` (the two deprecated positional arguments
    are ignored, as PyTorch does).

    >>> path = ember._inductor.aoti_compile_and_package(ep)
    """
    return compile_and_package(exported_program, package_path=package_path,
                               inductor_configs=inductor_configs)


def aoti_load_package(path: Any, run_single_threaded: bool = False,
                      device_index: int = -1) -> AOTIModel:
    """PyTorch's name for ``load_package(path, "model")``.

    >>> model = ember._inductor.aoti_load_package("model.pt2")
    """
    return load_package(path, "model", run_single_threaded)


def include_dir() -> str:
    """The directory to pass with ``-I`` to compile against ``<ember/aot/runner.h>``."""
    return os.fspath(INCLUDE_DIR)


def lib_dir() -> str:
    """The directory holding ``libember_aot.so`` (built on first use with the system C
    compiler and cached)."""
    from ember.aot._clib import build_runtime_library
    return os.fspath(build_runtime_library().parent)


def load_exported_program(path: Any, model_name: str = "model") -> Any:
    """The ``ExportedProgram`` a package was built from (re-export it, or compile it again).

    >>> ep = ember.aot.load_exported_program("model.pt2")
    """
    from ember.aot._reexport import load_exported_program as _load
    return _load(path, model_name)


__all__ = ["AOTIModel", "IncompatiblePackageError", "ModelSourceError", "PackageError",
           "aot_compile", "aoti_compile_and_package", "aoti_load_package", "compile_and_package",
           "include_dir", "lib_dir", "load_exported_program", "load_package", "package_aoti"]
