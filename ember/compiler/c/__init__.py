"""The C backend (ARCHITECTURE.md §5): ``ir/`` (loop IR, kernel kinds) <- ``lower/`` (rules
registered by OpDef) -> ``schedule.py`` (memory plan) -> ``codegen/`` (C source, templates in
``codegen/csrc/``) -> ``build/`` (toolchain and cache, runtime, BLAS, autotuning).
``backend.py`` is the driver the frontend reaches through the backend registry."""

from __future__ import annotations

from typing import Any, Callable

from ember.compiler.frontend.backends import register_backend, register_fallback_report


def _c(graph: Any, example_inputs: list, mode: str | None = None) -> Callable:
    from ember.compiler.c.backend import c_backend  # the C toolchain loads on first use
    from ember.compiler.minifier import wrap_backend  # checks only with EMBER_MINIFIER=1

    return wrap_backend(graph, example_inputs, lambda g, ex: c_backend(g, ex, mode))


_c.takes_mode = True  # type: ignore[attr-defined]  # ember.compile passes its mode
# the C backend is ember.compile's default, under PyTorch's name for its default ("inductor")
# and as "c"
register_backend(_c, "inductor")
register_backend(_c, "c")


def _fallbacks(graph: Any) -> list:
    from ember.compiler.c.backend import graph_fallbacks  # lowering only, no C compiler
    return graph_fallbacks(graph)


register_fallback_report(_fallbacks)
