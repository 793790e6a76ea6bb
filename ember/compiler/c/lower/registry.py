"""Lowering rules, registered by OpDef (ARCHITECTURE.md §2): one op, one entry.

A rule lowers one graph node into the ``LoweringContext``'s open segment and returns None, or
returns why the node stays an extern (its eager kernel then runs between two C entries)::

    @lowering(OPS.softmax, OPS.log_softmax)
    def softmax(lw: LoweringContext, i: int, n: Node) -> str | None:
        ...

Rules are keyed by the OpDef object (its identity), never by its name.  Where one function
serves several ops that differ in a detail, the detail is bound at registration
(``@lowering(OPS.cumsum, scan="cumsum")``) rather than looked up from the op's name.  Ops
without a rule of their own fall back to a rule for their ``kind`` (``pointwise``, ``view``).
``OpSet``/``OpTable`` are the identity-keyed set and table a rule uses to ask about the ops it
shares a kernel with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from ember.ops.registry import OpDef

Rule = Callable[..., "str | None"]

_BY_OP: dict[int, tuple[OpDef, Rule]] = {}
_BY_KIND: dict[str, Rule] = {}
_GROUP_SINKS: list[Callable[..., bool]] = []


def lowering(*ops: OpDef, **bound: Any) -> Callable[[Rule], Rule]:
    """Register the decorated rule ``rule(lw, i, node) -> str | None`` for ``ops``; keyword
    arguments are bound into every call (``rule(lw, i, node, **bound)``).

    >>> @lowering(OPS.cumsum, OPS.cumprod)                            # doctest: +SKIP
    ... def scan(lw, i, n): ...
    """
    assert ops and all(isinstance(op, OpDef) for op in ops), ops

    def deco(rule: Rule) -> Rule:
        fn = functools.partial(rule, **bound) if bound else rule
        for op in ops:
            assert id(op) not in _BY_OP, f"two lowerings for {op!r}"
            _BY_OP[id(op)] = (op, fn)
        return rule
    return deco


def lowering_for_kind(kind: str) -> Callable[[Rule], Rule]:
    """Register the decorated rule for every op of ``kind`` that has no rule of its own."""
    def deco(rule: Rule) -> Rule:
        assert kind not in _BY_KIND, f"two lowerings for kind {kind!r}"
        _BY_KIND[kind] = rule
        return rule
    return deco


def group_sink(fn: Callable[..., bool]) -> Callable[..., bool]:
    """Register ``fn(lw, group) -> bool``: offered each closing pointwise group before it becomes
    a kernel of its own; True when it absorbed the group (e.g. as a reduction's epilogue)."""
    _GROUP_SINKS.append(fn)
    return fn


def rule_for(op: OpDef) -> Rule | None:
    """The rule that lowers ``op``: its own, else its kind's, else None (an extern)."""
    got = _BY_OP.get(id(op))
    if got is not None:
        return got[1]
    return _BY_KIND.get(op.kind)


def group_sinks() -> list[Callable[..., bool]]:
    return list(_GROUP_SINKS)


def lowered_ops() -> list[OpDef]:
    """The OpDefs with a rule of their own (pointwise and view ops are lowered by kind)."""
    return [op for op, _ in _BY_OP.values()]


class OpSet:
    """A set of OpDefs by identity (OpDefs with a dict ``c_expr`` are not hashable).

    >>> OpSet([OPS.sum, OPS.mean]).__contains__(OPS.sum)             # doctest: +SKIP
    True
    """

    __slots__ = ("_ids", "ops")

    def __init__(self, ops: Iterable[OpDef]) -> None:
        self.ops = tuple(ops)
        self._ids = frozenset(id(op) for op in self.ops)

    def __contains__(self, op: object) -> bool:
        return id(op) in self._ids

    def __or__(self, other: OpSet) -> OpSet:
        return OpSet(self.ops + other.ops)

    def __iter__(self) -> Any:
        return iter(self.ops)


class OpTable:
    """A mapping OpDef -> value by identity."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[tuple[OpDef, Any]]) -> None:
        self._items = {id(op): value for op, value in items}

    def get(self, op: OpDef, default: Any = None) -> Any:
        return self._items.get(id(op), default)

    def __getitem__(self, op: OpDef) -> Any:
        return self._items[id(op)]

    def __contains__(self, op: object) -> bool:
        return id(op) in self._items


__all__ = ["OpSet", "OpTable", "group_sink", "group_sinks", "lowered_ops", "lowering",
           "lowering_for_kind", "rule_for"]
