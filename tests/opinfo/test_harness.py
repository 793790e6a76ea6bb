"""The conformance harness itself: float arguments, the checked-a-sample rule, the labels."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from tests.opinfo import harness
from tests.opinfo.core import FLOATS, OpInfo, Sample, make


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_arguments_are_chosen_by_ember_dtypes(dtype):
    # bfloat16 (ml_dtypes) has NumPy kind "V": choosing by kind == "f" dropped every sample
    x = make((2, 3), dtype, np.random.default_rng(0))
    s = Sample((x, np.arange(3), 2.0, ember.float32))
    assert harness.float_positions(s) == [0]


def test_no_integer_or_bool_array_is_a_float_argument():
    s = Sample((np.zeros(2, np.int64), np.zeros(2, bool), np.zeros(2, np.uint8)))
    assert harness.float_positions(s) == []


def _op(no_samples=None):
    return OpInfo("harness_probe", lambda lib, x: x, lambda d, r: [], dtypes=("float32",),
                  no_samples=no_samples or {})


def test_a_case_that_checks_nothing_fails():
    with pytest.raises(pytest.fail.Exception, match="no sample was checked"):
        harness.run_case("values", _op(), "float32", lambda s, p: True)


def test_a_case_without_samples_skips_only_with_a_reason():
    with pytest.raises(pytest.skip.Exception, match="none in float32"):
        harness.run_case("values", _op({"float32": "none in float32"}), "float32",
                         lambda s, p: True)


def test_unchecked_samples_do_not_count():
    op = OpInfo("harness_probe", lambda lib, x: x,
                lambda d, r: [Sample((np.ones(2, np.float32),))], dtypes=("float32",))
    with pytest.raises(pytest.fail.Exception):
        harness.run_case("values", op, "float32", lambda s, p: False)
    assert harness.run_case("values", op, "float32", lambda s, p: True) == 1


@pytest.mark.parametrize("kind", harness.KINDS)
def test_every_case_has_samples(kind):
    empty = [f"{op.name}[{d}]" for op, d in harness.cases(kind)
             if d not in op.no_samples and next(harness.samples(kind, op, d), None) is None]
    assert not empty, f"{kind} cases without samples: {empty}"


def test_bfloat16_gradients_are_sampled():
    bf16 = [(op, d) for op, d in harness.cases("cgrad") if d == "bfloat16"]
    assert len(bf16) > 300
    assert all(next(harness.samples("cgrad", op, d), None) is not None for op, d in bf16)


def test_extern_only_labels_name_existing_cases():
    """A stale line (a renamed op, a dropped dtype) would label nothing and hide the drift."""
    known = {(label, op.name, d) for label, kind in harness.C_KINDS.items()
             for op, d in harness.cases(kind)}
    assert harness.EXTERN_ONLY, "tests/opinfo/extern_only.txt is missing or empty"
    stale = sorted(harness.EXTERN_ONLY - known)
    assert not stale, f"extern_only.txt names cases that do not exist: {stale[:10]}"
