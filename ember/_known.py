"""What a compiled call leaves for the next call of the same code to follow (issue 21): the
recorded nodes (``TNode``), the known trace (``Known``) and the comparison of op arguments
(``same``).  Split from ``ember/_lazy.py``, which re-exports these names; no dependency on the
lazy payloads themselves, which the helpers of ``Trace._sweep`` at the end take as
``lazy_cls``.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import numpy as np

# ------------------------------------------------------------------------------------ refs
# A value inside a trace: ("i", k) the k-th input array, ("n", i, j) output j of node i.


class TNode:
    """One recorded op: ``op(*args, **params)``; args are refs or Python constants."""

    __slots__ = ("op", "args", "params", "specs")

    def __init__(self, op: Any, args: tuple, params: dict, specs: tuple) -> None:
        self.op = op
        self.args = args
        self.params = params
        self.specs = specs  # ((shape, ember dtype), ...) one per output


class Known:
    """A trace recorded by an earlier call that reached a compiled graph, for the next calls of
    the same code at the same graph position to follow (``Trace.match``): while a call records
    the same ops on the same refs with the same parameters, on inputs of the same shapes, dtypes
    and layout, each op reuses the cached node and its output specs (no ``meta``, no new node);
    when the call ends with the same outputs, the compiler reuses ``cap`` (the captured graph,
    its key and numbers) and ``entry`` (the compiled graph that ran) instead of capturing,
    hashing and looking up a new graph.  Immutable once made (but for the ``used`` mark), so
    threads share it."""

    __slots__ = ("nodes", "refs", "simple", "views", "multi", "vmemo", "n", "inputs",
                 "out_refs", "cap", "entry", "run", "used", "loose")

    def __init__(self, nodes: list, inputs: list, out_refs: list, cap: Any, entry: Any) -> None:
        self.nodes = tuple(nodes)
        refs = [[("n", i, j) for j in range(len(nd.specs))] for i, nd in enumerate(nodes)]
        for nd in nodes:   # the very ref objects the nodes' args hold: compared by identity
            for a in nd.args:
                if a.__class__ is tuple and len(a) == 3 and a[0] == "n":
                    refs[a[1]][a[2]] = a
        self.refs = tuple(refs)
        # what ``_bind_fast.bind`` reads of each node a followed op may reuse (one output, no view):
        # (node, op, args, params, output ref, shape, dtype, NumPy dtype, args pattern, args[0],
        # args[1]); None for the others
        self.simple = tuple((nd, nd.op, nd.args, nd.params, refs[i][0], nd.specs[0][0],
                             nd.specs[0][1], nd.specs[0][1].np, _pattern(nd.args),
                             *(tuple(nd.args[:2]) + (None, None))[:2])
                            if nd.op.kind != "view" and nd.op.num_outputs == 1 and
                            len(nd.specs) == 1 else None for i, nd in enumerate(nodes))
        # what ``_bind_fast._follow_view`` reads of a one-output view op of one ref (an earlier
        # node's output or an input array): (node, op, params, output ref, shape, dtype, NumPy
        # dtype, args[0]); None for the others.  ``vmemo``: node index -> (input geometry,
        # output geometry) of the last call, reused while the input's geometry is the same
        # stand-in object
        self.views = tuple((nd, nd.op, nd.params, refs[i][0], tuple(nd.specs[0][0]),
                            nd.specs[0][1], nd.specs[0][1].np, nd.args[0])
                           if nd.op.kind == "view" and nd.op.num_outputs == 1 and
                           len(nd.specs) == 1 and len(nd.args) == 1 and
                           nd.args[0].__class__ is tuple and nd.args[0][:1] in (("n",), ("i",))
                           else None for i, nd in enumerate(nodes))
        # what ``_bind_fast._follow_multi`` reads of a non-view op of several outputs (a
        # multi-tensor optimizer step): (node, op, args, params, ((output ref, shape, dtype,
        # NumPy dtype), ...)); None for the others
        self.multi = tuple((nd, nd.op, nd.args, nd.params,
                            tuple((refs[i][j], tuple(sh), dt, dt.np)
                                  for j, (sh, dt) in enumerate(nd.specs)))
                           if nd.op.kind != "view" and nd.op.num_outputs != 1 else None
                           for i, nd in enumerate(nodes))
        self.vmemo: dict = {}
        self.n = len(nodes)
        self.inputs = tuple(_in_meta(a) for a in inputs)
        self.out_refs = list(out_refs)
        self.cap = cap
        self.entry = entry
        self.run: Any = None   # the compiler's prepared call of ``entry`` (its business)
        self.used = False      # set (only ever to True) once a call followed it to the end
        # ``loose(i, op, args, params)``: when node ``i`` differs from ``op(*args, **params)``
        # only in numbers the compiled graph takes as runtime arguments (a learning rate, an
        # optimizer's bias correction), those numbers as ``[(slot, position, value), ...]``,
        # else None; set by the compiler (None: every difference diverges)
        self.loose: Any = None


def _is_node_ref(a: Any) -> bool:
    return a.__class__ is tuple and len(a) == 3 and a[0] == "n"


def _pattern(args: tuple) -> int:
    """The binder's quick check for a followed node's arguments: 1 (one earlier node's
    output), 2 (two of them), 3 (one and a Python float); 0: the general comparison."""
    if len(args) == 1 and _is_node_ref(args[0]):
        return 1
    if len(args) == 2 and _is_node_ref(args[0]):
        if _is_node_ref(args[1]):
            return 2
        if args[1].__class__ is float:
            return 3
    return 0


def _in_meta(a: np.ndarray) -> tuple:
    """What a graph's key and numbers read of an input array."""
    return (a.shape, a.dtype, a.flags.c_contiguous)


def same(a: Any, b: Any) -> bool:
    """``a == b`` with types compared too (``2`` is not ``2.0``): whether two op arguments or
    parameters give one graph key and the same numbers (``graph.capture``)."""
    if a is b:
        return True
    t = a.__class__
    if t is not b.__class__:
        return False
    if t is tuple or t is list:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if x is not y and not same(x, y):
                return False
        return True
    if t is dict:
        if len(a) != len(b):
            return False
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            if ka != kb or (va is not vb and not same(va, vb)):
                return False
        return True
    if t is float or t is int or t is str or t is bool:
        return a == b
    if t is np.ndarray:
        return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and bool(a == b)
    try:
        return (a == b) is True
    except Exception:  # noqa: BLE001 (an odd __eq__: not the same)
        return False


# ------------------------------------------------------------------------------------ sweep
_WREF = weakref.ReferenceType


def _held_refs() -> int:
    """``sys.getrefcount`` of an object that only a list references, read as
    ``Trace.live_tensors`` reads it (the count of the interpreter's own references differs
    between Python versions)."""
    lst = [object()]
    k = 0
    t = lst[k]
    n = sys.getrefcount(t)
    del t
    return n


_HELD_REFS = _held_refs()


def _resweep(lst: list, kept: list, lazy_cls: type) -> list:
    """``Trace._sweep`` again over the survivors ``kept`` (indices into ``lst``, newest
    first) until none drops; returns the survivors."""
    rc = sys.getrefcount
    one = _HELD_REFS
    e = la = None
    while kept:
        again = []
        for k in kept:
            e = lst[k]
            if rc(e) > one:
                again.append(k)
                continue
            if e.__class__ is not lazy_cls:
                la = e._data
                if rc(la) > one and la.__class__ is lazy_cls and not la.sver and \
                        la.vc is e._version_counter:
                    lst[k] = la
                    again.append(k)
                    continue
            lst[k] = None
        e = la = None
        if len(again) == len(kept):
            return kept
        kept = again
    return kept


def _collect(lst: list, live: list, outs: list, lazy_cls: type) -> None:
    """``Trace._sweep``'s walk over every entry, in creation order: the live held tensors into
    ``live``, the live unrealized payloads into ``outs``."""
    for e in lst:
        if e is None:
            continue
        c = e.__class__
        if c is _WREF:
            la = e()
        elif c is lazy_cls:
            la = e
        else:   # a live held tensor: its payload, while it is the one made with it
            live.append(e)
            la = e._data
            if la.__class__ is not lazy_cls or la.sver or la.vc is not e._version_counter:
                continue
        if la is not None and la.value is None:
            outs.append(la)
