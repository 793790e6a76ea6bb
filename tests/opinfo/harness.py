"""One conformance harness for the OpInfo table: which cases exist, which samples each case runs,
and the rule that every case checks something.

The drivers (``test_values.py`` and ``test_grads.py`` against PyTorch,
``tests/compiler/test_conformance.py`` compiled-vs-eager, ``tests/compiler/
test_cbackend_conformance.py`` C-vs-eager, and ``benchmarks/extern_census.py``) all take their
cases, samples, float arguments, calls and gradients from here, so a sample one of them runs is
a sample all of them run.

* Float arguments are chosen by ember's dtypes (``dtype.is_floating_point``), never by NumPy's
  ``dtype.kind``: bfloat16 (ml_dtypes) has kind ``"V"``.
* ``run_case`` calls a driver's ``check(sample, pos)`` for every sample and counts the samples
  it reports as checked; a case that checked none fails (``expect_checked``), unless the OpInfo
  names the dtype in ``no_samples`` with a reason (an explicit skip).
* ``EXTERN_ONLY`` (``extern_only.txt``, written by ``benchmarks/extern_census.py --write``) is the
  expected lowering of the C conformance: the (kind, op, dtype) cases whose every graph runs as
  eager externs, so they compare eager with eager.  The C conformance labels them ``extern`` and
  checks that the label is still true.

Example::

    for op, dtype in cases("grad"):
        n = run_case("grad", op, dtype, lambda sample, pos: my_check(op, sample, pos))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import ember
from tests.opinfo import (
    ALL_OPINFOS,
    ops_movement,
    ops_nn_activation,
    ops_nn_norm,
    ops_pointwise,
    ops_pointwise_logic,
    ops_pointwise_math,
    ops_reduction,
    ops_shape,
)
from tests.opinfo.core import FLOATS, OpInfo, Sample

KINDS = ("values", "grad", "fwd", "cgrad", "dyn")
"""values: op.dtypes; grad: op.grad_dtypes; fwd: op.dtypes; cgrad: the gradients of every float
dtype of the entry (grad_dtypes and the float dtypes); dyn: float32 (``dynamic=True``)."""

GRAD_KINDS = ("grad", "cgrad")

# the families run again with dynamic=True (size-generic C kernels): pointwise, activation,
# movement, shape, reduction (scans included) and normalization
DYN_OPS = (ops_pointwise.OPINFOS + ops_pointwise_math.OPINFOS + ops_pointwise_logic.OPINFOS
           + ops_nn_activation.OPINFOS + ops_movement.OPINFOS + ops_shape.OPINFOS
           + ops_reduction.OPINFOS + ops_nn_norm.OPINFOS)

# the C conformance's labels (test ids, KNOWN, extern_only.txt) -> the harness kind
C_KINDS = {"fwd": "fwd", "grad": "cgrad", "dyn": "dyn"}

EXTERN_ONLY_FILE = Path(__file__).with_name("extern_only.txt")


# ------------------------------------------------------------------------ float arguments
def is_float_array(a: Any) -> bool:
    """A NumPy array of one of ember's floating dtypes (float16/bfloat16/float32/float64)."""
    if not isinstance(a, np.ndarray):
        return False
    try:
        return ember.dtypes.from_numpy_dtype(a.dtype).is_floating_point
    except Exception:  # noqa: BLE001 - a dtype ember does not have is not a float argument
        return False


def float_positions(sample: Sample) -> list[int]:
    """Positions of the sample's float array arguments (the ones gradients are taken for)."""
    return [i for i, a in enumerate(sample.args) if is_float_array(a)]


# ------------------------------------------------------------------------ cases
def case_dtypes(kind: str, op: OpInfo) -> list[str]:
    """The dtypes ``op`` is tested in by ``kind`` (see ``KINDS``)."""
    if kind in ("values", "fwd"):
        return list(op.dtypes)
    if kind == "grad":
        return list(op.grad_dtypes) if op.grad else []
    if kind == "cgrad":
        return sorted(set(op.grad_dtypes) | (set(FLOATS) & set(op.dtypes))) if op.grad else []
    if kind == "dyn":
        return ["float32"] if "float32" in op.dtypes else []
    raise ValueError(f"unknown kind {kind!r}")


def cases(kind: str, ops: list[OpInfo] | None = None) -> list[tuple[OpInfo, str]]:
    """Every (op, dtype) case of ``kind`` over ``ops`` (default: the whole table; for "dyn"
    ``DYN_OPS``)."""
    if ops is None:
        ops = DYN_OPS if kind == "dyn" else ALL_OPINFOS
    return [(op, d) for op in ops for d in case_dtypes(kind, op)]


def samples(kind: str, op: OpInfo, dtype: str) -> Iterator[tuple[Sample, list[int]]]:
    """``(sample, float positions)`` of a case; gradient kinds keep only samples with a float
    argument and ``grad=True`` (forward kinds get ``[]`` as positions)."""
    for sample in op.samples(dtype, op.rng(dtype)):
        if kind in GRAD_KINDS:
            pos = float_positions(sample)
            if sample.grad and pos:
                yield sample, pos
        else:
            yield sample, []


def expect_checked(n: int, kind: str, op: OpInfo, dtype: str) -> None:
    """A case must check at least one sample: fail, or skip where the OpInfo says why not."""
    if n > 0:
        return
    reason = op.no_samples.get(dtype, "")
    if reason:
        pytest.skip(f"{op.name}[{dtype}] has no {kind} sample: {reason}")
    pytest.fail(f"{kind} {op.name}[{dtype}]: no sample was checked (a case that checks nothing "
                f"passes for nothing); add samples or name the dtype in OpInfo.no_samples")


def run_case(kind: str, op: OpInfo, dtype: str,
             check: Callable[[Sample, list[int]], bool]) -> int:
    """Run ``check(sample, pos)`` on every sample of the case; it returns whether it compared
    something.  Returns the number of checked samples (at least one, see ``expect_checked``)."""
    n = 0
    for sample, pos in samples(kind, op, dtype):
        n += bool(check(sample, pos))
    expect_checked(n, kind, op, dtype)
    return n


# ------------------------------------------------------------------------ running a sample
def call(op: OpInfo, sample: Sample, args: list) -> Any:
    """``op.fn(ember, *args, **kwargs)`` after seeding (random ops draw the same stream)."""
    ember.manual_seed(1234)
    return op.fn(ember, *args, **sample.kwargs)


def grads(op: OpInfo, sample: Sample, args: list, pos: list[int]) -> Any:
    """Gradients of the outputs that require grad w.r.t. ``args[pos]`` (fixed random output
    gradients), or None when no output requires grad."""
    outs = call(op, sample, args)
    outs = outs if isinstance(outs, (tuple, list)) else [outs]
    outs = [o for o in outs if isinstance(o, ember.Tensor) and o.requires_grad]
    if not outs:
        return None
    rng = np.random.default_rng(1)
    gos = [ember.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]
    return ember.autograd.grad(outs, [args[i] for i in pos], gos, allow_unused=True)


# ------------------------------------------------------------------------ expected lowering
def load_extern_only(path: Path = EXTERN_ONLY_FILE) -> set[tuple[str, str, str]]:
    """The (kind, op name, dtype) C conformance cases that run entirely as externs."""
    if not path.exists():
        return set()
    out = set()
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            kind, name, dtype = line.split()
            out.add((kind, name, dtype))
    return out


EXTERN_ONLY = load_extern_only()
