"""Conv, pooling and normalization modules against torch.nn (float64, state copied from
torch): outputs, gradients, reprs, state_dict keys, running statistics, errors."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.nn.modules import batchnorm as EB
from ember.nn.modules import conv as EC
from ember.nn.modules import instancenorm as EI
from ember.nn.modules import normalization as EN
from ember.nn.modules import pooling as EP
from tests.nn._layer_utils import assert_close_all, load_from_torch, run_both, to_np

torch = pytest.importorskip("torch")
tnn = torch.nn

E = {**{n: getattr(EC, n) for n in EC.__all__}, **{n: getattr(EP, n) for n in EP.__all__},
     **{n: getattr(EB, n) for n in EB.__all__}, **{n: getattr(EN, n) for n in EN.__all__},
     **{n: getattr(EI, n) for n in EI.__all__}}


def pair(name, *args, **kwargs):
    e = E[name](*args, dtype=ember.float64, **kwargs)
    t = getattr(tnn, name)(*args, dtype=torch.float64, **kwargs)
    load_from_torch(e, t)
    return e, t


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def check_meta(e, t):
    assert repr(e) == repr(t).replace("torch.", "ember.")
    assert list(e.state_dict().keys()) == list(t.state_dict().keys())
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    for (n, a), (_, b) in zip(e.state_dict().items(), t.state_dict().items()):
        assert tuple(a.shape) == tuple(b.shape), n
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1], n


CONV_CASES = [
    ("Conv1d", (3, 4, 3), {}, (2, 3, 9)),
    ("Conv1d", (4, 6, 3), dict(stride=2, padding=1, dilation=2, groups=2), (2, 4, 11)),
    ("Conv1d", (3, 4, 4), dict(padding="same", padding_mode="reflect"), (2, 3, 9)),
    ("Conv1d", (3, 4, 3), dict(padding=2, padding_mode="circular", bias=False), (3, 7)),
    ("Conv2d", (3, 4, 3), {}, (2, 3, 7, 6)),
    ("Conv2d", (4, 6, (3, 2)), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
     (2, 4, 8, 7)),
    ("Conv2d", (3, 4, 4), dict(padding="same", dilation=2), (2, 3, 9, 8)),
    ("Conv2d", (3, 2, 3), dict(padding="valid"), (1, 3, 5, 5)),
    ("Conv2d", (3, 2, (4, 3)), dict(padding="same"), (1, 3, 6, 5)),
    ("Conv2d", (2, 4, 2), dict(padding="same", padding_mode="circular", groups=2), (1, 2, 5, 4)),
    ("Conv2d", (3, 4, 3), dict(padding=1, padding_mode="reflect"), (2, 3, 6, 6)),
    ("Conv2d", (3, 4, 3), dict(padding=(2, 1), padding_mode="replicate"), (2, 3, 6, 6)),
    ("Conv2d", (3, 4, 3), dict(padding=1, padding_mode="circular", bias=False), (3, 6, 5)),
    ("ConvTranspose1d", (3, 4, 3), dict(stride=2, padding=1, output_padding=1), (2, 3, 6)),
    ("ConvTranspose2d", (3, 4, 3), {}, (2, 3, 5, 4)),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, groups=2,
                                        dilation=1), (2, 4, 5, 4)),
    ("ConvTranspose2d", (3, 2, (2, 3)), dict(stride=(1, 2), dilation=2, bias=False),
     (2, 3, 4, 4)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", CONV_CASES)
def test_conv_modules(name, args, kwargs, shape):
    e, t = pair(name, *args, **kwargs)
    check_meta(e, t)
    outs = run_both(e, t, torch, rand(*shape))
    assert_close_all(e, t, *outs)


def test_conv_transpose_output_size():
    e, t = pair("ConvTranspose2d", 3, 4, 3, stride=2, padding=1)
    x = rand(1, 3, 4, 4)
    for size in ([8, 8], [1, 4, 8, 7]):
        outs = run_both(e, t, torch, x, output_size=size)
        assert tuple(outs[0].shape) == tuple(outs[1].shape)
        assert_close_all(e, t, *outs)
    with pytest.raises(ValueError, match="requested an output size of"):
        e(ember.tensor(x), output_size=[10, 10])


def test_conv_default_init_statistics():
    # ember draws from its own generator; the bounds come from torch's formulas
    e = EC.Conv2d(16, 8, 3)
    bound_w = 1 / np.sqrt(16 * 9)  # kaiming_uniform(a=sqrt(5)) gives 1/sqrt(fan_in)
    w, b = to_np(e.weight), to_np(e.bias)
    assert e.weight.dtype == ember.float32 and w.shape == (8, 16, 3, 3)
    assert np.abs(w).max() <= bound_w and np.abs(w).max() > 0.8 * bound_w
    assert np.abs(b).max() <= bound_w
    et = EC.ConvTranspose2d(4, 6, 3, groups=2)
    assert tuple(et.weight.shape) == (4, 3, 3, 3)


@pytest.mark.parametrize("kwargs,match", [
    (dict(groups=0), "groups must be a positive integer"),
    (dict(groups=2), "in_channels must be divisible by groups"),
    (dict(padding="full"), "Invalid padding string 'full'"),
    (dict(padding="same", stride=2), "padding='same' is not supported for strided"),
    (dict(padding_mode="mirror"), "padding_mode must be one of"),
])
def test_conv_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EC.Conv2d(3, 4, 3, **kwargs)
    with pytest.raises(ValueError, match=match):
        tnn.Conv2d(3, 4, 3, **kwargs)


def test_conv_transpose_padding_mode_error():
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for '
                                         "ConvTranspose2d"):
        EC.ConvTranspose2d(3, 4, 3, padding_mode="reflect")


POOL_CASES = [
    ("MaxPool2d", (2,), {}, (2, 3, 6, 7)),
    ("MaxPool2d", (3,), dict(stride=2, padding=1, dilation=1, ceil_mode=True), (2, 3, 7, 7)),
    ("MaxPool2d", ((2, 3),), dict(stride=(1, 2), dilation=(2, 1)), (3, 8, 8)),
    ("MaxPool1d", (3,), dict(stride=2, padding=1), (2, 3, 9)),
    ("AvgPool2d", (2,), {}, (2, 3, 6, 7)),
    ("AvgPool2d", (3,), dict(stride=2, padding=1, count_include_pad=False, ceil_mode=True),
     (2, 3, 7, 7)),
    ("AvgPool2d", (2,), dict(divisor_override=3), (1, 2, 4, 4)),
    ("AvgPool1d", (3,), dict(stride=2, padding=1), (2, 3, 9)),
    ("AdaptiveAvgPool2d", ((3, 2),), {}, (2, 3, 7, 5)),
    ("AdaptiveAvgPool2d", ((None, 2),), {}, (2, 3, 7, 5)),
    ("AdaptiveAvgPool2d", (1,), {}, (3, 4, 4)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 9)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", POOL_CASES)
def test_pool_modules(name, args, kwargs, shape):
    e, t = E[name](*args, **kwargs), getattr(tnn, name)(*args, **kwargs)
    assert repr(e) == repr(t)
    outs = run_both(e, t, torch, rand(*shape))
    assert_close_all(e, t, *outs)


def test_maxpool_return_indices():
    e, t = EP.MaxPool2d(2, return_indices=True), tnn.MaxPool2d(2, return_indices=True)
    x = rand(2, 3, 4, 6)
    (eo, ei), (to, ti) = e(ember.tensor(x)), t(torch.tensor(x))
    np.testing.assert_array_equal(to_np(eo), to_np(to))
    np.testing.assert_array_equal(to_np(ei), to_np(ti))


NORM_CASES = [
    ("LayerNorm", (6,), {}, (2, 3, 6)),
    ("LayerNorm", ((3, 6),), dict(eps=1e-3), (2, 3, 6)),
    ("LayerNorm", ([6],), dict(bias=False), (4, 6)),
    ("LayerNorm", (6,), dict(elementwise_affine=False), (2, 3, 6)),
    ("RMSNorm", (6,), {}, (2, 3, 6)),
    ("RMSNorm", ([3, 6],), dict(eps=1e-4), (2, 3, 6)),
    ("RMSNorm", (6,), dict(elementwise_affine=False), (5, 6)),
    ("GroupNorm", (2, 6), {}, (3, 6, 4, 5)),
    ("GroupNorm", (3, 6), dict(eps=1e-3, affine=False), (3, 6, 7)),
    ("GroupNorm", (1, 4), {}, (2, 4)),
    ("GroupNorm", (2, 4), dict(bias=False), (2, 4, 3)),
]


def _perturb(e, t, seed=3):
    """Give affine params non-trivial values (same in both) so their grads matter."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in t.parameters():
            p.add_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))
    load_from_torch(e, t)


@pytest.mark.parametrize("name,args,kwargs,shape", NORM_CASES)
def test_norm_modules(name, args, kwargs, shape):
    e, t = pair(name, *args, **kwargs)
    check_meta(e, t)
    _perturb(e, t)
    outs = run_both(e, t, torch, rand(*shape))
    assert_close_all(e, t, *outs, rtol=1e-9, atol=1e-9)


def test_group_norm_error():
    with pytest.raises(ValueError,
                       match=r"num_channels \(6\) must be divisible by num_groups \(4\)"):
        EN.GroupNorm(4, 6)


BN_CASES = [
    ("BatchNorm1d", (4,), {}, (8, 4)),
    ("BatchNorm1d", (4,), dict(momentum=0.3, eps=1e-3), (5, 4, 3)),
    ("BatchNorm1d", (4,), dict(momentum=None), (6, 4, 2)),
    ("BatchNorm2d", (3,), {}, (4, 3, 5, 4)),
    ("BatchNorm2d", (3,), dict(affine=False), (4, 3, 2, 2)),
    ("BatchNorm2d", (3,), dict(momentum=None, affine=False), (2, 3, 3, 2)),
    ("BatchNorm2d", (3,), dict(track_running_stats=False), (4, 3, 5, 4)),
    ("BatchNorm2d", (3,), dict(bias=False), (4, 3, 2, 3)),
    ("BatchNorm3d", (2,), dict(momentum=0.2), (3, 2, 2, 3, 2)),
    ("InstanceNorm1d", (3,), {}, (2, 3, 6)),
    ("InstanceNorm1d", (3,), dict(affine=True), (3, 5)),
    ("InstanceNorm2d", (3,), dict(affine=True, track_running_stats=True), (2, 3, 4, 5)),
    ("InstanceNorm2d", (3,), dict(track_running_stats=True, momentum=0.3), (3, 4, 4)),
    ("InstanceNorm3d", (2,), dict(affine=True, bias=False), (2, 2, 3, 3, 2)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", BN_CASES)
def test_batchnorm_train_eval(name, args, kwargs, shape):
    e, t = pair(name, *args, **kwargs)
    check_meta(e, t)
    if kwargs.get("affine", True):
        _perturb(e, t)
    for step in range(3):
        for p in list(e.parameters()) + list(t.parameters()):
            p.grad = None
        outs = run_both(e, t, torch, rand(*shape, seed=step) * (step + 1) + step,
                        seed_grad=step)
        assert_close_all(e, t, *outs, rtol=1e-9, atol=1e-9)
    for (n, a), (_, b) in zip(e.state_dict().items(), t.state_dict().items()):
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-12, atol=1e-12, err_msg=n)
    if e.num_batches_tracked is not None and name.startswith("Batch"):
        assert e.num_batches_tracked.dtype == ember.int64 and int(e.num_batches_tracked) == 3
    e.eval()
    t.eval()
    outs = run_both(e, t, torch, rand(*shape, seed=9), seed_grad=9)
    assert_close_all(e, t, *outs, rtol=1e-9, atol=1e-9)


def test_batchnorm_reset_and_errors():
    e, t = pair("BatchNorm2d", 3)
    e(ember.tensor(rand(2, 3, 2, 2) + 1))
    e.reset_running_stats()
    np.testing.assert_array_equal(to_np(e.running_mean), np.zeros(3))
    np.testing.assert_array_equal(to_np(e.running_var), np.ones(3))
    assert int(e.num_batches_tracked) == 0
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        e(ember.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        EB.BatchNorm1d(3)(ember.ones(2, 3, 4, 4))
    # a state dict without num_batches_tracked (old checkpoints) still loads
    sd = {k: v for k, v in e.state_dict().items() if k != "num_batches_tracked"}
    e.load_state_dict(sd)


def test_norm_dtype_device_kwargs():
    for m in (EB.BatchNorm1d(3, dtype=ember.float64, device="cpu"),
              EN.LayerNorm(3, dtype=ember.float64), EN.GroupNorm(1, 3, dtype=ember.float64),
              EN.RMSNorm(3, dtype=ember.float64), EC.Conv1d(2, 3, 1, dtype=ember.float64)):
        assert all(p.dtype == ember.float64 for p in m.parameters())
    assert EB.BatchNorm1d(3, dtype=ember.float16).num_batches_tracked.dtype == ember.int64


@pytest.mark.parametrize("name,args,shape", [
    ("Conv2d", (3, 4, 3), (2, 3, 6, 6)),
    ("ConvTranspose2d", (3, 4, 3), (2, 3, 4, 4)),
    ("BatchNorm2d", (3,), (4, 3, 3, 3)),
    ("LayerNorm", (6,), (3, 6)),
    ("GroupNorm", (2, 4), (3, 4, 5)),
])
def test_float32_default_dtype(name, args, shape):
    e, t = E[name](*args), getattr(tnn, name)(*args)
    load_from_torch(e, t)
    assert all(p.dtype == ember.float32 for p in e.parameters())
    outs = run_both(e, t, torch, rand(*shape).astype(np.float32))
    assert outs[0].dtype == ember.float32
    assert_close_all(e, t, *outs, rtol=1e-4, atol=1e-5)


def test_copy_pickle_and_to():
    import copy
    import pickle
    m = EB.BatchNorm1d(3, momentum=None)
    m(ember.tensor(rand(4, 3).astype(np.float32)))
    for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert repr(c) == repr(m)
        for (n, a), (_, b) in zip(c.state_dict().items(), m.state_dict().items()):
            np.testing.assert_array_equal(to_np(a), to_np(b), err_msg=n)
        assert c.running_mean is not m.running_mean
    conv = EC.Conv2d(2, 3, 3, padding_mode="reflect", padding=1)
    w = conv.weight
    conv.double()
    assert conv.weight is w and w.dtype == ember.float64
    assert conv(ember.ones(1, 2, 4, 4, dtype=ember.float64)).dtype == ember.float64
    m.double()
    assert m.running_mean.dtype == ember.float64 and m.num_batches_tracked.dtype == ember.int64


def test_instance_norm_errors():
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D input\)"):
        EI.InstanceNorm2d(3)(ember.ones(2, 3))
    with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features "
                                         r"\(3\), but got: 4."):
        EI.InstanceNorm1d(3, affine=True)(ember.ones(2, 4, 5))
    with pytest.warns(UserWarning, match="does not match num_features"):
        EI.InstanceNorm1d(3)(ember.ones(2, 4, 5))


@pytest.mark.parametrize("ndim", [2, 3, 4])
def test_batch_norm_grad_fn_is_named_as_pytorch(ndim):
    """Training-mode batch norm runs ember's layer-norm op; its node has PyTorch's name."""
    shape = (4, 3, 5, 6)[:ndim]
    data = np.random.default_rng(0).standard_normal(shape)
    x = ember.tensor(data, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    mod = {2: "BatchNorm1d", 3: "BatchNorm1d", 4: "BatchNorm2d"}[ndim]
    y = getattr(ember.nn, mod)(3, dtype=ember.float64)(x)
    ty = getattr(tnn, mod)(3, dtype=torch.float64)(tx)
    assert y.grad_fn.name() == ty.grad_fn.name() == "NativeBatchNormBackward0"
    assert repr(y.grad_fn).startswith("<NativeBatchNormBackward0 object")
    assert "grad_fn=<NativeBatchNormBackward0>" in repr(y)
    ln = ember.nn.functional.layer_norm(x, shape[-1:])
    assert ln.grad_fn.name() == torch.nn.functional.layer_norm(tx, shape[-1:]).grad_fn.name()
    (y * y).sum().backward()      # the math is unchanged: gradients as PyTorch's
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-9)
