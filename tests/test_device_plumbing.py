"""CPU device plumbing (issue 13): ember.cuda / amp / backends / accelerator / mps / xpu / jit /
onnx / distributed / nn.parallel, compared with what PyTorch 2.13 does on a CPU-only build."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

if torch.cuda.is_available():  # the oracle must be a machine without CUDA
    pytest.skip("these tests compare with PyTorch on a machine without CUDA",
                allow_module_level=True)


def _raises_like_torch(ember_fn, torch_fn):
    """Both raise; ember's error is an instance of the type torch raised."""
    with pytest.raises(Exception) as te:
        torch_fn()
    with pytest.raises(te.type) as ee:
        ember_fn()
    assert isinstance(ee.value, ember.EmberError)
    return ee.value


# ---------------------------------------------------------------------------------- ember.cuda
@pytest.mark.parametrize("name", ["is_available", "device_count", "is_initialized",
                                  "memory_allocated", "max_memory_allocated", "is_bf16_supported"])
def test_cuda_queries_match_torch(name):
    assert getattr(ember.cuda, name)() == getattr(torch.cuda, name)()


@pytest.mark.parametrize("call", ["manual_seed(1)", "manual_seed_all(1)", "seed()", "seed_all()",
                                  "empty_cache()"])
def test_cuda_accepted_no_ops(call):
    state = ember.get_rng_state()
    assert eval(f"ember.cuda.{call}") is None
    assert eval(f"torch.cuda.{call}") is None
    assert ember.equal(ember.get_rng_state(), state)  # seeding CUDA leaves the CPU generator


@pytest.mark.parametrize("call", ["current_device()", "get_device_name()",
                                  "get_device_capability()", "synchronize()"])
def test_cuda_device_functions_raise_like_torch(call):
    err = _raises_like_torch(lambda: eval(f"ember.cuda.{call}"),
                             lambda: eval(f"torch.cuda.{call}"))
    assert isinstance(err, AssertionError) and isinstance(err, RuntimeError)
    assert "CUDA" in str(err) and "[cuda." in str(err)


def test_cuda_set_device_raises():
    with pytest.raises(ember.DeviceError, match="CUDA"):
        ember.cuda.set_device(0)


@pytest.mark.parametrize("make", [
    lambda m: m.zeros(2).cuda(),
    lambda m: m.zeros(2).to("cuda"),
    lambda m: m.zeros(2).to(m.device("cuda:0")),
    lambda m: m.zeros(2, device="cuda"),
    lambda m: m.ones(2, device=0),
    lambda m: m.nn.Linear(2, 2).cuda(),
    lambda m: m.nn.Linear(2, 2).to("cuda"),
    lambda m: m.zeros(2).to("xpu"),
    lambda m: m.zeros(2).type("torch.cuda.FloatTensor"),
])
def test_cuda_placement_raises_torchs_error_type(make):
    err = _raises_like_torch(lambda: make(ember), lambda: make(torch))
    assert "not available" in str(err)


def test_mps_placement_raises_runtime_error_like_torch():
    _raises_like_torch(lambda: ember.zeros(2).to("mps"), lambda: torch.zeros(2).to("mps"))


def test_device_selection_idiom_runs():
    device = ember.device("cuda" if ember.cuda.is_available() else "cpu")
    model = ember.nn.Linear(3, 2).to(device)
    assert model(ember.ones(1, 3, device=device)).device == ember.device("cpu")


# ---------------------------------------------------------------------------------- amp
def test_cuda_amp_disabled_scaler_is_a_pass_through():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        s, ts = ember.cuda.amp.GradScaler(enabled=False), torch.cuda.amp.GradScaler(enabled=False)
    assert s.is_enabled() is ts.is_enabled() is False
    assert s.get_scale() == ts.get_scale() == 1.0
    assert s.state_dict() == ts.state_dict() == {}
    s.load_state_dict({})  # disabled: ignored, as in torch
    x = ember.ones(2, requires_grad=True)
    assert s.scale(x) is x
    lin = ember.nn.Linear(2, 1)
    opt = ember.optim.SGD(lin.parameters(), lr=0.1)
    lin(ember.ones(1, 2)).sum().backward()
    before = lin.weight.detach().clone()
    s.step(opt)
    s.update()
    assert ember.allclose(lin.weight.detach(), before - 0.1 * lin.weight.grad)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_cuda_amp_enabled_warns_and_disables_like_torch():
    with pytest.warns(UserWarning, match="CUDA is not available") as w_e:
        s = ember.cuda.amp.GradScaler()
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ts = torch.cuda.amp.GradScaler()
    assert any(issubclass(w.category, FutureWarning) for w in w_e)
    assert s.is_enabled() is ts.is_enabled() is False
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ac = ember.amp.autocast("cuda")
    with ac:
        assert ember.is_autocast_enabled("cuda") is False
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with ember.cuda.amp.autocast():
            assert ember.is_autocast_enabled() is False


def test_autocast_cpu_state_matches_torch():
    for dev, dtype in (("cpu", None), ("cpu", "float16")):
        kw = {} if dtype is None else {"dtype": getattr(ember, dtype)}
        tkw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
        with ember.autocast(dev, **kw), torch.autocast(dev, **tkw):
            assert ember.is_autocast_enabled(dev) is torch.is_autocast_enabled(dev) is True
            assert str(ember.get_autocast_dtype(dev)).split(".")[-1] == \
                str(torch.get_autocast_dtype(dev)).split(".")[-1]
        assert ember.is_autocast_enabled(dev) is torch.is_autocast_enabled(dev) is False
    with pytest.warns(UserWarning, match="CPU Autocast only supports"):
        with ember.autocast("cpu", dtype=ember.float64):
            assert not ember.is_autocast_enabled("cpu")
    assert ember.amp.autocast is ember.autocast


def test_autocast_bad_device_type():
    _raises_like_torch(lambda: ember.autocast("foo"), lambda: torch.autocast("foo"))
    _raises_like_torch(lambda: ember.autocast(3), lambda: torch.autocast(3))


def test_autocast_as_decorator():
    @ember.autocast("cpu")
    def f():
        return ember.is_autocast_enabled("cpu")
    assert f() is True and ember.is_autocast_enabled("cpu") is False


def _train(mod, scaler_device, steps, poison_step=None):
    """A small loop with a CPU GradScaler; returns weights, scales and state dicts."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    xs = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(steps)]
    lin = mod.nn.Linear(4, 3, bias=False)
    with mod.no_grad():
        lin.weight.copy_(mod.tensor(w0))
    opt = mod.optim.SGD(lin.parameters(), lr=0.1)
    scaler = mod.amp.GradScaler(scaler_device, init_scale=2.0**10, growth_interval=2)
    scales, results = [], []
    for i, x in enumerate(xs):
        opt.zero_grad()
        loss = lin(mod.tensor(x)).pow(2).mean()
        if i == poison_step:
            loss = loss * float("inf")
        scaled = scaler.scale(loss)
        scaled.backward()
        results.append(scaler.step(opt))
        scaler.update()
        scales.append(scaler.get_scale())
    return lin.weight.detach().numpy().copy(), scales, scaler.state_dict()


@pytest.mark.parametrize("poison", [None, 1])
def test_cpu_grad_scaler_matches_torch(poison):
    w_e, s_e, sd_e = _train(ember, "cpu", 5, poison)
    w_t, s_t, sd_t = _train(torch, "cpu", 5, poison)
    assert s_e == s_t
    assert sd_e == sd_t
    np.testing.assert_allclose(w_e, w_t, rtol=1e-5, atol=1e-6)


def test_cpu_grad_scaler_scale_and_state():
    s, ts = ember.amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    assert s.get_scale() == ts.get_scale() and s.state_dict() == ts.state_dict()
    out = s.scale([ember.ones(2), (ember.ones(1),)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert float(out[0][0]) == 65536.0
    assert s.scale(ember.ones(2, dtype=ember.bfloat16)).dtype is ember.bfloat16
    s2 = ember.amp.GradScaler("cpu")
    s2.load_state_dict({**s.state_dict(), "scale": 8.0})
    assert s2.get_scale() == 8.0
    with pytest.raises(RuntimeError, match="state dict is empty"):
        s2.load_state_dict({})
    lin = ember.nn.Linear(2, 1)
    opt = ember.optim.SGD(lin.parameters(), lr=0.1)
    s.scale(lin(ember.ones(1, 2)).sum()).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)


# ---------------------------------------------------------------------------------- backends
def test_backend_flags_match_torch_defaults_and_store():
    b, tb = ember.backends, torch.backends
    for name in ("benchmark", "deterministic", "enabled", "allow_tf32"):
        assert getattr(b.cudnn, name) == getattr(tb.cudnn, name), name
    assert b.cudnn.is_available() is tb.cudnn.is_available() is False
    assert b.cuda.is_built() is tb.cuda.is_built() is False
    assert b.mps.is_available() is tb.mps.is_available() is False
    assert b.mps.is_built() is tb.mps.is_built() is False
    assert b.openmp.is_available() is True
    assert b.cuda.matmul.allow_fp16_reduced_precision_reduction is True
    b.cudnn.benchmark = True
    try:
        assert ember.backends.cudnn.benchmark is True
        with b.cudnn.flags(enabled=False, deterministic=True):
            assert b.cudnn.deterministic is True and b.cudnn.enabled is False
        assert b.cudnn.deterministic is False and b.cudnn.benchmark is True
    finally:
        b.cudnn.benchmark = False


def test_float32_matmul_precision_and_tf32_flag_like_torch():
    for mod in (ember, torch):
        assert mod.get_float32_matmul_precision() == "highest"
        assert mod.backends.cuda.matmul.allow_tf32 is False
        try:
            mod.set_float32_matmul_precision("high")
            assert mod.get_float32_matmul_precision() == "high"
            assert mod.backends.cuda.matmul.allow_tf32 is True
            with pytest.warns(UserWarning, match="is not one of"):
                mod.set_float32_matmul_precision("foo")
            assert mod.get_float32_matmul_precision() == "high"
        finally:
            mod.set_float32_matmul_precision("highest")
    # the legacy setter (torch then refuses to answer get_float32_matmul_precision(): not
    # compared)
    ember.backends.cuda.matmul.allow_tf32 = True
    assert ember.get_float32_matmul_precision() == "high"
    ember.backends.cuda.matmul.allow_tf32 = False
    assert ember.get_float32_matmul_precision() == "highest"


def test_deterministic_algorithms_like_torch():
    for mod in (ember, torch):
        assert mod.are_deterministic_algorithms_enabled() is False
        try:
            mod.use_deterministic_algorithms(True, warn_only=True)
            assert mod.are_deterministic_algorithms_enabled() is True
            assert mod.is_deterministic_algorithms_warn_only_enabled() is True
        finally:
            mod.use_deterministic_algorithms(False)
        assert mod.is_deterministic_algorithms_warn_only_enabled() is False


def test_default_device():
    assert ember.get_default_device() == ember.device("cpu")
    ember.set_default_device("cpu")
    ember.set_default_device(None)
    with pytest.raises(AssertionError, match="CUDA"):
        ember.set_default_device("cuda")
    assert ember.zeros(1).device == ember.device("cpu")


def test_accelerator_mps_xpu_like_torch():
    assert ember.accelerator.is_available() is torch.accelerator.is_available() is False
    assert ember.accelerator.current_accelerator() is torch.accelerator.current_accelerator()
    assert ember.accelerator.device_count() == torch.accelerator.device_count() == 0
    _raises_like_torch(ember.accelerator.current_device_index,
                       torch.accelerator.current_device_index)
    assert ember.mps.is_available() is torch.mps.is_available() is False
    assert ember.mps.manual_seed(0) is torch.mps.manual_seed(0) is None
    _raises_like_torch(ember.mps.synchronize, torch.mps.synchronize)
    assert ember.xpu.is_available() is torch.xpu.is_available() is False
    assert ember.xpu.device_count() == torch.xpu.device_count() == 0
    _raises_like_torch(ember.xpu.synchronize, torch.xpu.synchronize)


# ---------------------------------------------------------------------------------- imports
def test_data_parallel_is_the_module_without_gpus():
    lin = ember.nn.Linear(2, 3)
    dp = ember.nn.DataParallel(lin, device_ids=[0, 1])
    tdp = torch.nn.DataParallel(torch.nn.Linear(2, 3), device_ids=[0, 1])
    assert ember.nn.parallel.DataParallel is ember.nn.DataParallel
    assert dp.module is lin and dp.device_ids == tdp.device_ids == []
    assert list(dp.state_dict()) == list(tdp.state_dict()) == ["module.weight", "module.bias"]
    x = ember.ones(4, 2)
    assert ember.equal(dp(x), lin(x))
    assert ember.equal(ember.nn.parallel.data_parallel(lin, x), lin(x))


def test_ddp_needs_a_process_group_like_torch():
    _raises_like_torch(lambda: ember.nn.parallel.DistributedDataParallel(ember.nn.Linear(2, 2)),
                       lambda: torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2)))


def test_distributed_and_onnx():
    import ember.distributed as dist
    assert dist.is_initialized() is torch.distributed.is_initialized() is False
    try:
        import mpi4py  # noqa: F401
        has_mpi = True
    except ImportError:
        has_mpi = False
    assert dist.is_available() is has_mpi
    _raises_like_torch(dist.get_rank, torch.distributed.get_rank)
    for name in ("get_world_size", "barrier", "get_backend"):
        _raises_like_torch(getattr(dist, name), getattr(torch.distributed, name))
    _raises_like_torch(lambda: dist.all_reduce(ember.ones(1)),
                       lambda: torch.distributed.all_reduce(torch.ones(1)))
    from ember.distributed import destroy_process_group, init_process_group  # noqa: F401
    if not has_mpi:  # with MPI, tests/distributed covers init_process_group
        with pytest.raises(NotImplementedError, match="not available"):
            init_process_group("gloo")
    assert dist.ReduceOp.SUM.name == "SUM"
    with pytest.raises(NotImplementedError, match=r"\[onnx.export\] ONNX export is not supported"):
        ember.onnx.export(ember.nn.Linear(2, 2), (ember.ones(1, 2),), "/nonexistent/m.onnx")


def test_jit_returns_the_module_and_warns_once(monkeypatch):
    monkeypatch.setattr(ember.jit, "_warned", [False])
    lin = ember.nn.Linear(2, 2)
    with pytest.warns(UserWarning, match="no TorchScript"):
        assert ember.jit.script(lin) is lin
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ember.jit.trace(lin, ember.ones(1, 2)) is lin  # the second call is silent

    @ember.jit.ignore
    def f(x):
        return x + 1

    @ember.jit.ignore(drop=True)
    def g(x):
        return x

    assert f(1) == 2 and g(3) == 3 and ember.jit.unused(f) is f and ember.jit.export(f) is f
    assert ember.jit.is_scripting() is torch.jit.is_scripting() is False
    assert ember.jit.is_tracing() is torch.jit.is_tracing() is False

    class M(ember.nn.Module):
        n: ember.jit.Final[int] = 3

    assert M.n == 3


def test_import_statements_of_real_scripts():
    import importlib
    for name in ("ember.nn.parallel", "ember.onnx", "ember.distributed", "ember.jit",
                 "ember.cuda.amp", "ember.backends.cudnn", "ember._dynamo.exc", "ember.amp"):
        assert importlib.import_module(name) is not None
    from ember.cuda.amp import GradScaler, autocast  # noqa: F401
    from ember.nn.parallel import DistributedDataParallel as DDP  # noqa: F401


# ---------------------------------------------------------------------------------- a script
def _script_header_and_loop(torch, w1, w2, xs, ys, use_amp):
    """The first lines and training loop of the well-known example scripts, as written for
    PyTorch (CUDA if present, cudnn flags, GradScaler/autocast, DataParallel, jit, dynamo)."""
    use_cuda = torch.cuda.is_available()
    torch.manual_seed(1)
    torch.cuda.manual_seed_all(1)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda" if use_cuda else "cpu")
    kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}
    assert kwargs == {}
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor(w1))
        model[2].weight.copy_(torch.tensor(w2))
        model[0].bias.zero_()
        model[2].bias.zero_()
    if torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)
    model = torch.nn.DataParallel(model).to(device)
    model = torch.jit.script(model) if torch.jit.is_scripting() else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.cuda.amp.GradScaler(enabled=use_amp and use_cuda)
    losses = []
    for x, y in zip(xs, ys):
        x, y = torch.tensor(x).to(device), torch.tensor(y).to(device)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, enabled=use_amp and use_cuda):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses, list(model.state_dict())


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_script_header_runs_unchanged_with_torchs_numbers():
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 4)).astype(np.float32) * 0.5
    w2 = rng.standard_normal((3, 8)).astype(np.float32) * 0.5
    xs = [rng.standard_normal((6, 4)).astype(np.float32) for _ in range(4)]
    ys = [rng.integers(0, 3, 6) for _ in range(4)]
    got, keys_e = _script_header_and_loop(ember, w1, w2, xs, ys, use_amp=True)
    want, keys_t = _script_header_and_loop(torch, w1, w2, xs, ys, use_amp=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert keys_e == keys_t
    ember.backends.cudnn.deterministic = torch.backends.cudnn.deterministic = False


@pytest.mark.parametrize("name", ["FloatTensor", "LongTensor", "BoolTensor"])
def test_cuda_legacy_types_like_torch(name):
    E, T = getattr(ember.cuda, name), getattr(torch.cuda, name)
    assert isinstance(ember.ones(2), E) is isinstance(torch.ones(2), T) is False
    _raises_like_torch(lambda: E(2), lambda: T(2))
    _raises_like_torch(lambda: E([1]), lambda: T([1]))
