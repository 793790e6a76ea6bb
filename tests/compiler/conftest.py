import pytest

import ember

# The frontend's tests (graphs, breaks, guards, recompiles, functionalization, autograd, replay,
# the fuzzer) compare compiled results with eager bit for bit, so they run their graphs with the
# reference "eager" backend where they do not name one: what they test is the frontend, and
# "eager" runs a graph's nodes with exactly the kernels eager mode uses.  The default backend
# ("inductor", the C backend) has its own conformance over the whole op table
# (test_cbackend_conformance.py, within ulps per dtype), the C tests below, and the models'
# training steps (test_cbackend_models.py).
_C_MODULES = {"test_bundle", "test_c_expr", "test_cbackend", "test_cbackend_conformance",
              "test_cbackend_gemm", "test_cbackend_models", "test_cbackend_reduce",
              "test_cbackend_threads", "test_debug_levels", "test_default_backend",
              "test_prelude", "test_runtime", "test_toolchain"}


@pytest.fixture(autouse=True)
def _fresh_compile_caches(request, monkeypatch):
    # graphs are cached per code object: a test's counting backend must see its own compiles
    ember.compiler.reset()
    if request.module.__name__.rsplit(".", 1)[-1] not in _C_MODULES:
        monkeypatch.setattr(ember.compiler.config, "default_backend", "eager")
    yield
