"""``ember.library``: custom ops with PyTorch's ``torch.library`` API (ARCHITECTURE.md §7).

``custom_op`` turns a Python function into an op of the registry (one ``OpDef``), reachable as
``ember.ops.<ns>.<name>``; ``ember.compile`` records it as one node (run as an extern by the C
backend) and ``ember.export`` keeps it.  See docs/extensions.md.
"""

from __future__ import annotations

from typing import Any, Callable

from ember.library._custom_op import CustomOpDef, custom_op
from ember.library._fake import FakeImplCtx, get_ctx
from ember.library._legacy import Library, define, impl
from ember.library._opcheck import MetadataMismatchError, OpCheckError, opcheck
from ember.library._schema import infer_schema
from ember.library._triton import kernel_op, triton_op, wrap_kernel, wrap_triton


def _as_op(op: Any, where: str) -> CustomOpDef:
    from ember.library._custom_op import PACKETS
    if isinstance(op, CustomOpDef):
        return op
    if isinstance(op, str) and op in PACKETS:
        return PACKETS[op]
    raise ValueError(f"{where}(op): expected a custom op or its name 'ns::name', got {op!r}")


def register_fake(op: Any, func: Callable | None = None, /, *, lib: Any = None,
                  _stacklevel: int = 1, allow_override: bool = True) -> Any:
    """Register ``fn`` as ``op``'s fake impl (a decorator when ``fn`` is omitted)."""
    target = _as_op(op, "register_fake")
    return target.register_fake if func is None else target.register_fake(func)


impl_abstract = register_fake  # PyTorch's older name


def register_autograd(op: Any, backward: Callable, /, *, setup_context: Callable | None = None,
                      lib: Any = None) -> None:
    """Register ``backward`` (and ``setup_context``) as ``op``'s gradient."""
    _as_op(op, "register_autograd").register_autograd(backward, setup_context=setup_context)


def register_kernel(op: Any, device_types: Any, func: Callable | None = None, /, *,
                    lib: Any = None) -> Any:
    """Register ``func`` as ``op``'s kernel for ``device_types``."""
    return _as_op(op, "register_kernel").register_kernel(device_types, func)


__all__ = ["CustomOpDef", "FakeImplCtx", "Library", "MetadataMismatchError", "OpCheckError",
           "custom_op", "define", "get_ctx", "impl", "impl_abstract", "infer_schema", "kernel_op",
           "opcheck", "register_autograd", "register_fake", "register_kernel", "triton_op",
           "wrap_kernel", "wrap_triton"]
