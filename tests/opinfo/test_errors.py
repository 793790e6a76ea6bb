"""Bad input raises the right error type (EmberError and PyTorch's class) with a message
naming the op."""

from __future__ import annotations

import re

import pytest

import ember
from tests.opinfo import ALL_OPINFOS
from tests.opinfo.core import to_ember

ERROR_CASES = [(op, case) for op in ALL_OPINFOS for case in op.errors()]


@pytest.mark.parametrize("op,case", ERROR_CASES,
                         ids=[f"{o.name}-{i}" for i, (o, _c) in enumerate(ERROR_CASES)])
def test_error(op, case):
    args = [to_ember(a) for a in case.args]
    with pytest.raises(case.exc) as info:
        op.fn(ember, *args, **case.kwargs)
    assert isinstance(info.value, ember.EmberError), (
        f"{op.name}: raised {type(info.value).__name__}, not an EmberError: {info.value}")
    if case.match:
        assert re.search(case.match, str(info.value)), str(info.value)
