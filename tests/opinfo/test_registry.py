"""Registry completeness: every OpDef is well-formed and reached by the OpInfo table."""

from __future__ import annotations

import ember
from ember.ops import registry
from ember.ops.registry import KINDS, REGISTRY, TAGS
from tests.opinfo import ALL_OPINFOS, harness
from tests.opinfo.core import to_ember


def test_opdefs_are_complete():
    for name, op in REGISTRY.items():
        assert op.name == name
        assert op.kind in KINDS and op.tags <= TAGS
        assert callable(op.meta) and callable(op.eager), name
        if "nondifferentiable" not in op.tags:
            assert op.vjp is not None, f"{name}: differentiable ops need a vjp (or the tag)"


# OpDefs without a docstring (OpDef.doc, or the eager or meta function's) when this check was
# made real; the list may only shrink: a new OpDef says what it computes
_UNDOCUMENTED = frozenset("""
addcdiv addcmul all amax amin any argmax argmin as_strided bitwise_left_shift
bitwise_right_shift cat ceil clone count_nonzero cumprod deg2rad diagonal diagonal_backward
div_floor div_trunc expand flip floor fmod frac frexp heaviside isfinite isinf isnan isneginf
isposinf lerp logaddexp logcumsumexp logical_and logical_not logical_or logical_xor logit
logsumexp max_dim mean min_dim nan_to_num nansum narrow narrow_backward permute pow prod rad2deg
reciprocal remainder repeat reshape_copy roll rsqrt select select_backward sigmoid sign sort
split_with_sizes squeeze std storage_read storage_write sum topk tril triu trunc unbind unfold
unfold_backward unique unsqueeze var vector_norm view xlogy
""".split())


def test_new_opdefs_are_documented():
    missing = {n for n, op in REGISTRY.items()
               if not (op.doc or op.eager.__doc__ or op.meta.__doc__)}
    new = sorted(missing - _UNDOCUMENTED)
    assert not new, f"OpDefs without a docstring: {new}"


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
                    grad_pos = harness.float_positions(sample) if op.grad and sample.grad else []
                    args = [to_ember(a, i in grad_pos) for i, a in enumerate(sample.args)]
                    out = op.fn(ember, *args, **sample.kwargs)
                    outs = out if isinstance(out, (tuple, list)) else [out]
                    outs = [o for o in outs if isinstance(o, ember.Tensor) and o.requires_grad]
                    if outs:
                        ember.autograd.backward([o.sum() for o in outs])
    finally:
        registry.install_binder(inner)
    from tests.sym_sweep import core_op_names

    missing = sorted(core_op_names(REGISTRY) - seen)
    assert not missing, f"OpDefs never reached by the OpInfo table: {missing}"
