"""One compiled model called from many threads (issue 22, "Thread-safe compile").

Tracing state is per thread (``ember._lazy.STATE`` and the grad mode are ``threading.local``),
the compile cache compiles each graph key once while other threads wait for it, and the C
library cache builds each library once.  The threads run a few thousand calls in all with
mixed batch sizes; every result must equal the eager one computed beforehand, no thread may
hang (joined with a timeout) and the cache must hold the graphs one thread alone would have
compiled: a static graph for the first shape and one dynamic graph for the rest.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ember
from ember import demo, nn

THREADS = 8
TIMEOUT = 240.0


def _run_threads(work, n=THREADS):
    """Run ``work(i)`` in ``n`` threads started together; re-raise the first error."""
    errors: list = []
    barrier = threading.Barrier(n)

    def target(i):
        try:
            barrier.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread hung (deadlock?)"
    if errors:
        raise errors[0]


def _segment_count(cf) -> int:
    return sum(seg.count for seg in cf._code_cache().segments.values())


def _check_model(model, inputs, calls_per_thread, rtol, atol):
    with ember.no_grad():
        want = [model(x).numpy() for x in inputs]

    def fwd(x):
        return model(x)

    ember.compiler.reset()
    cf = ember.compile(fwd)

    def work(i):
        with ember.no_grad():
            for k in range(calls_per_thread):
                j = (i + k) % len(inputs)
                got = cf(inputs[j]).numpy()
                np.testing.assert_allclose(got, want[j], rtol=rtol, atol=atol)

    _run_threads(work)
    # the first shape compiles a static graph; the first other shape a dynamic one that the
    # remaining shapes reuse: 2 graphs, as in a single thread, never one per thread
    assert _segment_count(cf) == 2


def test_mlp_from_eight_threads_matches_eager():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 10))
    rng = np.random.default_rng(0)
    inputs = [ember.tensor(rng.standard_normal((b, 24)).astype(np.float32))
              for b in (3, 5, 6, 7, 9)]
    # float32 pointwise + matmul: C and NumPy agree to a few ulp
    _check_model(m, inputs, 300, rtol=1e-5, atol=1e-6)


def test_char_gpt_forward_from_eight_threads_matches_eager():
    ember.manual_seed(0)
    m = demo.CharGPT(40, block=16, d=32, layers=2, heads=2)
    rng = np.random.default_rng(0)
    inputs = [ember.tensor(rng.integers(0, 40, (b, 16)), dtype=ember.int64) for b in (2, 3, 4)]
    # gelu's vectorized tanh: logits within float32 rounding (test_cbackend_models.py)
    _check_model(m, inputs, 40, rtol=1e-5, atol=1e-6)


def test_tracing_state_is_per_thread():
    """A thread that is tracing does not make another thread's eager ops lazy."""
    seen: dict = {}
    inside = threading.Event()
    done = threading.Event()

    @ember.compile
    def f(x):
        seen["compiling"] = ember.compiler.is_compiling()
        inside.set()
        done.wait(30)
        return x + 1

    t = threading.Thread(target=lambda: f(ember.ones(3)), daemon=True)
    t.start()
    assert inside.wait(30)
    assert not ember.compiler.is_compiling()  # this thread is not tracing
    y = ember.ones(3) * 2  # eager here, while the other thread traces
    assert type(y._data) is np.ndarray
    done.set()
    t.join(30)
    assert not t.is_alive() and seen["compiling"]


def test_grad_mode_is_per_thread():
    got: dict = {}

    def other():
        got["other"] = ember.is_grad_enabled()

    with ember.no_grad():
        t = threading.Thread(target=other)
        t.start()
        t.join(30)
        assert not ember.is_grad_enabled()
    assert got["other"] is True


def test_autograd_on_separate_graphs_from_threads():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal((6, 4)).astype(np.float32) for _ in range(THREADS)]
    xs = [rng.standard_normal((5, 6)).astype(np.float32) for _ in range(THREADS)]
    want = []
    for w, x in zip(ws, xs):
        tw = torch.tensor(w, requires_grad=True)
        (torch.tensor(x) @ tw).tanh().pow(2).sum().backward()
        want.append(tw.grad.numpy())
    got: dict = {}

    def work(i):
        for _ in range(50):
            w = ember.tensor(ws[i], requires_grad=True)
            if i % 2:  # no_grad in some threads must not switch autograd off in the others
                with ember.no_grad():
                    (ember.tensor(xs[i]) @ w).sum()
            (ember.tensor(xs[i]) @ w).tanh().pow(2).sum().backward()
            got[i] = w.grad.numpy()

    _run_threads(work)
    for i in range(THREADS):
        np.testing.assert_allclose(got[i], want[i], rtol=1e-5, atol=1e-6)


def test_reduce_overhead_function_from_threads():
    """``mode="reduce-overhead"`` calls take turns (a lock per function): every result is the
    eager one and the graph is recorded once, then replayed."""
    rng = np.random.default_rng(2)
    w = ember.tensor(rng.standard_normal((8, 8)).astype(np.float32))
    xs = [ember.tensor(rng.standard_normal((4, 8)).astype(np.float32)) for _ in range(THREADS)]

    def g(x):
        return (x @ w).relu() * 2 + 1

    want = [g(x).numpy() for x in xs]
    ember.compiler.reset()
    f = ember.compile(g, mode="reduce-overhead")

    def work(i):
        with ember.no_grad():
            for _ in range(100):
                np.testing.assert_allclose(f(xs[i]).numpy(), want[i], rtol=1e-5, atol=1e-6)

    _run_threads(work)
    assert f.record_count <= 2 and f.replay_count >= THREADS * 100 - 2


def test_compiled_training_step_on_separate_models_from_threads():
    """One compiled training step (forward, cross_entropy, backward, AdamW step, zero_grad)
    shared by 8 threads, each training its own model: compiled autograd and the optimizers
    run per thread; every thread's losses equal its eager run's."""
    from tests.compiler.helpers import lm_step

    def make(seed):  # in the main thread: the default generator is process-wide (as in torch)
        ember.manual_seed(seed)
        m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5))
        rng = np.random.default_rng(seed)
        data = [(ember.tensor(rng.standard_normal((8, 16)).astype(np.float32)),
                 ember.tensor(rng.integers(0, 5, 8), dtype=ember.int64)) for _ in range(10)]
        return m, data

    def train(md, step):
        m, data = md
        opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
        return [step(m, opt, x, y).item() for x, y in data]

    want = [train(make(s), lm_step) for s in range(THREADS)]
    ember.compiler.reset()
    step = ember.compile(lm_step)
    models = [make(s) for s in range(THREADS)]
    got: dict = {}
    _run_threads(lambda i: got.__setitem__(i, train(models[i], step)))
    for i in range(THREADS):
        # C reductions accumulate in double: losses a few ulp apart (test_cbackend_models.py)
        np.testing.assert_allclose(got[i], want[i], rtol=2e-6, atol=0)
    assert _segment_count(step) == 2  # the first step (creates AdamW's state), the steady one
