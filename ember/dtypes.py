"""dtypes and PyTorch's type-promotion rules.

A ``dtype`` is a small immutable object (``ember.float32``) that knows its NumPy storage type.
bfloat16 is stored with ``ml_dtypes``; float16 and bfloat16 eager math computes in float32 and
rounds back (``compute_np``), which is PyTorch's CPU behaviour.
"""

from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

from ember.errors import EmberTypeError, EmberValueError

__all__ = [
    "dtype", "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
    "float32", "float64", "promote_types", "result_type", "get_default_dtype",
    "set_default_dtype", "finfo", "iinfo", "can_cast",
]

_BOOL, _INT, _FLOAT = 0, 1, 2  # type categories, ordered


class dtype:  # noqa: N801 - PyTorch spells it in lower case
    """An element type.  Compare with ``is`` or ``==``; ``x.dtype is ember.float32``."""

    __slots__ = ("name", "np", "itemsize", "category", "is_signed", "_rank", "compute_np")

    def __init__(self, name: str, np_dtype: np.dtype, category: int, is_signed: builtins.bool,
                 rank: int, compute_np: np.dtype | None = None) -> None:
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.category = category
        self.is_signed = is_signed
        self._rank = rank
        self.compute_np = self.np if compute_np is None else np.dtype(compute_np)

    @property
    def is_floating_point(self) -> builtins.bool:
        return self.category == _FLOAT

    @property
    def is_complex(self) -> builtins.bool:
        return False

    @property
    def bits(self) -> int:
        return self.itemsize * 8

    def to_real(self) -> dtype:
        return self

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self) -> str:
        return self.name

    # dtypes are singletons, so identity hashing/equality is right.


bool = dtype("bool", np.bool_, _BOOL, False, 0)  # noqa: A001
uint8 = dtype("uint8", np.uint8, _INT, False, 1)
int8 = dtype("int8", np.int8, _INT, True, 1)
int16 = dtype("int16", np.int16, _INT, True, 2)
int32 = dtype("int32", np.int32, _INT, True, 3)
int64 = dtype("int64", np.int64, _INT, True, 4)
float16 = dtype("float16", np.float16, _FLOAT, True, 1, np.float32)
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, _FLOAT, True, 1, np.float32)
float32 = dtype("float32", np.float32, _FLOAT, True, 2)
float64 = dtype("float64", np.float64, _FLOAT, True, 3)

# Quantized element types (PyTorch's names): only the quantized tensors of ember.ao carry
# them (int8 / uint8 / int32 codes with a scale and zero point); no op computes in them.
qint8 = dtype("qint8", np.int8, _INT, True, 1)
quint8 = dtype("quint8", np.uint8, _INT, False, 1)
qint32 = dtype("qint32", np.int32, _INT, True, 3)
QUANTIZED_DTYPES: tuple[dtype, ...] = (qint8, quint8, qint32)

# PyTorch aliases
half = float16
float = float32  # noqa: A001
double = float64
short = int16
int = int32  # noqa: A001
long = int64

ALL_DTYPES: tuple[dtype, ...] = (bool, uint8, int8, int16, int32, int64, float16, bfloat16,
                                 float32, float64)
FLOAT_DTYPES: tuple[dtype, ...] = (float16, bfloat16, float32, float64)
INT_DTYPES: tuple[dtype, ...] = (uint8, int8, int16, int32, int64)

_FROM_NP: dict[np.dtype, dtype] = {d.np: d for d in ALL_DTYPES}
_BY_NAME: dict[str, dtype] = {d.name: d for d in ALL_DTYPES}


def from_numpy_dtype(np_dtype: np.dtype, op: str = "from_numpy") -> dtype:
    """The ember dtype that stores ``np_dtype``; raises TypeError for unsupported ones."""
    try:
        return _FROM_NP[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        supported = ", ".join(d.name for d in ALL_DTYPES)
        raise EmberTypeError(
            f"[{op}] NumPy dtype {np_dtype} is not supported; expected one of {supported}"
        ) from None


def by_name(name: str) -> dtype:
    return _BY_NAME[name]


def promote_types(type1: dtype, type2: dtype) -> dtype:
    """PyTorch's ``promote_types``: the smallest dtype both ``type1`` and ``type2`` convert to.

    >>> ember.promote_types(ember.int32, ember.float16)
    ember.float16
    """
    return _promote_types(type1, type2)


def _promote_types(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a.category != b.category:
        if a.category == _BOOL:
            return b
        if b.category == _BOOL:
            return a
        return a if a.category > b.category else b
    if a.category == _FLOAT:
        if a._rank == b._rank:  # float16 with bfloat16
            return float32
        return a if a._rank > b._rank else b
    # both integers
    if a.is_signed != b.is_signed:
        unsigned, signed = (a, b) if not a.is_signed else (b, a)
        return int16 if signed is int8 else signed if signed.itemsize > unsigned.itemsize else int16
    return a if a._rank > b._rank else b


_default_dtype: dtype = float32


def get_default_dtype() -> dtype:
    """The dtype of floating tensors made from Python floats (float32 unless changed)."""
    return _default_dtype


def set_default_dtype(d: dtype) -> None:
    """Set the default floating dtype; only floating dtypes are accepted, as in PyTorch."""
    global _default_dtype
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise EmberTypeError(
            f"[set_default_dtype] only floating-point types are supported as the default type, "
            f"got {d!r}"
        )
    _default_dtype = d


def scalar_dtype(value: object) -> dtype:
    """The dtype a Python scalar takes when it becomes a tensor on its own."""
    if isinstance(value, builtins.bool):
        return bool
    if isinstance(value, builtins.int):
        return int64
    if isinstance(value, builtins.float):
        return _default_dtype
    if isinstance(value, np.generic):
        return from_numpy_dtype(value.dtype)
    raise EmberTypeError(f"[tensor] unsupported scalar type {type(value).__name__}")


def _combine(higher: dtype | None, lower: dtype | None) -> dtype | None:
    """c10's combine_categories: a higher-priority operand wins unless ``lower`` is of a higher
    type category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.category == _FLOAT:
        return higher
    if higher is bool or lower.category == _FLOAT:
        return promote_types(higher, lower)
    return higher


def result_type(*operands: object) -> dtype:
    """PyTorch's ``result_type`` over tensors and Python scalars.

    Three priority levels: tensors with ``ndim > 0``, 0-d tensors, then Python scalars.  A
    lower level only matters when it is of a higher category (bool < integer < floating).
    """
    dim_r: dtype | None = None
    zero_r: dtype | None = None
    wrapped_r: dtype | None = None
    for x in operands:
        d = getattr(x, "dtype", None)
        if isinstance(d, dtype):
            if x.ndim > 0:  # type: ignore[attr-defined]
                dim_r = d if dim_r is None else promote_types(dim_r, d)
            else:
                zero_r = d if zero_r is None else promote_types(zero_r, d)
        else:
            if isinstance(x, builtins.bool):
                d = bool
            elif isinstance(x, builtins.int) or type(x).__name__ == "SymInt":
                d = int64
            elif isinstance(x, builtins.float) or getattr(type(x), "ember_sym_scalar", False):
                d = _default_dtype  # (export's SymFloat: a float known at run time)
            elif isinstance(x, np.generic) and x.dtype.kind in "biuf":
                # NumPy scalars count as Python numbers, as in PyTorch (which reads a
                # ``np.bool_`` as a float)
                d = int64 if x.dtype.kind in "iu" else _default_dtype
            else:
                raise EmberTypeError(
                    f"[result_type] expected tensors or Python numbers, got {type(x).__name__}"
                )
            wrapped_r = d if wrapped_r is None else promote_types(wrapped_r, d)
    out = _combine(dim_r, _combine(zero_r, wrapped_r))
    if out is None:
        raise EmberValueError("[result_type] needs at least one operand")
    return out


def can_cast(from_: dtype, to: dtype) -> builtins.bool:
    """PyTorch's ``can_cast``: no cast to a lower type category (float->int, int->bool)."""
    return from_.category <= to.category


class finfo:  # noqa: N801
    """Machine limits of a floating dtype (``ember.finfo(ember.float16).eps``)."""

    def __init__(self, type: dtype | None = None) -> None:  # noqa: A002
        d = _default_dtype if type is None else type
        if not isinstance(d, dtype) or not d.is_floating_point:
            raise EmberTypeError(f"[finfo] expected a floating dtype, got {d!r}")
        info = ml_dtypes.finfo(d.np) if d is bfloat16 else np.finfo(d.np)
        self.bits = d.bits
        self.eps = builtins.float(info.eps)
        self.max = builtins.float(info.max)
        self.min = builtins.float(info.min)
        self.tiny = builtins.float(info.tiny)
        self.smallest_normal = self.tiny
        self.resolution = 10.0 ** -builtins.int(info.precision)
        self.dtype = d.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801
    """Limits of an integer dtype (``ember.iinfo(ember.int8).max == 127``)."""

    def __init__(self, type: dtype) -> None:  # noqa: A002
        if not isinstance(type, dtype) or type.category == _FLOAT:
            raise EmberTypeError(f"[iinfo] expected an integer or bool dtype, got {type!r}")
        if type is bool:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            info = np.iinfo(type.np)
            self.bits = info.bits
            self.min, self.max = builtins.int(info.min), builtins.int(info.max)
        self.dtype = type.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


class memory_format:  # noqa: N801  (PyTorch's name)
    """A memory layout name, PyTorch's ``torch.memory_format``.

    ember keeps row-major ("contiguous") storage for the tensors it creates: ``.to(memory_format=
    ember.channels_last)`` and ``module.to(memory_format=...)`` are accepted and leave values and
    layout as they are (in PyTorch the layout changes speed, never values).
    ``Tensor.is_contiguous(memory_format=ember.channels_last)`` tests the strides honestly.

    >>> ember.channels_last
    torch.channels_last
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # pickles as the module-level constant


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
