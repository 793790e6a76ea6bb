"""setuptools support: ``CppExtension`` and ``BuildExtension`` (PyTorch's names) for a package
that ships a stable-ABI extension.  The built library is loaded with
``ember.utils.cpp_extension.load_library(path)``."""

from __future__ import annotations

from typing import Any

from ember.utils.cpp_extension._build import CXX_FLAGS
from ember.utils.cpp_extension._host import INCLUDE


def CppExtension(name: str, sources: list[str], *args: Any, **kwargs: Any) -> Any:  # noqa: N802
    """A ``setuptools.Extension`` with ember's stable headers on the include path and C++17.

    >>> ext = CppExtension("myext._C", ["myext.cpp"])    # doctest: +SKIP
    >>> setup(name="myext", ext_modules=[ext], cmdclass={"build_ext": BuildExtension})
    ... # doctest: +SKIP
    """
    from setuptools import Extension
    kwargs["include_dirs"] = [*kwargs.get("include_dirs", []), str(INCLUDE)]
    kwargs.setdefault("language", "c++")
    return Extension(name, sources, *args, **kwargs)


try:  # setuptools is needed only to build packages, not to load extensions
    from setuptools.command.build_ext import build_ext as _build_ext
except ImportError:  # pragma: no cover
    _build_ext = object


class BuildExtension(_build_ext):  # type: ignore[misc, valid-type]
    """setuptools ``build_ext`` for stable-ABI extensions (``cmdclass={"build_ext":
    BuildExtension}``): C++ sources compile as C++17, C sources as C11, and no ``PyInit_``
    function is required (a stable-ABI extension is no Python module)."""

    @classmethod
    def with_options(cls, **options: Any) -> type:
        """A subclass whose constructor gets ``options`` (PyTorch's ``with_options``)."""
        class WithOptions(cls):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                kwargs.update(options)
                super().__init__(*args, **kwargs)
        return WithOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("no_python_abi_suffix", None)
        kwargs.pop("use_ninja", None)
        super().__init__(*args, **kwargs)

    def build_extensions(self) -> None:
        compile_one = self.compiler._compile

        def compile_(obj: str, src: str, ext: str, cc_args: list, extra: list,
                     pp_opts: list) -> None:
            cxx = src.endswith((".cpp", ".cc", ".cxx"))
            compile_one(obj, src, ext, cc_args, [*(CXX_FLAGS if cxx else ()), *extra], pp_opts)
        self.compiler._compile = compile_
        super().build_extensions()

    def get_export_symbols(self, ext: Any) -> list:
        return list(ext.export_symbols)


__all__ = ["BuildExtension", "CppExtension"]
