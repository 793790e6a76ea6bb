"""``ember.utils.cpp_extension``: build and load C/C++ extensions written against ember's
stable C ABI (``ember/include/ember/stable/``), PyTorch's ``torch.utils.cpp_extension`` names.

An extension defines ops with ``EMBER_STABLE_LIBRARY(ns, m)`` and boxed kernels with
``EMBER_STABLE_LIBRARY_IMPL(ns, CPU, m)``; loading it registers the ops as custom ops
``ember.ops.<ns>.<name>`` (eager, ``ember.compile`` as an extern, ``ember.export``).  The
extension links only against the stable C ABI (the ``ember_stable_*`` functions of a small C
library ember builds on first use), never against Python, so one binary keeps loading on later
embers.  See docs/extensions.md.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

from ember.utils.cpp_extension import _build
from ember.utils.cpp_extension._host import INCLUDE, abi_version
from ember.utils.cpp_extension._ops import StableKernel, check_abi
from ember.utils.cpp_extension._ops import load_library as _load_library
from ember.utils.cpp_extension._setup import BuildExtension, CppExtension

_MODULES: dict[str, ExtensionModule] = {}
_LOADING = threading.RLock()  # one load at a time: a library is loaded and registered once

class ExtensionModule:
    """What ``load`` returns: the extension's ops as attributes that call the boxed kernel
    directly (no custom-op dispatch: no autograd recording, no tracing); the same ops through
    ember's dispatch are ``ember.ops.<ns>.<name>``."""

    def __init__(self, name: str, path: Path, ops: list[str], expose: Sequence[str] | None
                 ) -> None:
        from ember.library._custom_op import PACKETS
        self.__name__, self.__file__, self.ops = name, str(path), ops
        for qual in ops:
            op = qual.split("::")[1]
            if expose is not None and op not in expose:
                continue
            kernel = PACKETS[qual]._kernel()
            # the kernel's C fast path (positional arguments): the shortest path to the kernel
            sk = getattr(kernel, "stable_kernel", None)
            setattr(self, op, kernel if sk is None else sk.fast_function())

    def __repr__(self) -> str:
        return f"<ember extension {self.__name__!r} from {self.__file__!r}: {self.ops}>"

def include_paths(device_type: str = "cpu") -> list[str]:
    """The include directories an extension needs (``ember/include``)."""
    return [str(INCLUDE)]

def load_library(path: str | Path) -> list[str]:
    """Load a built extension (``torch.ops.load_library``'s job) and register its ops;
    returns their names.  Refuses an extension built for a newer stable ABI than this ember's.

    >>> load_library("prebuilt/ember_stable_v1_demo.so")    # doctest: +SKIP
    ['stable_v1::scale_add', ...]
    """
    path = Path(path).resolve()
    key = str(path)
    with _LOADING:
        if key not in _MODULES:
            _MODULES[key] = ExtensionModule(path.stem, path, _load_library(path), None)
        return list(_MODULES[key].ops)

def load(name: str, sources: str | Sequence[str], extra_cflags: Sequence[str] | None = None,
         extra_cuda_cflags: Sequence[str] | None = None,
         extra_ldflags: Sequence[str] | None = None,
         extra_include_paths: Sequence[str] | None = None,
         build_directory: str | None = None, verbose: bool = False,
         with_cuda: bool | None = None, is_python_module: bool = True,
         is_standalone: bool = False, keep_intermediates: bool = True,
         functions: Sequence[str] | None = None) -> ExtensionModule | None:
    """Compile ``sources`` with the system compiler (cached by content), load the library and
    register its ops; returns an ``ExtensionModule`` (``None`` when
    ``is_python_module=False``, as PyTorch).

    >>> ext = load("myext", ["myext.cpp"], extra_cflags=["-O3"])    # doctest: +SKIP
    >>> ember.ops.myext.mul_scalar(x, 2.0)                           # doctest: +SKIP
    """
    if with_cuda:
        from ember.errors import DeviceUnavailableError
        raise DeviceUnavailableError("[cpp_extension.load] with_cuda=True: ember has no CUDA")
    srcs = [sources] if isinstance(sources, str) else list(sources)
    so = _build.build(name, srcs, extra_cflags=extra_cflags or (),
                      extra_ldflags=extra_ldflags or (),
                      extra_include_paths=extra_include_paths or (),
                      build_directory=build_directory, verbose=verbose)
    key = str(so.resolve())
    with _LOADING:
        if key not in _MODULES:
            ops = _load_library(so, name)
            _MODULES[key] = ExtensionModule(name, so, ops, functions)
            if verbose:
                print(f"[cpp_extension] loaded {name} ({so}): {', '.join(ops)}")
    return _MODULES[key] if is_python_module else None

def load_inline(name: str, cpp_sources: str | Sequence[str],
                cuda_sources: str | Sequence[str] | None = None,
                functions: str | Sequence[str] | dict | None = None,
                extra_cflags: Sequence[str] | None = None,
                extra_ldflags: Sequence[str] | None = None,
                extra_include_paths: Sequence[str] | None = None,
                build_directory: str | None = None, verbose: bool = False,
                with_cuda: bool | None = None, is_python_module: bool = True,
                with_pytorch_error_handling: bool = True, keep_intermediates: bool = True,
                use_pch: bool = False) -> ExtensionModule | None:
    """``load`` from source strings: ``cpp_sources`` are joined into ``main.cpp`` (with the
    stable headers included first).  ``functions`` names the ops (from ``m.def``) to put on the
    returned module (all when omitted; a dict's keys are the names).

    >>> ext = load_inline("myext", SRC, functions=["mul_scalar"])    # doctest: +SKIP
    >>> ext.mul_scalar(ember.ones(3), 2.0)                          # doctest: +SKIP
    """
    if cuda_sources:
        from ember.errors import DeviceUnavailableError
        raise DeviceUnavailableError("[cpp_extension.load_inline] cuda_sources: ember has no "
                                     "CUDA")
    texts = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources)
    header = ("#include <ember/stable/library.h>\n#include <ember/stable/ops.h>\n"
              "#include <ember/stable/accelerator.h>\n")
    folder = Path(build_directory) if build_directory else _build.build_directory(name)
    folder.mkdir(parents=True, exist_ok=True)
    text = header + "\n".join(texts) + "\n"
    main = folder / "main.cpp"
    if not main.exists() or main.read_text() != text:
        main.write_text(text)
    if isinstance(functions, str):
        functions = [functions]
    expose = list(functions) if functions is not None else None
    return load(name, [str(main)], extra_cflags=extra_cflags, extra_ldflags=extra_ldflags,
                extra_include_paths=extra_include_paths, build_directory=str(folder),
                verbose=verbose, is_python_module=is_python_module, functions=expose)

__all__ = ["BuildExtension", "CppExtension", "ExtensionModule", "StableKernel", "abi_version",
           "check_abi", "include_paths", "load", "load_inline", "load_library"]

