"""``dynamic_shapes`` specs: ``Dim``, derived dims, ``Dim.AUTO``/``STATIC``/``DYNAMIC``, ``dims``,
``ShapesCollection`` (PyTorch's ``torch.export.dynamic_shapes``), and their resolution into one
entry per tensor dim.

Example::

    >>> batch = Dim("batch", min=2, max=64)
    >>> dynamic_shapes = {"x": {0: batch}, "y": {0: 2 * batch}, "z": (Dim.AUTO, None)}
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ember._dynamo.exc import UserError, UserErrorType

INT_OO = math.inf


def _fmt_bound(v: float) -> str:
    return "int_oo" if v == INT_OO else str(int(v))


class Dim:
    """A named symbolic dim: ``Dim("batch", min=2, max=64)``.  Reusing one ``Dim`` for several
    dims declares them equal; ``2 * d``, ``d + 1`` make derived dims.

    Example::

        >>> d = Dim("d", max=10)
        >>> d
        Dim('d', min=0, max=10)
    """

    AUTO: _DimHint
    STATIC: _DimHint
    DYNAMIC: _DimHint

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise AssertionError(f"Dim name must be a valid identifier, got {name}")
        lo = 0 if min is None else int(min)
        hi = INT_OO if max is None else int(max)
        if lo > hi:
            raise AssertionError(f"Cannot create Dim with inconsistent min={min}, max={max}")
        self.__name__ = name
        self.min = lo
        self.max = hi

    def __repr__(self) -> str:
        parts = [repr(self.__name__)]
        if self.min != 2:
            parts.append(f"min={self.min}")
        if self.max != INT_OO:
            parts.append(f"max={self.max}")
        return f"Dim({', '.join(parts)})"

    def _derive(self, a: int, b: int) -> _DerivedDim:
        return _DerivedDim(self, a, b)

    def __add__(self, other: Any) -> _DerivedDim:
        if type(other) is not int:
            raise NotImplementedError(
                f"Attempted to add {other} to {self.__name__}, where an integer was expected. "
                "(Only increasing linear operations with integer coefficients are supported.)")
        return self._derive(1, other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> _DerivedDim:
        if type(other) is not int:
            raise NotImplementedError(
                f"Attempted to subtract {other} from {self.__name__}, where an integer was "
                "expected. (Only increasing linear operations with integer coefficients are "
                "supported.)")
        return self._derive(1, -other)

    def __rsub__(self, other: Any) -> Any:
        raise NotImplementedError(
            f"Attempted to negate {self.__name__}. (Only increasing linear operations with "
            "integer coefficients are supported.)")

    def __mul__(self, other: Any) -> _DerivedDim:
        if type(other) is not int or other <= 0:
            raise NotImplementedError(
                f"Attempted to multiply {self!r} with {other}, where a positive integer was "
                "expected. (Only increasing linear operations with integer coefficients are "
                "supported.)")
        return self._derive(other, 0)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


class _DerivedDim(Dim):
    """``a * root + b`` for a root ``Dim`` (``2 * d + 1``)."""

    def __init__(self, root: Dim, a: int, b: int) -> None:
        self.root = root
        self.a, self.b = a, b
        self.__name__ = self._expr(root.__name__)
        self.min = a * root.min + b
        self.max = INT_OO if root.max == INT_OO else a * root.max + b

    def _expr(self, name: str) -> str:
        s = name if self.a == 1 else f"{self.a}*{name}"
        return s if self.b == 0 else f"{s} + {self.b}" if self.b > 0 else f"{s} - {-self.b}"

    def fn(self, v: Any) -> Any:
        return self.a * v + self.b

    def _derive(self, a: int, b: int) -> _DerivedDim:
        return _DerivedDim(self.root, a * self.a, a * self.b + b)

    def __repr__(self) -> str:
        return self.__name__


class _DimHint:
    """``Dim.AUTO``, ``Dim.STATIC``, ``Dim.DYNAMIC``; the first and last take an optional range:
    ``Dim.AUTO(min=16, max=32)``."""

    def __init__(self, kind: str, min: int | None = None, max: int | None = None) -> None:
        self.type = kind
        self.min = min
        self.max = max

    def __call__(self, *, min: int | None = None, max: int | None = None) -> _DimHint:
        if self.type == "STATIC":
            raise TypeError("Dim.STATIC takes no range")
        if min is not None and max is not None and min > max:
            raise AssertionError(f"Cannot create Dim with inconsistent min={min}, max={max}")
        return _DimHint(self.type, min, max)

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in (("min", self.min), ("max", self.max))
                        if v is not None)
        return f"DimHint({self.type}{extra})"

    def describe(self) -> str:
        return f"Dim.{self.type}(min={self.min}, max={self.max})"


Dim.AUTO = _DimHint("AUTO")
Dim.STATIC = _DimHint("STATIC")
Dim.DYNAMIC = _DimHint("DYNAMIC")


def dims(*names: str, min: int | None = None, max: int | None = None) -> tuple[Dim, ...]:
    """Several ``Dim``s with one range: ``batch, seq = dims("batch", "seq", max=512)``."""
    return tuple(Dim(n, min=min, max=max) for n in names)


class ShapesCollection:
    """Specs keyed by the example tensors themselves.

    Example::

        >>> sc = ShapesCollection()
        >>> sc[x] = {0: Dim("batch")}
        >>> ember.export.export(model, (x,), dynamic_shapes=sc)
    """

    def __init__(self) -> None:
        self._shapes: dict[int, tuple[Any, Any]] = {}

    def __setitem__(self, t: Any, shape: Any) -> None:
        self._shapes[id(t)] = (t, shape)

    def __getitem__(self, t: Any) -> Any:
        return self._shapes[id(t)][1]

    def __len__(self) -> int:
        return len(self._shapes)

    def dynamic_shapes(self, m: Any, args: tuple, kwargs: dict | None = None) -> Any:
        """The same specs in the structure of ``m``'s arguments (by name)."""
        from ember.export._inputs import bind_arguments, map_tensors
        named = bind_arguments(m, args, kwargs or {})
        return {k: map_tensors(v, lambda t: self._shapes.get(id(t), (None, None))[1])
                for k, v in named.items()}


# ------------------------------------------------------------------------ resolution
@dataclass
class DimSpec:
    """What the user asked for one tensor dim."""

    path: str          # "inputs['x'].shape[0]"
    source: str        # "x.size()[0]" (guards) / L['x'].size()[0] (violations)
    hint: int
    kind: str          # "static", "named", "auto", "dynamic"
    dim: Any = None    # the Dim / _DerivedDim / _DimHint
    guard: str = ""    # x.size()[0] (PyTorch's source in ep.module() guards)


def _user_error(msg: str) -> UserError:
    return UserError(UserErrorType.INVALID_INPUT, msg)


def tensor_spec_entries(spec: Any, ndim: int, path: str) -> list:
    """One raw entry per dim from a tensor's spec (dict ``{dim: spec}``, tuple/list, None)."""
    if spec is None:
        return [None] * ndim
    if isinstance(spec, dict):
        out: list = [None] * ndim
        for k, v in spec.items():
            if type(k) is not int or not -ndim <= k < ndim:
                raise _user_error(
                    f"Dimension {k} is out of range for {path} with {ndim} dims "
                    f"(keys of a tensor's dynamic_shapes dict must be dims)")
            out[k % ndim] = v
        return out
    if isinstance(spec, (tuple, list)):
        if len(spec) != ndim:
            raise _user_error(
                f"Expected dynamic shape spec {spec!r} at {path} to have length {ndim} (the "
                f"tensor's rank), got {len(spec)}")
        return list(spec)
    where = "dynamic_shapes" + path.removeprefix("inputs")
    raise _user_error(
        f"Unexpected input tensor shape {spec!r} specified at `{where}` (expected either a "
        "list/tuple of dimensions, or a dict mapping indices to dimensions, where each dimension "
        "is an int, a Dim, Dim.AUTO, Dim.STATIC, or Dim.DYNAMIC)")


def classify(entry: Any, path: str) -> str:
    if entry is None or type(entry) is int or entry is Dim.STATIC or (
            isinstance(entry, _DimHint) and entry.type == "STATIC"):
        return "static"
    if isinstance(entry, _DimHint):
        return entry.type.lower()
    if isinstance(entry, Dim):
        return "named"
    raise _user_error(
        f"Unexpected dimension mapped to index {path}: {entry!r} (expected a Dim, Dim.AUTO, "
        "Dim.STATIC, Dim.DYNAMIC, an int or None)")


def check_named_dims(specs: list) -> None:
    """Named dims with one name share one definition; a derived dim's hint is consistent."""
    by_name: dict[str, Dim] = {}
    for s in specs:
        if s.kind != "named":
            continue
        root = s.dim.root if isinstance(s.dim, _DerivedDim) else s.dim
        prev = by_name.setdefault(root.__name__, root)
        if prev is not root and (prev.min, prev.max) != (root.min, root.max):
            raise UserError(
                UserErrorType.INVALID_INPUT,
                f"Found different definitions {prev!r} and {root!r} for the same symbolic "
                f"dimension {root!r}!")


__all__ = ["Dim", "ShapesCollection", "dims", "DimSpec", "INT_OO"]
