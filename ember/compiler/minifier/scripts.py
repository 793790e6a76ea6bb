"""The text of ``minifier_launcher.py`` and ``repro.py``.

Both hold the graph as a ``build_graph(...)`` call (``serde.graph_source``) and import only
ember.  The launcher reads its inputs from ``minifier_inputs.safetensors`` next to it (a model's
weights can be large); ``repro.py`` carries its (small) inputs inside, base64-encoded
safetensors bytes, up to ``INLINE_BYTES``, so that it is one file to attach to a bug report.
"""

from __future__ import annotations

import base64
import textwrap
from typing import Any

from ember.compiler.frontend.graph import Graph
from ember.compiler.minifier.serde import PREAMBLE, graph_source, lit

LAUNCHER = "minifier_launcher.py"
INPUTS = "minifier_inputs.safetensors"
REPRO = "repro.py"
REPRO_INPUTS = "repro_inputs.safetensors"
INLINE_BYTES = 1 << 20


def _comment(text: str, limit: int = 40) -> str:
    lines = str(text).splitlines() or [""]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more lines)"]
    return "\n".join(("#   " + ln).rstrip() for ln in lines)


def _graph_comment(graph: Graph) -> str:
    return "\n".join(("# " + ln).rstrip() for ln in graph.python("repro_graph").splitlines())


def launcher_text(graph: Graph, scalars: list, kind: str, error: BaseException,
                  backend: Any, origin: str) -> str:
    """``minifier_launcher.py`` for a ``kind`` failure of ``graph`` (``origin``: who dumped)."""
    return f'''\
"""Written by ember's minifier (ember.compiler.minifier): {origin} failed on this
{len(graph)}-op graph (failure kind: {kind}).

    python {LAUNCHER}          shrink the graph; writes {REPRO} next to this file
    python {LAUNCHER} run      compile and run the whole graph once (exit 1: it still fails)

The inputs are in {INPUTS} next to this file.
"""
# the original error ({type(error).__name__}):
{_comment(f"{type(error).__name__}: {error}")}

import sys

from ember.compiler.minifier import launch
{PREAMBLE}
GRAPH = {graph_source(graph)}
SCALARS = {lit(list(scalars))}
KIND = {kind!r}
ERROR_TYPE = {type(error).__name__!r}
BACKEND = {backend!r}

if __name__ == "__main__":
    sys.exit(launch(GRAPH, __file__, {INPUTS!r}, SCALARS, KIND, ERROR_TYPE, BACKEND,
                    sys.argv[1:]))
'''


def repro_text(graph: Graph, inputs: bytes, scalars: list, kind: str, error: BaseException,
               backend: Any, original_ops: int) -> tuple[str, bytes | None]:
    """``repro.py`` (and the bytes of ``repro_inputs.safetensors`` when the inputs are too
    large to carry inside, else None)."""
    if len(inputs) <= INLINE_BYTES:
        b64 = base64.b64encode(inputs).decode()
        blob = "\n".join(f"    {part!r}" for part in textwrap.wrap(b64, 88)) or "    ''"
        load, side = f"base64.b64decode(\n{blob}\n)", None
    else:
        load = f"(Path(__file__).parent / {REPRO_INPUTS!r}).read_bytes()"
        side = inputs
    return f'''\
"""A repro written by ember's minifier: the C backend fails on this {len(graph)}-op graph
(cut down from {original_ops} ops); failure kind: {kind}.

{_comment(f"{type(error).__name__}: {error}", 12)}

Run `python {REPRO}`: it raises the error (compile, runtime) or prints the mismatch (accuracy)
and exits non-zero while the failure reproduces; it exits 0 once it is fixed.
"""
# the graph as ember code (each line one op of the registry):
{_graph_comment(graph)}

import base64
import sys
from pathlib import Path

from ember.compiler.minifier import reproduce
from ember.compiler.minifier.serde import inputs_from_bytes
{PREAMBLE}
GRAPH = {graph_source(graph)}
INPUTS = inputs_from_bytes({load}, {len(graph.inputs)})
SCALARS = {lit(list(scalars))}

if __name__ == "__main__":
    sys.exit(reproduce(GRAPH, INPUTS, SCALARS, kind={kind!r},
                       error_type={type(error).__name__!r}, backend={backend!r}))
''', side


__all__ = ["INPUTS", "LAUNCHER", "REPRO", "REPRO_INPUTS", "launcher_text", "repro_text"]
