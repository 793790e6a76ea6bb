"""Settings of ``ember.compile`` (``ember.compiler.config``), its errors and warnings, and the
stances (``set_stance``), ``error_on_graph_break`` and the ``explain`` event hooks: the global
policies that ``api.CompiledFunction`` consults on each call.

>>> import ember
>>> with ember.compiler.set_stance("force_eager"):
...     pass
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ember import _lazy
from ember.config import config
from ember.errors import EmberRuntimeError, TorchDynamoException

_LZ = _lazy.STATE


# ------------------------------------------------------------------------------ settings
class _Config:
    """``ember.compiler.config``: ``recompile_limit`` (graphs per function and segment before
    new ones run eagerly; alias ``cache_size_limit``), ``automatic_dynamic_shapes``,
    ``default_backend`` (the backend ``ember.compile`` uses when none is named, read when
    ``compile`` is called; EMBER_COMPILE_BACKEND, default ``"inductor"``, the C backend),
    ``warn_fallbacks`` (``ember.config.config.warn_fallbacks``: warn once per op when a compiled
    graph runs it as an eager extern; EMBER_WARN_FALLBACKS=0 turns it off),
    ``force_parameter_static_shapes`` (True: parameters' sizes are never lifted, as PyTorch's),
    and PyTorch's minifier switches ``repro_after`` (None; ``"dynamo"`` or ``"aot"``: the C
    backend dumps a minifier launcher on a failure, like EMBER_MINIFIER=1) and
    ``repro_level`` (which failures, PyTorch's numbers: 1 compile errors, 2 and 3 also runtime
    errors, 4 also accuracy; None: EMBER_REPRO_LEVEL, else 4); see ``ember.compiler.minifier``."""

    recompile_limit = 8
    automatic_dynamic_shapes = True
    # as PyTorch: an nn.Parameter's sizes stay static under dynamic=True (a mark_dynamic on it
    # still wins), so weights keep static shapes in the kernels
    force_parameter_static_shapes = True
    # PyTorch's knobs that scripts set; stored only (ember never suppresses errors)
    suppress_errors = False
    verbose = False
    capture_scalar_outputs = False
    capture_dynamic_output_shape_ops = False
    optimize_ddp = True
    default_backend: Any = config.compile_backend
    repro_after: str | None = None
    repro_level: int | None = None

    @property
    def warn_fallbacks(self) -> bool:
        return config.warn_fallbacks

    @warn_fallbacks.setter
    def warn_fallbacks(self, v: bool) -> None:
        config.warn_fallbacks = bool(v)

    @property
    def cache_size_limit(self) -> int:
        return self.recompile_limit

    @cache_size_limit.setter
    def cache_size_limit(self, v: int) -> None:
        self.recompile_limit = v


compiler_config = _Config()


class RecompileError(EmberRuntimeError, TorchDynamoException):
    """A recompile was needed under ``set_stance("fail_on_recompile")``, or a ``fullgraph=True``
    function went past ``config.recompile_limit``."""


class FallbackWarning(UserWarning):
    """A compiled graph runs an op as an eager extern (no C lowering for it): warned once per op
    per process while ``ember.compiler.config.warn_fallbacks`` is true."""


class RecompileLimitWarning(UserWarning):
    """A compiled function hit ``config.recompile_limit``: its new graphs now run eagerly."""


def _log(kind: str, msg: str) -> None:
    if kind in config.logs:
        print(f"[ember.compiler {kind}] {msg}", file=sys.stderr)



# ------------------------------------------------------------------------------ stances
_STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile",
            "eager_then_compile")


@dataclass
class _Stance:
    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: Any = None


_STANCE = _Stance()


class set_stance:  # noqa: N801 (PyTorch's name; usable as function, context manager, decorator)
    """Set how compiled functions behave (``ember.compiler.set_stance``).

    Stances: ``"default"``, ``"force_eager"`` (run the original Python, record nothing),
    ``"eager_on_recompile"`` (use cached graphs; run eagerly where a recompile would be needed),
    ``"fail_on_recompile"`` (raise instead of recompiling), ``"eager_then_compile"`` (the first
    call runs eagerly; later calls compile, with sizes that changed already dynamic).
    ``force_backend`` replaces every compiled function's backend (only with ``"default"``).
    Called as a function it sets the stance until changed; as a context manager or decorator it
    restores the previous stance on exit.
    """

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                 force_backend: Any = None) -> None:
        if _LZ.trace is not None:
            raise EmberRuntimeError("attempted to set_stance in an ember.compile region")
        if force_backend is not None and stance != "default":
            raise EmberRuntimeError("non-default stance cannot have force_backend set")
        self.new = _Stance(stance, skip_guard_eval_unsafe, force_backend)
        self.prev = _Stance(_STANCE.stance, _STANCE.skip_guard_eval_unsafe, _STANCE.backend)
        _apply_stance(self.new)

    def __enter__(self) -> set_stance:
        if _LZ.trace is not None:
            raise EmberRuntimeError("attempted to set_stance in an ember.compile region")
        _apply_stance(self.new)
        return self

    def __exit__(self, *exc: object) -> None:
        _apply_stance(self.prev)

    def __call__(self, fn: Callable) -> Callable:
        _apply_stance(self.prev)  # as a decorator it applies only while fn runs
        new = self.new

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _LZ.trace is not None:
                raise EmberRuntimeError("attempted to set_stance in an ember.compile region")
            prev = _Stance(_STANCE.stance, _STANCE.skip_guard_eval_unsafe, _STANCE.backend)
            _apply_stance(new)
            try:
                return fn(*args, **kwargs)
            finally:
                _apply_stance(prev)
        return wrapper


def _apply_stance(s: _Stance) -> None:
    _STANCE.stance = s.stance
    _STANCE.skip_guard_eval_unsafe = s.skip_guard_eval_unsafe
    _STANCE.backend = s.backend


def _check_stance() -> str:
    if _STANCE.stance not in _STANCES:
        raise EmberRuntimeError(f"invalid ember.compile stance '{_STANCE.stance}'; expected one "
                                f"of {', '.join(_STANCES)}")
    return _STANCE.stance


# ---------------------------------------------------------------------- error_on_graph_break
class error_on_graph_break:  # noqa: N801 (PyTorch's name)
    """Make graph breaks errors (``True``) or tolerated (``False``) in a region of compiled code:
    a context manager and a decorator, nestable (the innermost active setting at a break wins).
    Outside compiled code it does nothing; ``fullgraph=True`` takes precedence."""

    def __init__(self, error_on_graph_break: bool) -> None:
        self.value = bool(error_on_graph_break)

    def __enter__(self) -> error_on_graph_break:
        _LZ.error_on_break.append(self.value)
        return self

    def __exit__(self, *exc: object) -> None:
        _LZ.error_on_break.pop()

    def __call__(self, fn: Callable) -> Callable:
        value = self.value

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _LZ.error_on_break.append(value)
            try:
                return fn(*args, **kwargs)
            finally:
                _LZ.error_on_break.pop()
        return wrapper


# ------------------------------------------------------------------------------ explain hooks
class _Events:
    """Collects graphs, breaks and recompiles while ``explain`` runs."""

    def __init__(self) -> None:
        self.graphs: list = []
        self.breaks: list = []
        self.recompile_reasons: list = []
        self.compile_times: list = []


_EVENTS: list = []


__all__ = ["FallbackWarning", "RecompileError", "RecompileLimitWarning", "compiler_config",
           "error_on_graph_break", "set_stance"]
