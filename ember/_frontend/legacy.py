"""PyTorch's legacy tensor-type API: ``ember.FloatTensor`` and friends, ``Tensor.type()``,
``ember.typename`` and the ``Tensor.is_<backend>`` flags (all False but ``is_cpu``).

``ember.FloatTensor(2, 3)`` builds an uninitialized float32 tensor, ``ember.LongTensor([1, 2])``
one from data; ``isinstance(t, ember.FloatTensor)`` is True for float32 tensors, as in PyTorch
(the legacy types are not subclasses of ``Tensor``: they test the dtype).
"""

from __future__ import annotations

import warnings
from typing import Any

from ember import dtypes as dt
from ember._frontend.core import to_dtype
from ember.device import check_device
from ember.errors import DTypeError, EmberTypeError, EmberValueError
from ember.tensor import Size, Tensor, tensor_method

__all__ = [
    "BFloat16Tensor", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor",
    "HalfTensor", "IntTensor", "LongTensor", "ShortTensor", "set_default_tensor_type",
    "typename",
]


class _LegacyTensorType(type):
    """Metaclass of the legacy tensor types: calling one builds a tensor of its dtype;
    ``isinstance`` checks the dtype."""

    dtype: dt.dtype

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:  # type: ignore[override]
        check_device(device, cls.__name__)
        from ember._frontend.creation import empty, tensor

        if not args:
            return empty(0, dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], Size):
            return empty(*args[0], dtype=cls.dtype)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return empty(*args, dtype=cls.dtype)
        if len(args) > 1:
            raise EmberTypeError(f"[{cls.__name__}] expected sizes (ints), a Size or one sequence "
                                 f"of data, got {len(args)} arguments")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise EmberTypeError(f"[{cls.__name__}] expected a tensor of dtype "
                                     f"{cls.dtype}, got {data.dtype}")
            return data.detach()  # PyTorch's legacy constructor shares the storage
        if not hasattr(data, "__len__"):
            raise EmberTypeError(f"[{cls.__name__}] new(): data must be a sequence (got "
                                 f"{type(data).__name__})")
        return tensor(data, dtype=cls.dtype)

    def __repr__(cls) -> str:
        return f"<class 'ember.{cls.__name__}'>"


_LEGACY: dict[str, Any] = {}


def _legacy(name: str, d: dt.dtype) -> Any:
    cls = _LegacyTensorType(name, (), {"dtype": d, "__module__": "ember",
                                       "__doc__": f"Legacy constructor of {d} tensors."})
    _LEGACY[name] = cls
    return cls


FloatTensor = _legacy("FloatTensor", dt.float32)
DoubleTensor = _legacy("DoubleTensor", dt.float64)
HalfTensor = _legacy("HalfTensor", dt.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", dt.bfloat16)
LongTensor = _legacy("LongTensor", dt.int64)
IntTensor = _legacy("IntTensor", dt.int32)
ShortTensor = _legacy("ShortTensor", dt.int16)
CharTensor = _legacy("CharTensor", dt.int8)
ByteTensor = _legacy("ByteTensor", dt.uint8)
BoolTensor = _legacy("BoolTensor", dt.bool)
_BY_DTYPE = {cls.dtype: name for name, cls in _LEGACY.items()}


def _type_name(t: Tensor) -> str:
    return f"torch.{_BY_DTYPE[t.dtype]}"


@tensor_method("type")
def tensor_type(self: Tensor, dtype: Any = None, non_blocking: bool = False,
                **kwargs: Any) -> Any:
    """Without ``dtype``: PyTorch's type string (``'torch.FloatTensor'``).  With a dtype, a
    legacy type or its string name: the tensor cast to it (``self`` when nothing changes).

    >>> ember.ones(2).type()
    'torch.FloatTensor'
    >>> ember.ones(2).type(ember.LongTensor).dtype
    ember.int64
    """
    if dtype is None:
        return _type_name(self)
    if isinstance(dtype, str):
        name = dtype
        for prefix in ("torch.", "ember."):
            if name.startswith(prefix):
                name = name[len(prefix):]
        if name.startswith("cuda."):
            check_device("cuda", "type")
        if name not in _LEGACY:
            raise EmberValueError(f"[type] invalid type: {dtype!r}; expected a dtype or a legacy "
                                  "type name such as 'torch.FloatTensor'")
        dtype = _LEGACY[name]
    if isinstance(dtype, _LegacyTensorType):
        dtype = dtype.dtype
    if not isinstance(dtype, dt.dtype):
        raise DTypeError(f"[type] dtype must be a type, str, or dtype object, got {dtype!r}")
    return self if dtype is self.dtype else to_dtype(self, dtype)


def typename(obj: Any) -> str:
    """PyTorch's name of an object's type: ``'torch.FloatTensor'`` for a float32 tensor."""
    if isinstance(obj, Tensor):
        return _type_name(obj)
    module = getattr(obj.__class__, "__module__", "")
    qual = obj.__class__.__qualname__
    return qual if module in ("", "builtins") else f"{module}.{qual}"


def set_default_tensor_type(t: Any) -> None:
    """PyTorch's deprecated ``set_default_tensor_type``: a floating legacy type (or its name)
    sets the default dtype; CUDA types raise ``TypeError`` as PyTorch without CUDA."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    name = t if isinstance(t, str) else getattr(t, "__name__", repr(t))
    if isinstance(t, str):
        name = t.removeprefix("torch.").removeprefix("ember.")
    if name.startswith("cuda.") or getattr(t, "__module__", "") == "ember.cuda":
        raise EmberTypeError(f"[set_default_tensor_type] type torch.cuda.{name.split('.')[-1]} "
                             "not available: ember has no CUDA")
    cls = _LEGACY.get(name)
    if cls is None:
        raise EmberTypeError(f"[set_default_tensor_type] invalid type: {t!r}")
    if not cls.dtype.is_floating_point:
        raise EmberTypeError("[set_default_tensor_type] only floating-point types are supported "
                             "as the default type")
    dt.set_default_dtype(cls.dtype)


def _false(self: Tensor) -> bool:
    return False


# PyTorch's backend flags: every ember tensor is a dense, strided CPU tensor.  A flag defined on
# Tensor itself (for example by a sparse layout) wins.
for _flag in ("is_xpu", "is_mps", "is_meta", "is_sparse", "is_sparse_csr", "is_quantized",
              "is_mkldnn", "is_nested", "is_ipu", "is_vulkan", "is_mtia", "is_maia"):
    if not hasattr(Tensor, _flag):
        setattr(Tensor, _flag, property(_false, doc="False: ember tensors are dense CPU tensors."))


@tensor_method("is_pinned")
def is_pinned(self: Tensor, device: Any = None) -> bool:
    """False: there is no accelerator to pin memory for."""
    return False


@tensor_method("pin_memory")
def pin_memory(self: Tensor, device: Any = None) -> Tensor:
    """Raises ``DeviceUnavailableError`` (a ``RuntimeError``), as PyTorch without an
    accelerator."""
    check_device("cuda", "pin_memory")
    return self
