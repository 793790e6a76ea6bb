"""ember's exception hierarchy.

Every error ember raises on bad input is an ``EmberError`` subclass that also inherits the Python
type PyTorch raises in the same situation, so ``except RuntimeError`` written for PyTorch still
catches it.  Messages carry an op tag first: ``[reshape] cannot reshape (3, 4) into (5,)``.
"""

from __future__ import annotations


class EmberError(Exception):
    """Base class of every error ember raises deliberately."""


class ShapeError(EmberError, RuntimeError):
    """Shapes do not fit (broadcasting, matmul, view, cat ...)."""


class DTypeError(EmberError, TypeError):
    """A dtype is not accepted by an op."""


class DTypeRuntimeError(EmberError, RuntimeError):
    """A dtype problem that PyTorch reports as RuntimeError (e.g. result type cannot be cast)."""


class EmberIndexError(EmberError, IndexError):
    """An index or dimension is out of range."""


class EmberValueError(EmberError, ValueError):
    """An argument has a bad value."""


class EmberTypeError(EmberError, TypeError):
    """An argument has a bad type."""


class EmberRuntimeError(EmberError, RuntimeError):
    """A generic runtime failure (autograd misuse, in-place on a leaf, ...)."""


class DeviceError(EmberError, RuntimeError):
    """A device is unknown or tensors live on different devices."""


class DeviceUnavailableError(DeviceError, AssertionError):
    """An accelerator ('cuda', 'mps', 'xpu') was asked for: ember computes on the CPU.  PyTorch
    built without CUDA raises ``AssertionError("Torch not compiled with CUDA enabled")`` here
    (``RuntimeError`` for 'mps'), so this error is both."""


class EmberNotImplementedError(EmberError, NotImplementedError):
    """A feature PyTorch has that ember does not have yet."""


def op_error(cls: type[EmberError], op: str, message: str) -> EmberError:
    """Build ``cls`` with the ``[op] message`` form used throughout ember."""
    return cls(f"[{op}] {message}")


class TorchDynamoException(EmberError, RuntimeError):  # noqa: N818 (PyTorch's name)
    """Base of the errors ``ember.compile``'s frontend raises; PyTorch's
    ``torch._dynamo.exc.TorchDynamoException`` (``ember._dynamo.exc`` has the subclasses)."""


class GraphBreakError(TorchDynamoException):
    """A compiled region needed a tensor's values (a graph break) where breaks are errors
    (``fullgraph=True`` or ``ember.compiler.error_on_graph_break(True)``).

    ``reason`` says what needed the values; ``user_stack`` lists the user's frames (outermost
    first) as ``traceback.FrameSummary`` objects.  ``ember._dynamo.exc.Unsupported`` (PyTorch's
    name for this error) is this class.
    """

    def __init__(self, message: str, reason: str = "", user_stack: list | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.user_stack = list(user_stack or [])


class CompileError(EmberError, RuntimeError):
    """The C compiler failed on generated code, or no C compiler was found.

    ``c_path`` is the C source that failed (kept in the cache directory; None when the compiler
    is missing); ``log`` holds the compiler's last lines of output.
    """

    def __init__(self, message: str, c_path: str | None = None, log: str = "") -> None:
        super().__init__(message)
        self.c_path = c_path
        self.log = log

    def __reduce__(self) -> tuple:  # keep c_path and log across processes (multiprocessing)
        return (type(self), (self.args[0] if self.args else "", self.c_path, self.log))


class GuardOnDataDependentSymNode(EmberRuntimeError):  # noqa: N818 (PyTorch's name)
    """A Python ``bool``/``int`` was needed from a symbolic size that depends on tensor data
    (an unbacked size, e.g. ``nonzero``'s row count) and its range does not decide it (PyTorch's
    ``torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode``).  ``expr`` is the
    sympy expression; the message names the user's line."""

    def __init__(self, message: str, expr: object = None) -> None:
        super().__init__(message)
        self.expr = expr
