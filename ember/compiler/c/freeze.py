"""Frozen weights packed once per compiled inference graph (``ember._inductor.config.freezing``;
docs/compiler.md, "Frozen weights packed once (ember.compile)").

The frontend marks a graph's frozen inputs (``Graph.frozen``: nn.Parameters read, not written,
by a graph that records no autograd).  ``assign_slots`` gives every template product whose B
operand is one of them a pre-pack slot (``GemmKernel.prepack``, as AOT packages' constants:
``csrc/gemm_prepack*.h.in``), and the unit exports ``ember_freeze_reset_v1(on)`` (switch the
packed copies on, drop them all) and ``ember_freeze_drop_v1(slot)``.  ``Frozen.check`` runs
before every C call of such a graph: a frozen input whose array is another object than the one
stamped at packing, or whose version counter moved since (an optimizer step, ``copy_``,
``load_state_dict``: any write through ember), gets its slots dropped, so the C code packs it
again from the current values.  Writes through a ``.numpy()`` view are not counted, as
PyTorch's freezing sees no change at all.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ember import _frozen
from ember.compiler.c.codegen import csrc
from ember.compiler.c.ir.kernels import GemmKernel

FREEZE_EXPORT = csrc("freeze_export.h.in")   # the unit's exported switches


def assign_slots(program: Any, frozen: tuple) -> tuple:
    """Give each template product of ``program`` whose whole B operand is graph input ``k`` in
    ``frozen`` a pre-pack slot; ``((k, (slot, ...)), ...)`` for the inputs that got one."""
    ids = {id(program.inputs[k]): k for k in frozen if k < len(program.inputs)}
    slots: dict = {}
    n = 0
    for kern in program.kernels():
        if (isinstance(kern, GemmKernel) and kern.impl.startswith(("tmpl_", "htmpl_"))
                and id(kern.b.buf) in ids and not any(kern.b.batch_strides)):
            kern.prepack, n = n, n + 1
            slots.setdefault(ids[id(kern.b.buf)], []).append(kern.prepack)
    if n:
        program.freeze_export = True
    return tuple((k, tuple(v)) for k, v in sorted(slots.items()))


class Frozen:
    """The frozen inputs of one compiled graph and what its C unit packed them from."""

    __slots__ = ("inputs", "seen", "_reset", "_drop", "_on")

    def __init__(self, inputs: tuple, dll: Any, prefix: str) -> None:
        self.inputs = inputs                    # ((graph input k, (slot, ...)), ...)
        self.seen: list = [None] * len(inputs)  # per input: _frozen.stamp at packing
        self._reset = getattr(dll, prefix + "ember_freeze_reset_v1")
        self._reset.argtypes, self._reset.restype = [ctypes.c_int], None
        self._drop = getattr(dll, prefix + "ember_freeze_drop_v1")
        self._drop.argtypes, self._drop.restype = [ctypes.c_int], None
        self._on = False

    def check(self, arrays: list, pos: dict | None = None, const: dict | None = None) -> None:
        """Before a call with graph inputs ``arrays`` (or, for a bound call, its variable
        inputs at ``pos`` and its fixed ones in ``const``): drop the packed copies of the
        frozen inputs that changed since they were packed."""
        if not self._on:   # the first call: switched on, with nothing packed yet
            self._reset(1)
            self._on = True
        seen = self.seen
        unchanged = _frozen.unchanged
        for j, (k, slots) in enumerate(self.inputs):
            if pos is None:
                a = arrays[k]
            else:
                i = pos.get(k)
                a = arrays[i] if i is not None else const[k]  # type: ignore[index]
            if not unchanged(seen[j], a):
                for s in slots:
                    self._drop(s)
                seen[j] = _frozen.stamp(a)
