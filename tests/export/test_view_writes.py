"""In-place writes into views while exporting (``x[:, 0] += 1``, ``buf.view(-1).add_(1)``) are
recorded as a mutation of the view's base, as torch.export's functionalized program
(``run_decompositions()``) records them: same mutation outputs, same values."""

import numpy as np
import pytest

import ember
from ember.export import Dim

torch = pytest.importorskip("torch")


def _model(T, body):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", T.zeros(6, 3))

        def forward(self, x):
            return body(self, x)
    return M


BODIES = {
    "select_iadd": lambda s, x: (x[:, 0].add_(1), x * 2)[1],
    "setitem_iadd": lambda s, x: (x.__setitem__((slice(None), 0), x[:, 0] + 1), x + 1)[1],
    "buffer_view_add": lambda s, x: (s.buf.view(-1).add_(1), x + s.buf)[1],
    "intermediate_slice_fill": lambda s, x: (lambda y: (y[1:].fill_(0), y)[1])(x * 2),
    "transpose_mul": lambda s, x: (x.t().mul_(3), x - 1)[1],
    "split_piece_zero": lambda s, x: (x.split([1, 2], dim=1)[1].zero_(), x.sum(0))[1],
    "chained_views": lambda s, x: (s.buf[1:].unsqueeze(0)[0, :, 2].fill_(5), x + s.buf)[1],
    "narrow_copy": lambda s, x: (x.narrow(1, 1, 2).copy_(x[:, :2] * 10), x)[1],
}


def _run(T, name, x, dynamic):
    m = _model(T, BODIES[name])()
    dyn = {"x": {0: (Dim if T is ember else T.export.Dim).AUTO}} if dynamic else None
    ex = (ember if T is ember else torch).export
    ep = ex.export(m, (T.tensor(x.copy()),), dynamic_shapes=dyn)
    return m, ep


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", list(BODIES))
def test_view_write_is_a_mutation_of_the_base_like_torch(name, dynamic):
    x = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    _, ep = _run(ember, name, x, dynamic)
    _, tep = _run(torch, name, x, dynamic)
    tep = tep.run_decompositions()  # torch functionalizes there; ember while exporting
    kinds = [(s.kind.name, s.target) for s in ep.graph_signature.output_specs]
    tkinds = [(s.kind.name, s.target) for s in tep.graph_signature.output_specs]
    assert kinds == tkinds
    rows = (6, 8) if dynamic else (6,)
    for n in rows:
        xn = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        if n != 6 and name in ("buffer_view_add", "chained_views"):
            continue  # the buffer's rows are fixed
        ex_in, tx_in = ember.tensor(xn.copy()), torch.tensor(xn.copy())
        em, tm = ep.module(), tep.module()
        got = em(ex_in)
        with torch.no_grad():
            want = tm(tx_in)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ex_in.numpy(), tx_in.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(em.buf.numpy(), tm.buf.numpy(), rtol=1e-6, atol=1e-6)


def test_view_write_matches_eager_module():
    """The exported program leaves the input and buffer as the eager module leaves them."""
    x = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    for name in BODIES:
        m, ep = _run(ember, name, x, False)
        eager_m = _model(ember, BODIES[name])()
        a, b = ember.tensor(x.copy()), ember.tensor(x.copy())
        mod = ep.module()
        np.testing.assert_allclose(mod(a).numpy(), eager_m(b).numpy(), rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(mod.buf.numpy(), eager_m.buf.numpy(), err_msg=name)
