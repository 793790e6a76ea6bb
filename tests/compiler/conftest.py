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
              "test_cbackend_flex", "test_cbackend_gemm", "test_cbackend_models",
              "test_cbackend_reduce",
              "test_cbackend_threads", "test_debug_levels", "test_default_backend",
              "test_prelude", "test_runtime", "test_toolchain"}


@pytest.fixture(autouse=True)
def _fresh_compile_caches(request, monkeypatch):
    # graphs are cached per code object: a test's counting backend must see its own compiles
    ember.compiler.reset()
    if request.module.__name__.rsplit(".", 1)[-1] not in _C_MODULES:
        monkeypatch.setattr(ember.compiler.config, "default_backend", "eager")
    yield


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "extern_only: a C conformance case whose every graph runs as eager externs "
        "(tests/opinfo/extern_only.txt): it compares eager with eager, not C with eager")


def pytest_terminal_summary(terminalreporter):
    """Count the C conformance cases by expected lowering: C kernels vs extern-only."""
    counts: dict = {}
    for outcome in ("passed", "failed", "xfailed", "xpassed", "skipped"):
        for rep in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(rep, "nodeid", "")
            if "test_c_backend_equals_eager[" not in nodeid or rep.when not in ("call", "setup"):
                continue
            if outcome == "passed" and rep.when != "call":
                continue
            label = "extern-only" if nodeid.endswith("-extern]") else "C kernels"
            counts.setdefault(label, {}).setdefault(outcome, 0)
            counts[label][outcome] += 1
    if counts:
        terminalreporter.write_sep("-", "C conformance by lowering")
        for label in ("C kernels", "extern-only"):
            c = counts.get(label, {})
            terminalreporter.write_line(
                f"{label}: {sum(c.values())} cases ("
                + ", ".join(f"{v} {k}" for k, v in sorted(c.items())) + ")")
