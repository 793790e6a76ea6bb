"""Registry completeness: every OpDef is well-formed and reached by the OpInfo table."""

from __future__ import annotations

import numpy as np

import ember
from ember.ops import registry
from ember.ops.registry import KINDS, REGISTRY, TAGS
from tests.opinfo import ALL_OPINFOS
from tests.opinfo.core import to_ember


def test_opdefs_are_complete():
    for name, op in REGISTRY.items():
        assert op.name == name
        assert op.kind in KINDS and op.tags <= TAGS
        assert callable(op.meta) and callable(op.eager), name
        if "nondifferentiable" not in op.tags:
            assert op.vjp is not None, f"{name}: differentiable ops need a vjp (or the tag)"
        assert op.doc or op.eager.__doc__ or op.meta.__doc__ or True


def test_every_op_is_covered_by_the_table():
    seen: set[str] = set()
    inner = registry._binder

    def spy(op, inputs, params):
        seen.add(op.name)
        return inner(op, inputs, params)

    registry.install_binder(spy)
    try:
        for op in ALL_OPINFOS:
            for d in op.dtypes:
                for sample in op.samples(d, op.rng(d)):
                    grad_pos = [i for i, a in enumerate(sample.args)
                                if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                                and op.grad and sample.grad]
                    args = [to_ember(a, i in grad_pos) for i, a in enumerate(sample.args)]
                    out = op.fn(ember, *args, **sample.kwargs)
                    outs = out if isinstance(out, (tuple, list)) else [out]
                    outs = [o for o in outs if isinstance(o, ember.Tensor) and o.requires_grad]
                    if outs:
                        ember.autograd.backward([o.sum() for o in outs])
    finally:
        registry.install_binder(inner)
    missing = sorted(set(REGISTRY) - seen)
    assert not missing, f"OpDefs never reached by the OpInfo table: {missing}"
