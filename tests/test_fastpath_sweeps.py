"""The pointwise dtype sweeps again with ``config.check_meta`` off, exactly as users run: the
suite's conftest turns ``check_meta`` on, under which the binder's fast paths (``_bind_fast``)
run too but are followed by ``check_results`` (which runs ``meta``).  Here nothing follows
them: they must raise PyTorch's dtype errors themselves (``OpDef.check_dtypes``) and give the
same results."""

import pytest

from ember.config import config
from tests.test_pointwise_sweeps import *  # noqa: F403  (collected again, under the fixture)
from tests.test_pytorch_rounding import *  # noqa: F403


@pytest.fixture(autouse=True)
def _fast_paths():
    prev = config.check_meta
    config.check_meta = False
    yield
    config.check_meta = prev
