"""int8 dynamic quantization against torch 2.13's (x86 engine: fbgemm) bit for bit."""


import numpy as np
import pytest

import ember
from ember.ops import _native, _qlinear_c

torch = pytest.importorskip("torch")
tq = torch.ao.quantization

pytestmark_warn = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
                   pytest.mark.filterwarnings("ignore::UserWarning")]
pytestmark = [*pytestmark_warn,
              pytest.mark.skipif(torch.backends.quantized.engine not in ("x86", "fbgemm"),
                                 reason="the reference is torch's x86/fbgemm kernel")]


@pytest.fixture(params=["c", "numpy"])
def kernel(request: pytest.FixtureRequest):  # noqa: ANN201
    """Run with the C kernel (when it builds) and with the NumPy path (blocked float32 BLAS)."""
    old = _qlinear_c.set_enabled(request.param == "c")
    if request.param == "c" and not _qlinear_c.available():
        _qlinear_c.set_enabled(old)
        pytest.skip("the eager C kernel could not be built here")
    yield request.param
    _qlinear_c.set_enabled(old)


def _pair(k: int, m: int, seed: int, bias: bool = True) -> tuple:
    torch.manual_seed(seed)
    t = torch.nn.Sequential(torch.nn.Linear(k, m, bias=bias), torch.nn.ReLU(),
                            torch.nn.Linear(m, 5))
    e = ember.nn.Sequential(ember.nn.Linear(k, m, bias=bias), ember.nn.ReLU(),
                            ember.nn.Linear(m, 5))
    e.load_state_dict({n: ember.tensor(v.detach().numpy()) for n, v in t.state_dict().items()})
    return t, e


def _inputs(shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * rng.uniform(0.01, 5) + rng.uniform(-1, 1)) \
        .astype(np.float32)


@pytest.mark.parametrize("k,m,seed", [(8, 4, 0), (300, 64, 1), (1500, 33, 2), (2500, 17, 3)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quantize_dynamic_bitwise(k: int, m: int, seed: int, per_channel: bool,
                                  kernel: str) -> None:
    t, e = _pair(k, m, seed, bias=seed != 2)
    if per_channel:
        tq_model = tq.quantize_dynamic(t, {torch.nn.Linear: tq.per_channel_dynamic_qconfig})
        eq_model = ember.ao.quantization.quantize_dynamic(
            e, {ember.nn.Linear: ember.ao.quantization.per_channel_dynamic_qconfig})
    else:
        tq_model = tq.quantize_dynamic(t, {torch.nn.Linear}, dtype=torch.qint8)
        eq_model = ember.quantization.quantize_dynamic(e, {ember.nn.Linear}, dtype=ember.qint8)
    assert isinstance(eq_model[0], ember.ao.nn.quantized.dynamic.Linear)
    assert isinstance(e[0], ember.nn.Linear)          # not in place
    tw, ew = tq_model[0].weight(), eq_model[0].weight()
    np.testing.assert_array_equal(ew.int_repr().numpy(), tw.int_repr().numpy())
    if per_channel:
        np.testing.assert_array_equal(ew.q_per_channel_scales().numpy(),
                                      tw.q_per_channel_scales().numpy())
    else:
        assert ew.q_scale() == tw.q_scale() and ew.q_zero_point() == tw.q_zero_point() == 0
    for i, shape in enumerate([(7, k), (2, 3, k), (1, k), (0, k), (70, k), (200, k)]):
        x = _inputs(shape, seed * 10 + i)
        want = tq_model(torch.from_numpy(x)).detach().numpy()
        got = eq_model(ember.tensor(x)).numpy()
        np.testing.assert_array_equal(got, want)


def test_activation_qparams_edge_cases(kernel: str) -> None:
    """All-zero, constant, tiny and one-signed inputs (ChooseQuantizationParams branches)."""
    t, e = _pair(16, 8, 5)
    tq_model = tq.quantize_dynamic(t, {torch.nn.Linear})
    eq_model = ember.ao.quantization.quantize_dynamic(e, {ember.nn.Linear})
    for x in [np.zeros((3, 16)), np.full((3, 16), 2.5), np.full((3, 16), -1e-7),
              np.abs(_inputs((4, 16), 1)), -np.abs(_inputs((4, 16), 2)),
              _inputs((4, 16), 3) * 1e-6, _inputs((4, 16), 4) * 1e4]:
        x = x.astype(np.float32)
        np.testing.assert_array_equal(eq_model(ember.tensor(x)).numpy(),
                                      tq_model(torch.from_numpy(x)).detach().numpy())


def test_close_to_float() -> None:
    """Within a few quantization steps of the float model (a sanity bound, not the oracle)."""
    t, e = _pair(256, 64, 7)
    q = ember.ao.quantization.quantize_dynamic(e, {ember.nn.Linear})
    x = _inputs((16, 256), 7)
    ref, got = e(ember.tensor(x)).detach().numpy(), q(ember.tensor(x)).numpy()
    assert np.abs(ref - got).max() < 0.05 * np.abs(ref).max()


def test_state_dict_keys_and_round_trip() -> None:
    t, e = _pair(32, 16, 9)
    tsd = tq.quantize_dynamic(t, {torch.nn.Linear}).state_dict()
    q = ember.ao.quantization.quantize_dynamic(e, {ember.nn.Linear})
    sd = q.state_dict()
    assert list(sd.keys()) == list(tsd.keys())
    assert sd["0._packed_params.dtype"] is ember.qint8
    w, b = sd["0._packed_params._packed_params"]
    np.testing.assert_array_equal(w.int_repr().numpy(),
                                  tsd["0._packed_params._packed_params"][0].int_repr().numpy())
    assert float(sd["0.scale"]) == 1.0 and int(sd["0.zero_point"]) == 0
    fresh = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(
        ember.nn.Linear(32, 16), ember.nn.ReLU(), ember.nn.Linear(16, 5)), {ember.nn.Linear})
    fresh.load_state_dict(sd)
    x = ember.tensor(_inputs((3, 32), 0))
    np.testing.assert_array_equal(fresh(x).numpy(), q(x).numpy())


def test_quantize_per_tensor_and_channel_match_torch() -> None:
    x = _inputs((6, 9), 11)
    for dtype, tdtype, zp in [(ember.qint8, torch.qint8, 3), (ember.quint8, torch.quint8, 128)]:
        a = ember.quantize_per_tensor(ember.tensor(x), 0.037, zp, dtype)
        b = torch.quantize_per_tensor(torch.from_numpy(x), 0.037, zp, tdtype)
        np.testing.assert_array_equal(a.int_repr().numpy(), b.int_repr().numpy())
        np.testing.assert_array_equal(a.dequantize().numpy(), b.dequantize().numpy())
        assert a.q_scale() == b.q_scale() and a.q_zero_point() == b.q_zero_point()
    s = np.linspace(0.01, 0.2, 6)
    a = ember.quantize_per_channel(ember.tensor(x), ember.tensor(s),
                                   ember.tensor(np.zeros(6, np.int64)), 0, ember.qint8)
    b = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(s),
                                   torch.zeros(6, dtype=torch.int64), 0, torch.qint8)
    np.testing.assert_array_equal(a.int_repr().numpy(), b.int_repr().numpy())
    np.testing.assert_array_equal(a.dequantize().numpy(), b.dequantize().numpy())


def test_observers_match_torch() -> None:
    w = _inputs((12, 20), 13)
    eaq = ember.ao.quantization
    for eo, to in [(eaq.default_weight_observer(), tq.default_weight_observer()),
                   (eaq.default_per_channel_weight_observer(),
                    tq.default_per_channel_weight_observer())]:
        eo(ember.tensor(w))
        to(torch.from_numpy(w))
        for ev, tv in zip(eo.calculate_qparams(), to.calculate_qparams()):
            np.testing.assert_array_equal(ev.numpy(), tv.numpy())


def test_only_linear_replaced_and_root_kept() -> None:
    lin = ember.nn.Linear(4, 4)
    assert isinstance(ember.ao.quantization.quantize_dynamic(lin), ember.nn.Linear)
    m = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.Sequential(ember.nn.Linear(4, 2)))
    qconfig = ember.ao.quantization.default_dynamic_qconfig
    q = ember.ao.quantization.quantize_dynamic(m, {"1.0": qconfig})
    assert isinstance(q[0], ember.nn.Linear)
    assert isinstance(q[1][0], ember.ao.nn.quantized.dynamic.Linear)
    assert not hasattr(q[1][0], "qconfig") and not hasattr(q[0], "qconfig")


def test_bad_input() -> None:
    q = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(ember.nn.Linear(4, 2)))
    with pytest.raises(ember.DTypeError, match=r"\[quantized.dynamic.Linear\]"):
        q(ember.zeros(2, 4, dtype=ember.float64))
    with pytest.raises(ember.ShapeError, match=r"\[quantized.dynamic.Linear\]"):
        q(ember.zeros(2, 5))
    with pytest.raises(ember.DTypeError, match=r"\[quantize_dynamic\]"):
        ember.ao.quantization.quantize_dynamic(ember.nn.Linear(4, 2), dtype=ember.quint8)
    with pytest.raises(ember.DTypeError, match=r"\[quantize_per_tensor\]"):
        ember.quantize_per_tensor(ember.zeros(2), 0.1, 0, ember.int8)
    with pytest.raises(ember.EmberValueError, match=r"\[q_scale\]"):
        ember.quantize_per_channel(ember.zeros(2, 2), ember.ones(2),
                                   ember.zeros(2, dtype=ember.int64), 0, ember.qint8).q_scale()


def test_repr_matches_torch() -> None:
    q = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(ember.nn.Linear(4, 2)))
    tqm = tq.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(4, 2)))
    assert repr(q).replace("ember.", "torch.") == repr(tqm)


def test_quantize_rounds_once_like_fbgemm(kernel: str) -> None:
    """fbgemm quantizes with ``nearbyint(fma(x, 1/scale, zp))``: among these 300k values one
    (index 206370) rounds differently when the multiply and the add round separately."""
    x = (np.random.default_rng(1).standard_normal(300_000) * 3).astype(np.float32)
    want = torch.quantize_per_tensor(torch.from_numpy(x), 0.0371, 57, torch.quint8)
    got = ember.quantize_per_tensor(ember.tensor(x), 0.0371, 57, ember.quint8)
    np.testing.assert_array_equal(got.int_repr().numpy(), want.int_repr().numpy())
    codes = _qlinear_c.quantize_u8(x, np.float32(0.0371), 57, 255)
    if kernel == "c":
        np.testing.assert_array_equal(codes, want.int_repr().numpy())
    else:
        assert codes is None


@pytest.mark.parametrize("k,m,seed", [(8, 4, 0), (384, 100, 1), (1500, 33, 2)])
def test_per_token_rows_match_torch_row_by_row(k: int, m: int, seed: int, kernel: str) -> None:
    """``per_token_dynamic_qconfig`` (ember's addition): each input row gets its own scale and
    zero point over [0, 255].  The oracle: torch's per-channel ``quantized::linear_dynamic``
    with ``reduce_range=False`` called on one row at a time (its per-tensor input quantization
    then sees only that row).  fbgemm sums 8-bit codes exactly only with VNNI (its AVX2
    ``vpmaddubsw`` saturates), so the torch oracle needs an AVX512-VNNI CPU; the NumPy path
    (exact integer sums) is compared on every CPU."""
    t, e = _pair(k, m, seed, bias=seed != 2)
    tq_model = tq.quantize_dynamic(t, {torch.nn.Linear: tq.per_channel_dynamic_qconfig})
    eq_model = ember.ao.quantization.quantize_dynamic(
        e, {ember.nn.Linear: ember.ao.quantization.per_token_dynamic_qconfig})
    assert eq_model[0].per_row_input
    x = _inputs((37, k), seed)
    x[3] *= 40.0                                   # an outlier row: its own scale
    x[5] = 0.0                                     # an all-zero row
    x[6] = np.abs(x[6])                            # one-signed rows
    x[7] = -np.abs(x[7]) * 1e-7                    # a tiny row (the small-scale branch)
    got = eq_model[0](ember.tensor(x)).numpy()
    old = _qlinear_c.set_enabled(False)
    try:
        np.testing.assert_array_equal(got, eq_model[0](ember.tensor(x)).numpy())
    finally:
        _qlinear_c.set_enabled(old)
    if "avx512_vnni" not in _native._cpu_flags().split():
        pytest.skip("torch's fbgemm saturates 8-bit codes without VNNI")
    packed = tq_model[0]._packed_params._packed_params
    for i in range(x.shape[0]):
        want = torch.ops.quantized.linear_dynamic(torch.from_numpy(x[i:i + 1]), packed, False)
        np.testing.assert_array_equal(got[i:i + 1], want.numpy())


def test_choose_qparams_rows_equals_scalar() -> None:
    from ember.ao.quantization import _dynamic_kernel as kern

    rng = np.random.default_rng(5)
    lo = np.concatenate([rng.standard_normal(200) * 10 ** rng.uniform(-9, 4, 200),
                         [0, 0, -1e-7, 0, 3.0, -np.float32(6.1e-5) * 255]])
    hi = np.concatenate([lo[:200] + np.abs(rng.standard_normal(200)) * 10 **
                         rng.uniform(-9, 4, 200), [0, 1e-8, 0, 2.5, 3.0, 0]])
    s, z = kern.choose_qparams_rows(lo.astype(np.float32), hi.astype(np.float32), 0, 255, True)
    for i in range(lo.size):
        want = kern.choose_qparams(float(np.float32(lo[i])), float(np.float32(hi[i])), 0, 255,
                                   True)
        assert (s[i], z[i]) == want, (i, lo[i], hi[i])


def test_per_token_close_to_float() -> None:
    """Per-token input scales keep an outlier row from crushing the others' resolution."""
    _, e = _pair(256, 64, 8)
    x = _inputs((16, 256), 8)
    x[0] *= 100.0
    ref = e[0](ember.tensor(x)).detach().numpy()
    errs = {}
    for name, qc in [("tensor", ember.ao.quantization.per_channel_dynamic_qconfig),
                     ("token", ember.ao.quantization.per_token_dynamic_qconfig)]:
        q = ember.ao.quantization.quantize_dynamic(e, {ember.nn.Linear: qc})
        errs[name] = np.abs(q[0](ember.tensor(x)).numpy() - ref)[1:].max()
    assert errs["token"] < errs["tensor"] / 10


@pytest.mark.parametrize("per_channel", [False, True])
def test_save_load_quantized_state_dict_both_ways_with_torch(per_channel: bool, tmp_path) -> None:
    """``ember.save`` writes quantized weights as ``torch.save`` does
    (``torch._utils._rebuild_qtensor``, a QInt8Storage), so ``torch.load(weights_only=True)``
    reads them; ``ember.load`` reads torch's.  Loaded models give the original's bits."""
    t, e = _pair(20, 7, 11)
    tqc = {torch.nn.Linear: tq.per_channel_dynamic_qconfig} if per_channel else {torch.nn.Linear}
    eqc = ({ember.nn.Linear: ember.ao.quantization.per_channel_dynamic_qconfig} if per_channel
           else {ember.nn.Linear})
    t_q, e_q = tq.quantize_dynamic(t, tqc), ember.ao.quantization.quantize_dynamic(e, eqc)
    x = _inputs((6, 20), 11)
    want = t_q(torch.from_numpy(x)).detach().numpy()
    ember.save(e_q.state_dict(), tmp_path / "e.pt")
    t2 = tq.quantize_dynamic(_pair(20, 7, 12)[0], tqc)
    t2.load_state_dict(torch.load(tmp_path / "e.pt", weights_only=True))
    np.testing.assert_array_equal(t2(torch.from_numpy(x)).detach().numpy(), want)
    torch.save(t_q.state_dict(), tmp_path / "t.pt")
    e2 = ember.ao.quantization.quantize_dynamic(_pair(20, 7, 12)[1], eqc)
    e2.load_state_dict(ember.load(tmp_path / "t.pt"))
    np.testing.assert_array_equal(e2(ember.tensor(x)).numpy(), want)
    w = ember.load(tmp_path / "t.pt")["0._packed_params._packed_params"][0]
    assert w.dtype is ember.qint8 and (w.qscheme() == "per_channel_affine") == per_channel


def test_quantized_model_under_compile_equals_eager() -> None:
    """Inside ``ember.compile`` a quantized Linear is a graph break: the float parts around it
    are compiled, the int8 kernel runs as in eager, and the result is eager's."""
    _, e = _pair(64, 32, 13)
    qc = {ember.nn.Linear: ember.ao.quantization.per_token_dynamic_qconfig}
    q = ember.ao.quantization.quantize_dynamic(e, qc)
    x = ember.tensor(_inputs((9, 64), 13))
    want = q(x).numpy() * np.float32(0.5)
    compiled = ember.compile(lambda v: q(v * 2.0) * 0.5)
    for _ in range(2):
        np.testing.assert_array_equal(compiled(x * 0.5).numpy(), want)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False),
                                                              (2, True, True)])
def test_dynamic_rnn_matches_torch(mode: str, layers: int, bidirectional: bool,
                                   batch_first: bool, kernel: str) -> None:
    """``quantize_dynamic`` replaces ``nn.LSTM``/``nn.GRU`` (torch's default set) by dynamic
    quantized ones: int8 products bit for bit torch's, float32 gate math (last-bit
    differences)."""
    torch.manual_seed(layers)
    t = getattr(torch.nn, mode)(8, 16, layers, bidirectional=bidirectional,
                                batch_first=batch_first)
    e = getattr(ember.nn, mode)(8, 16, layers, bidirectional=bidirectional,
                                batch_first=batch_first)
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    t_q = tq.quantize_dynamic(torch.nn.Sequential(t))            # default set: Linear, LSTM...
    e_q = ember.ao.quantization.quantize_dynamic(ember.nn.Sequential(e))
    assert repr(e_q).replace("ember.", "torch.") == repr(t_q)
    shape = (3, 7, 8) if batch_first else (7, 3, 8)
    x = _inputs(shape, layers)
    d = 2 if bidirectional else 1
    h0 = _inputs((layers * d, 3, 16), 5) * 0.1
    c0 = _inputs((layers * d, 3, 16), 6) * 0.1
    lstm = mode == "LSTM"
    for hx in (None, (h0, c0) if lstm else h0):
        want = t_q[0](torch.from_numpy(x), None if hx is None else
                      tuple(torch.from_numpy(v) for v in hx) if lstm else torch.from_numpy(hx))
        got = e_q[0](ember.tensor(x), None if hx is None else
                     tuple(ember.tensor(v) for v in hx) if lstm else ember.tensor(hx))
        flat_w = (want[0], *want[1]) if lstm else want
        for g, w in zip((got[0], *got[1]) if lstm else got, flat_w):
            np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=0, atol=1e-6)
    unbatched = e_q[0](ember.tensor(x[0] if batch_first else x[:, 0]))[0]
    assert tuple(unbatched.shape) == (7, 16 * d)
