"""The AOT side of the minifier (issue 16): when a package fails to build or a loaded package
fails to run, ``ember.compiler.minifier.maybe_dump`` (written separately, in
``ember/compiler/minifier*``) gets the chance to write ``minifier_launcher.py`` (it decides
from ``EMBER_MINIFIER`` and ``inductor_configs["aot_inductor.dump_minifier"]``).  Without that
module this does nothing; a failing hook only warns, so the original error is what the user
sees."""

from __future__ import annotations

import warnings
from typing import Any


def dump_for_minifier(stage: str, *, program: Any = None, package: str | None = None,
                      model_name: str | None = None, configs: dict | None = None,
                      error: BaseException | None = None) -> None:
    """``stage``: "aot_compile" (building the package failed: a "compile" failure for the
    minifier) or "aot_run" (a loaded package failed: a "runtime" failure); ``program`` the
    ExportedProgram when at hand, else it is read back from ``package``/``model_name``.  The
    launcher gets the program's graph as the compiler's (``to_compiler_graph``) with its
    weights and example inputs, and rebuilds candidates with the C backend."""
    try:
        from ember.compiler import minifier

        if error is None or not minifier.enabled(configs):
            return
        if program is None:
            from ember.aot._reexport import load_exported_program
            program = load_exported_program(package, model_name or "model")
        graph, _, examples = _graph_and_inputs(program)
        minifier.maybe_dump(graph, examples, error,
                            kind="compile" if stage == "aot_compile" else "runtime",
                            configs=dict(configs or {}), origin=f"AOT packaging ({stage})")
    except Exception as e:  # noqa: BLE001 - the user's own error matters more
        warnings.warn(f"[aot] the minifier hook failed ({type(e).__name__}: {e})",
                      RuntimeWarning, stacklevel=3)


def _graph_and_inputs(ep: Any) -> tuple:
    """The compiler graph of ``ep`` and its inputs: parameters, buffers and constants with
    their values, user inputs from ``ep.example_inputs`` (zeros of the hinted shapes where
    there are none)."""
    import numpy as np

    from ember.export._compile import to_compiler_graph

    graph, exprs, zeros = to_compiler_graph(ep)
    args = list(ep.example_inputs[0]) if getattr(ep, "example_inputs", None) else []
    tensors = [a for a in args if hasattr(a, "numpy")]
    values, user = [], 0
    for spec, z in zip(ep.graph_signature.input_specs, zeros):
        kind = getattr(spec.kind, "name", str(spec.kind))
        v = None
        if kind in ("PARAMETER", "BUFFER"):
            v = ep.state_dict.get(spec.target)
        elif kind in ("CONSTANT_TENSOR", "CUSTOM_OBJ"):
            v = ep.constants.get(spec.target)
        elif kind == "USER_INPUT":
            v = tensors[user] if user < len(tensors) else None
            user += 1
        a = np.asarray(v.detach().numpy()) if v is not None and hasattr(v, "numpy") else z
        values.append(a if a.shape == z.shape and a.dtype == z.dtype else z)
    return graph, exprs, values
