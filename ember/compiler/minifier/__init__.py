"""The minifier: shrink a graph the C backend fails on to a small repro (PyTorch's
``repro_after`` / AOTInductor minifier, reference §6.2; docs/minifier.md).

Switched on by ``EMBER_MINIFIER=1`` (read at each compile), ``ember.compiler.config.repro_after
= "dynamo"`` (or ``"aot"``), or, for AOT packages, ``inductor_configs={"aot_inductor.
dump_minifier": True}``.  When the C backend then fails on a graph of ``ember.compile`` (a
compile error, a runtime error, or a result that differs from the eager backend's),
``minifier_launcher.py`` is written to EMBER_MINIFIER_DIR (default ``./minifier``) with the
graph and its inputs, and the original error is raised.  ``python minifier_launcher.py``
delta-debugs the graph (``shrink.py``) and writes ``repro.py``, a self-contained script that
fails the same way.

Example::

    $ EMBER_MINIFIER=1 python train.py          # fails; writes minifier/minifier_launcher.py
    $ python minifier/minifier_launcher.py      # writes minifier/repro.py (a few ops)
    $ python minifier/repro.py                  # raises the same error (exit 1)

``maybe_dump`` is the hook for other drivers (AOT packaging): call it with the failing graph,
its inputs and the error, then re-raise.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ember.compiler.frontend.graph import Graph, Sym
from ember.compiler.frontend.stance import compiler_config
from ember.compiler.minifier import scripts
from ember.compiler.minifier.check import (
    KINDS,
    AccuracyError,
    Failure,
    accuracy_failure,
    failure_of,
    is_suppressed,
    run_compiled,
    runtime_failure,
)
from ember.compiler.minifier.serde import inputs_bytes, inputs_from_bytes
from ember.compiler.minifier.shrink import shrink
from ember.config import minifier_env
from ember.errors import EmberValueError

_LEVEL_OF_KIND = {"compile": 1, "runtime": 2, "accuracy": 4}
_LAST_DUMP: list = [None]  # what the last launcher written in this process was about
_DUMP_KEYS = ("aot_inductor.dump_minifier", "aot_inductor.dump_aoti_minifier")


def enabled(configs: dict | None = None) -> bool:
    """Whether a failure dumps a launcher: EMBER_MINIFIER=1, ``ember.compiler.config.repro_after``
    set, or one of ``configs``' ``aot_inductor.dump_minifier`` / ``dump_aoti_minifier`` true."""
    if is_suppressed():
        return False
    if configs and any(configs.get(k) for k in _DUMP_KEYS):
        return True
    return minifier_env().get("EMBER_MINIFIER", "") not in ("", "0") or \
        compiler_config.repro_after is not None


def repro_level(configs: dict | None = None) -> int:
    """Which failures dump (PyTorch's ``repro_level`` numbers): 1 compile errors, 2 (and 3)
    also runtime errors, 4 also accuracy against eager (ember's default: a minifier that is on
    is there to find a failure; 4 runs every compiled call eagerly too)."""
    if configs and configs.get("aot_inductor.repro_level") is not None:
        return int(configs["aot_inductor.repro_level"])
    if compiler_config.repro_level is not None:
        return int(compiler_config.repro_level)
    env = minifier_env().get("EMBER_REPRO_LEVEL", "")
    return int(env) if env.strip().isdigit() else 4


def minifier_dir() -> Path:
    """Where launchers go: EMBER_MINIFIER_DIR, else ``./minifier``."""
    return Path(minifier_env().get("EMBER_MINIFIER_DIR", "") or "minifier").absolute()


def _arrays(example_inputs: list) -> list:
    return [np.asarray(getattr(a, "_data", a)) for a in example_inputs]


def _scalars_from_shapes(graph: Graph, arrays: list) -> list:
    """Lifted numbers recovered from where they appear in the inputs' shapes (1 otherwise)."""
    out: list = [1] * graph.num_scalars
    for (shape, _), a in zip(graph.inputs, arrays):
        for s, n in zip(shape, np.shape(a)):
            if type(s) is Sym:
                out[s.index] = int(n)
    return out


def maybe_dump(graph: Graph, example_inputs: list, error: BaseException, *, kind: str,
               configs: dict | None = None, scalars: list | None = None, backend: Any = "c",
               origin: str = "the C backend") -> Path | None:
    """Write ``minifier_launcher.py`` for ``graph`` failing with ``error`` when the minifier is
    on (``enabled(configs)``) and ``kind`` (``"compile"``, ``"runtime"``, ``"accuracy"``) is
    within ``repro_level``; returns its path, else None.  Never raises: a graph it cannot
    write (a custom op, an opaque parameter) gives a warning.  The caller re-raises ``error``.

    ``example_inputs``: the graph's tensor inputs (ember tensors or arrays); ``scalars``: its
    lifted numbers (default: sizes read from the inputs' shapes); ``backend``: what the
    launcher compiles candidates with, a registered name or ``"module:function"`` taking
    ``(graph, example_inputs)`` like a backend.

    >>> try:                                                     # doctest: +SKIP
    ...     lib = build(graph)
    ... except Exception as e:
    ...     minifier.maybe_dump(graph, inputs, e, kind="compile", configs=inductor_configs)
    ...     raise
    """
    if kind not in KINDS:
        raise EmberValueError(f"[minifier] kind={kind!r}; expected one of {KINDS}")
    if not enabled(configs) or _LEVEL_OF_KIND[kind] > repro_level(configs):
        return None
    try:
        where = minifier_dir()
        key = (kind, type(error).__name__, graph.python(), str(where))
        if _LAST_DUMP[0] == key and (where / scripts.LAUNCHER).exists():
            # after the user's exception the frontend realizes the trace once more (what
            # ran before the exception keeps its effects): the same graph fails again
            return where / scripts.LAUNCHER
        arrays = _arrays(example_inputs)
        if scalars is None:
            scalars = _scalars_from_shapes(graph, arrays)
        text = scripts.launcher_text(graph, list(scalars), kind, error, backend, origin)
        where.mkdir(parents=True, exist_ok=True)
        (where / scripts.INPUTS).write_bytes(inputs_bytes(arrays))
        path = where / scripts.LAUNCHER
        path.write_text(text)
        _LAST_DUMP[0] = key
    except Exception as e:  # noqa: BLE001 - the original error matters more than this one
        warnings.warn(f"[minifier] could not write a launcher for the {kind} failure: "
                      f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)
        return None
    print(f"[ember.minifier] {kind} failure ({type(error).__name__}) of a {len(graph)}-op "
          f"graph: wrote {path}; run `python {path}` to shrink it to {scripts.REPRO}",
          file=sys.stderr)
    return path


def check_outputs(graph: Graph, arrays: list, scalars: list, outs: list, *,
                  configs: dict | None = None, backend: Any = "c",
                  origin: str = "the C backend") -> None:
    """With the minifier on at ``repro_level`` 4: compare a compiled run's ``outs`` with eager
    on the same ``arrays`` (taken before the run) and, if they differ, dump a launcher and
    raise ``AccuracyError``.  AOT packaging can call it after running a loaded package.

    >>> outs = package_model_run(arrays)                          # doctest: +SKIP
    >>> minifier.check_outputs(graph, arrays, [], outs, configs=inductor_configs)
    """
    if not enabled(configs) or repro_level(configs) < 4:
        return
    f = accuracy_failure(graph, arrays, list(scalars), list(outs))
    if f is not None:
        maybe_dump(graph, arrays, f.error, kind="accuracy", configs=configs,
                   scalars=list(scalars), backend=backend, origin=origin)
        raise f.error


class _Checked:
    """A compiled graph whose calls are checked: a runtime error eager does not share, or (at
    ``repro_level`` 4) a result that differs from eager's, dumps a launcher and raises."""

    _ember_arrays = True

    def __init__(self, fn: Callable, graph: Graph, configs: dict | None) -> None:
        self.fn, self.graph, self.configs = fn, graph, configs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)

    def __call__(self, arrays: list, scalars: list = ()) -> list:
        before = getattr(self.fn, "entry_errors", 0)
        # the inputs as they are now: a compiled call may write into them (donated buffers)
        saved = [np.array(a, copy=True) for a in arrays]
        try:
            outs = run_compiled(self.fn, arrays, list(scalars))
        except Exception as e:
            f = runtime_failure(self.graph, saved, list(scalars), e)
            if f is not None:
                self._dump(f, saved, scalars)
            raise
        if getattr(self.fn, "entry_errors", 0) > before:  # the C backend hid it: eager ran
            e = self.fn.last_entry_error
            self._dump(Failure("runtime", type(e).__name__, e), saved, scalars)
            raise e
        if repro_level(self.configs) >= 4:
            f = accuracy_failure(self.graph, saved, list(scalars), outs)
            if f is not None:
                self._dump(f, saved, scalars)
                raise f.error
        return outs

    def _dump(self, f: Failure, arrays: list, scalars: list) -> None:
        maybe_dump(self.graph, arrays, f.error, kind=f.kind, configs=self.configs,
                   scalars=list(scalars))


def wrap_backend(graph: Graph, example_inputs: list, compile_fn: Callable,
                 configs: dict | None = None) -> Callable:
    """``compile_fn(graph, example_inputs)`` with the minifier's checks when it is on (the C
    backend calls this): a compile error dumps a launcher and is raised; the compiled
    function's calls are checked (``_Checked``)."""
    if not enabled(configs):
        return compile_fn(graph, example_inputs)
    try:
        fn = compile_fn(graph, example_inputs)
    except Exception as e:
        maybe_dump(graph, example_inputs, e, kind="compile", configs=configs)
        raise
    if repro_level(configs) < 2:
        return fn
    return _Checked(fn, graph, configs)


# ------------------------------------------------------------------------------ the scripts
def _say(message: str) -> None:
    print(f"[ember.minifier] {message}", file=sys.stderr)


def launch(graph: Graph, launcher: str, inputs_name: str, scalars: list, kind: str,
           error_type: str, backend: Any, argv: list) -> int:
    """``minifier_launcher.py``'s body: ``argv`` ``[]``/``["minify"]`` shrinks the graph and
    writes ``repro.py`` next to the launcher (0 when written); ``["run"]`` runs it once (1 while
    it fails the same way)."""
    here = Path(launcher).absolute().parent
    arrays = inputs_from_bytes((here / inputs_name).read_bytes(), len(graph.inputs))
    level = _LEVEL_OF_KIND[kind]
    first = failure_of(graph, arrays, scalars, backend, level)
    if first is None or not first.matches(kind, error_type):
        got = "no failure" if first is None else f"a {first.kind} failure ({first.error_type})"
        _say(f"the graph gives {got}, not the {kind} failure ({error_type}) it was dumped "
             f"for: nothing to minify")
        return 2
    if argv[:1] == ["run"]:
        _say(f"{kind} failure reproduced: {first.error_type}: {str(first.error)[:500]}")
        return 1

    def fails(g: Graph, arrs: list) -> bool:
        f = failure_of(g, arrs, scalars, backend, level)
        return f is not None and f.matches(kind, error_type)

    _say(f"shrinking a {len(graph)}-op graph ({kind} failure, {error_type})")
    small, small_arrays = shrink(graph, arrays, scalars, fails, log=_say)
    last = failure_of(small, small_arrays, scalars, backend, level)
    text, side = scripts.repro_text(small, inputs_bytes(small_arrays), scalars, kind,
                                    last.error if last is not None else first.error, backend,
                                    len(graph))
    path = here / scripts.REPRO
    path.write_text(text)
    if side is not None:
        (here / scripts.REPRO_INPUTS).write_bytes(side)
    _say(f"wrote {path}: {len(small)} ops ({', '.join(small.ops())}), from {len(graph)}")
    return 0


def reproduce(graph: Graph, arrays: list, scalars: list, *, kind: str, error_type: str,
              backend: Any = "c") -> int:
    """``repro.py``'s body: raise the compile/runtime error, or print the accuracy mismatch and
    return 1; 0 (with a message) when the graph no longer fails that way."""
    f = failure_of(graph, arrays, scalars, backend, _LEVEL_OF_KIND[kind])
    if f is None or not f.matches(kind, error_type):
        got = "no failure" if f is None else f"a {f.kind} failure ({f.error_type})"
        print(f"repro: {got}; the {kind} failure ({error_type}) does not reproduce")
        return 0
    if kind == "accuracy":
        print(f"repro: accuracy failure: {f.error}")
        return 1
    raise f.error


__all__ = ["AccuracyError", "check_outputs", "enabled", "launch", "maybe_dump", "minifier_dir",
           "repro_level", "reproduce", "wrap_backend"]
