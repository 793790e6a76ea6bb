"""Which version counter an nn.Parameter's array belongs to, for frozen weights
(``ember._inductor.config.freezing``; docs/compiler.md, "Frozen weights packed once").

A compiled inference graph under freezing packs its weights once in C and must drop a packed
copy when the weight changes.  The C call sees arrays only; a weight's changes are counted on
its tensor's version counter.  While a trace records, each parameter it reads is noted here
(``note``: array -> version counter), and the compiled graph stamps each frozen input
(``stamp``: the array, held weakly, its counter and the count) when it packs: a later call
whose array is another object, or whose counter moved, drops that copy.

>>> import numpy as np
>>> a, vc = np.zeros(3), [0]
>>> note(a, vc)
>>> s = stamp(a)
>>> unchanged(s, a), (vc.__setitem__(0, 1), unchanged(s, a))[1]
(True, False)
"""

from __future__ import annotations

import weakref
from typing import Any

_SEEN: dict = {}   # id(array) -> (weak reference to the array, version counter)


def _forget(key: int) -> Any:
    def gone(ref: Any) -> None:
        got = _SEEN.get(key)
        if got is not None and got[0] is ref:
            del _SEEN[key]
    return gone


def note(arr: Any, vc: list) -> None:
    """Remember that ``arr`` (a parameter's array) counts its changes on ``vc``."""
    k = id(arr)
    got = _SEEN.get(k)
    if got is not None and got[1] is vc and got[0]() is arr:
        return
    try:
        _SEEN[k] = (weakref.ref(arr, _forget(k)), vc)
    except TypeError:   # not weakly referable: never stamped (repacked on every call)
        pass


def stamp(arr: Any) -> tuple | None:
    """``(weak ref, counter, count)`` of ``arr`` now; None when ``arr`` was not noted."""
    got = _SEEN.get(id(arr))
    if got is None or got[0]() is not arr:
        return None
    return got[0], got[1], got[1][0]


def unchanged(s: tuple | None, arr: Any) -> bool:
    """Whether ``arr`` is the array stamped ``s`` and its counter has not moved since."""
    return s is not None and s[0]() is arr and s[1][0] == s[2]
