import pytest

import ember


@pytest.fixture(autouse=True)
def _fresh_compile_caches():
    # graphs are cached per code object: a test's counting backend must see its own compiles
    ember.compiler.reset()
    yield
