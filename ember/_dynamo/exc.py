"""``ember._dynamo.exc``: PyTorch's ``torch._dynamo.exc`` exception classes at PyTorch's paths,
so scripts that catch them work.  ``Unsupported`` is ember's ``GraphBreakError`` (a graph break
under ``fullgraph=True``), ``RecompileError`` is what ``set_stance("fail_on_recompile")`` raises;
all derive from ``TorchDynamoException`` (a ``RuntimeError``) as in PyTorch.

>>> try:
...     ember.compile(fn, fullgraph=True)(x)
... except ember._dynamo.exc.Unsupported as e:
...     print(e.reason)
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from ember.compiler.frontend.api import RecompileError
from ember.errors import GraphBreakError, TorchDynamoException

Unsupported = GraphBreakError


class InternalTorchDynamoError(TorchDynamoException):
    """An internal error of the compiler frontend."""


class RestartAnalysis(TorchDynamoException):
    """PyTorch restarts tracing on it; ember never raises it."""


class SkipFrame(TorchDynamoException):
    """PyTorch skips a frame on it; ember never raises it."""


class TorchRuntimeError(TorchDynamoException):
    """An error raised by an op while tracing."""


class ShortenTraceback(TorchDynamoException):
    """Base of errors whose traceback PyTorch shortens."""


class BackendCompilerFailed(ShortenTraceback):
    """A backend raised while compiling a graph (ember's C toolchain raises ``CompileError``)."""

    def __init__(self, backend_fn: Any, inner_exception: Exception,
                 traceback: Any = None) -> None:
        self.backend_name = getattr(backend_fn, "__name__", "?")
        self.inner_exception = inner_exception
        super().__init__(f"backend={self.backend_name!r} raised:\n"
                         f"{type(inner_exception).__name__}: {inner_exception}")


class ObservedException(TorchDynamoException):
    """PyTorch's wrapper of a user exception seen while tracing."""


class UncapturedHigherOrderOpError(TorchDynamoException):
    """A higher-order op's body could not be captured."""


class ResetRequired(TorchDynamoException):
    """``torch._dynamo.reset()`` is needed before the next compile."""


class FailOnRecompileLimitHit(Exception):  # noqa: N818 (PyTorch's name)
    """The recompile limit was hit where that is an error."""


class UserErrorType(Enum):
    DYNAMIC_CONTROL_FLOW = 1
    ANTI_PATTERN = 2
    STANDARD_LIBRARY = 3
    CONSTRAINT_VIOLATION = 4
    DYNAMIC_DIM = 5
    INVALID_INPUT = 6
    INVALID_OUTPUT = 7
    UNSUPPORTED_FAKE_TENSOR = 8


class UserError(TorchDynamoException):
    """A user's mistake the compiler reports (PyTorch's signature)."""

    def __init__(self, error_type: UserErrorType, msg: str,
                 case_name: str | None = None) -> None:
        super().__init__(msg)
        self.error_type = error_type
        self.message = msg


__all__ = [
    "BackendCompilerFailed", "FailOnRecompileLimitHit", "InternalTorchDynamoError",
    "ObservedException", "RecompileError", "ResetRequired", "RestartAnalysis", "ShortenTraceback",
    "SkipFrame", "TorchDynamoException", "TorchRuntimeError", "UncapturedHigherOrderOpError",
    "Unsupported", "UserError", "UserErrorType",
]
