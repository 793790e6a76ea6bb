import numpy as np
import pytest

import ember
from ember.config import config

# every eager op checks its output against its OpDef's meta rule while testing
config.check_meta = True
config.verify_ir = True  # the C backend's loop IR is verified after every pass
# no FallbackWarning per extern op (tests/compiler/test_fallbacks.py turns it on)
config.warn_fallbacks = False


@pytest.fixture(autouse=True)
def _restore_global_state():
    dd = ember.get_default_dtype()
    grad = ember.is_grad_enabled()
    yield
    ember.set_default_dtype(dd)
    ember.set_grad_enabled(grad)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
