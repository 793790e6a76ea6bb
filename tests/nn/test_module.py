"""ember.nn.Module against torch.nn.Module on the same small module tree."""

from __future__ import annotations

import copy
import pickle
import re
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import ember
from tests.nn._tree import fill_deterministic, make_classes, to_np

torch = pytest.importorskip("torch")

E = make_classes(ember)
T = make_classes(torch)


def both(name: str = "Net") -> tuple:
    e, t = E[name](), T[name]()
    fill_deterministic(ember, e)
    fill_deterministic(torch, t)
    return e, t


def msg(exc: BaseException) -> str:
    """PyTorch's text of an error: ember's op tag dropped, torch's names read as ember's."""
    text = re.sub(r"^\[load_state_dict\] ", "", str(exc))
    return text.replace("torch.", "ember.").replace("torch ", "ember ")


def same_error(fe, ft) -> None:
    with pytest.raises(Exception) as te:
        ft()
    with pytest.raises(type(te.value)) as ee:
        fe()
    assert msg(ee.value) == msg(te.value)


# ---------------------------------------------------------------------------- Parameter
def test_parameter_basics():
    x = ember.tensor([1.0, 2.0])
    p = ember.nn.Parameter(x)
    tp = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    assert isinstance(p, ember.Tensor) and p.is_leaf and p.requires_grad
    assert repr(p) == repr(tp)
    assert repr(ember.nn.Parameter()) == repr(torch.nn.Parameter())
    assert repr(ember.nn.Parameter(ember.tensor([1, 2]), requires_grad=False)) == repr(
        torch.nn.Parameter(torch.tensor([1, 2]), requires_grad=False))
    # shares memory with data
    with ember.no_grad():
        p.mul_(2)
    assert x.tolist() == [2.0, 4.0]
    # ops return plain tensors
    assert type(p * 2) is ember.Tensor and type(p.detach()) is ember.Tensor
    # non-leaf input becomes a leaf
    y = ember.tensor([1.0], requires_grad=True) * 2
    assert ember.nn.Parameter(y).is_leaf


def test_parameter_deepcopy_and_pickle():
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    p.grad = ember.tensor([0.5, 0.5])
    q = copy.deepcopy(p)
    assert type(q) is ember.nn.Parameter and q.requires_grad and q.tolist() == [1.0, 2.0]
    assert q.grad.tolist() == [0.5, 0.5]
    assert q.data_ptr() != p.data_ptr()
    r = pickle.loads(pickle.dumps(p))
    assert type(r) is ember.nn.Parameter and r.requires_grad and r.tolist() == [1.0, 2.0]


def test_parameter_grad_flows():
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    (p * p).sum().backward()
    assert p.grad.tolist() == [2.0, 4.0]


# ---------------------------------------------------------------------------- traversal
def test_named_members_order():
    e, t = both()
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in e.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in e.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in e.named_children()] == [n for n, _ in t.named_children()]
    assert [n for n, _ in e.named_parameters(prefix="m", recurse=False)] == \
        [n for n, _ in t.named_parameters(prefix="m", recurse=False)]
    assert [n for n, _ in e.block.named_parameters(prefix="x")] == \
        [n for n, _ in t.block.named_parameters(prefix="x")]
    assert [n for n, _ in e.named_modules(prefix="root")] == \
        [n for n, _ in t.named_modules(prefix="root")]
    assert len(list(e.parameters())) == len(list(t.parameters())) == 7
    assert len(list(e.children())) == 3 and len(list(e.modules())) == 7


def test_shared_parameters_and_modules():
    for lib, C in ((ember, E), (torch, T)):
        net = C["Net"]()
        net.steps[1].weight = net.steps[0].weight
        net.alias = net.head
        lib._names = (
            [n for n, _ in net.named_parameters()],
            [n for n, _ in net.named_parameters(remove_duplicate=False)],
            [n for n, _ in net.named_modules()],
            [n for n, _ in net.named_modules(remove_duplicate=False)],
            [n for n, _ in net.named_children()],
        )
    assert ember._names == torch._names
    del ember._names, torch._names


def test_setattr_routing_and_delattr():
    e, t = both("Block")
    for m, lib in ((e, ember), (t, torch)):
        m.extra = lib.nn.Parameter(lib.zeros(1))
        m.plain = 3
        m.running = lib.ones(3)       # reassigning a buffer keeps it a buffer
        m.fc = None                    # a module slot may be set to None
    assert list(e._parameters) == list(t._parameters)
    assert list(e._buffers) == list(t._buffers)
    assert list(e._modules) == list(t._modules) and e.fc is None
    assert e.plain == 3 and "plain" in e.__dict__
    del e.extra, e.running, e.plain
    assert "extra" not in e._parameters and "running" not in e._buffers
    with pytest.raises(AttributeError, match="'Block' object has no attribute 'nope'"):
        e.nope  # noqa: B018


def test_registration_errors():
    e, t = both("Block")
    cases = [
        (lambda m, lib: m.register_parameter("a.b", None)),
        (lambda m, lib: m.register_parameter("", None)),
        (lambda m, lib: m.register_parameter(3, None)),
        (lambda m, lib: m.register_parameter("fc", None)),
        (lambda m, lib: m.register_parameter("w", lib.zeros(2))),
        (lambda m, lib: m.register_parameter(
            "w", lib.nn.Parameter(lib.zeros(2)) * 2)),
        (lambda m, lib: m.register_buffer("a.b", None)),
        (lambda m, lib: m.register_buffer("", None)),
        (lambda m, lib: m.register_buffer("fc", None)),
        (lambda m, lib: m.register_buffer("x", 3)),
        (lambda m, lib: m.add_module("a.b", lib.nn.Module())),
        (lambda m, lib: m.add_module("", lib.nn.Module())),
        (lambda m, lib: m.add_module("x", 3)),
        (lambda m, lib: m.add_module("running", lib.nn.Module())),
        (lambda m, lib: setattr(m, "fc", 3)),
        (lambda m, lib: m.train("yes")),
        (lambda m, lib: m.get_submodule("fc.weight")),
        (lambda m, lib: m.get_submodule("nope")),
        (lambda m, lib: m.get_parameter("fc.nope")),
        (lambda m, lib: m.get_parameter("running")),
        (lambda m, lib: lib.nn.Module()(1)),
    ]
    for case in cases:
        with pytest.raises(Exception) as te:
            case(t, torch)
        with pytest.raises(type(te.value)) as ee:
            case(e, ember)
        # Tensor type names differ (torch.FloatTensor / ember.FloatTensor): compare the rest
        assert msg(ee.value) == msg(te.value)


def test_setattr_parameter_slot_type_error():
    e, t = both("Block")
    same_error(lambda: setattr(e.fc, "weight", ember.zeros(3, 4)),
               lambda: setattr(t.fc, "weight", torch.zeros(3, 4)))


def test_get_submodule_and_parameter():
    e, _ = both()
    assert e.get_submodule("") is e
    assert e.get_submodule("steps.1") is e.steps[1]
    assert e.get_parameter("block.fc.weight") is e.block.fc.weight
    assert e.get_buffer("block.running") is e.block.running


# ---------------------------------------------------------------------------- state_dict
def test_state_dict_matches_torch():
    e, t = both()
    se, st = e.state_dict(), t.state_dict()
    assert isinstance(se, OrderedDict)
    assert list(se) == list(st)
    assert "block.scratch" not in se
    for k in se:
        np.testing.assert_array_equal(to_np(se[k]), to_np(st[k]))
        assert type(se[k]) is ember.Tensor and not se[k].requires_grad
    assert list(se._metadata) == list(st._metadata)
    kv = e.state_dict(keep_vars=True)
    assert kv["head.weight"] is e.head.weight
    assert list(e.state_dict(prefix="p.")) == list(t.state_dict(prefix="p."))
    # detached values share memory with the parameters
    assert se["head.weight"].data_ptr() == e.head.weight.data_ptr()


def test_load_state_dict_roundtrip_in_place():
    e, t = both()
    src = E["Net"]()
    with ember.no_grad():
        for p in src.parameters():
            p.fill_(0.25)
    w = e.head.weight
    res = e.load_state_dict(src.state_dict())
    assert e.head.weight is w and w.tolist() == [[0.25] * 3] * 2
    assert repr(res) == repr(t.load_state_dict(t.state_dict())) == "<All keys matched successfully>"
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert w._version > 0


def _torch_sd_as_ember(sd: dict) -> OrderedDict:
    return OrderedDict((k, ember.tensor(v.numpy())) for k, v in sd.items())


def test_load_state_dict_errors_match_torch():
    e, t = both()
    st = t.state_dict()
    bad = OrderedDict(st)
    del bad["head.weight"]
    bad["extra.key"] = torch.zeros(1)
    bad["block.fc.bias"] = torch.zeros(5)
    bad["block.nothing"] = torch.zeros(1)
    with pytest.raises(RuntimeError) as te:
        t.load_state_dict(bad)
    with pytest.raises(RuntimeError) as ee:
        e.load_state_dict(_torch_sd_as_ember(bad))
    assert isinstance(ee.value, ember.EmberRuntimeError)  # typed, op-tagged, PyTorch's text
    assert str(ee.value).startswith("[load_state_dict] Error(s) in loading state_dict for Net:")
    assert msg(ee.value) == msg(te.value)
    assert "size mismatch for block.fc.bias: copying a param with shape ember.Size([5])" \
        in str(ee.value)
    # non-strict: missing/unexpected returned, size mismatch still raises
    del bad["block.fc.bias"]
    rt = t.load_state_dict(bad, strict=False)
    re_ = e.load_state_dict(_torch_sd_as_ember(bad), strict=False)
    assert re_.missing_keys == rt.missing_keys and re_.unexpected_keys == rt.unexpected_keys
    assert repr(re_) == repr(rt)
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        e.load_state_dict([1, 2])


def test_load_state_dict_each_size_mismatch_named():
    e, t = both()
    bad_t = OrderedDict(t.state_dict())
    bad_t["head.weight"] = torch.zeros(3, 3)
    bad_t["steps.0.bias"] = torch.zeros(4)
    with pytest.raises(RuntimeError) as te:
        t.load_state_dict(bad_t)
    with pytest.raises(RuntimeError) as ee:
        e.load_state_dict(_torch_sd_as_ember(bad_t))
    assert msg(ee.value) == msg(te.value)
    assert re.search(r"size mismatch for head\.weight.*\n\tsize mismatch for steps\.0\.bias",
                     str(ee.value))


def test_load_state_dict_assign():
    e, _ = both()
    new = ember.full((2, 3), 7.0)
    e.load_state_dict({**e.state_dict(), "head.weight": new}, assign=True)
    assert isinstance(e.head.weight, ember.nn.Parameter) and e.head.weight.requires_grad
    assert e.head.weight.data_ptr() == new.data_ptr()


# ---------------------------------------------------------------------------- modes, grads
def test_train_eval_flags():
    e, t = both()
    for m in (e, t):
        m.eval()
        m.steps.train()
    assert [x.training for x in e.modules()] == [x.training for x in t.modules()]
    assert e.train() is e and all(x.training for x in e.modules())


def test_forward_matches_torch_and_zero_grad():
    e, t = both()
    x = np.linspace(-1, 1, 8).reshape(2, 4)
    ye, yt = e(ember.tensor(x, dtype=ember.float32)), t(torch.tensor(x, dtype=torch.float32))
    np.testing.assert_allclose(to_np(ye), to_np(yt), rtol=1e-6, atol=1e-6)
    ye.sum().backward()
    yt.sum().backward()
    for (n, pe), (_, pt) in zip(e.named_parameters(), t.named_parameters()):
        np.testing.assert_allclose(to_np(pe.grad), to_np(pt.grad), rtol=1e-5, atol=1e-6,
                                   err_msg=n)
    e.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in e.parameters())
    e.zero_grad()
    assert all(p.grad is None for p in e.parameters())


def test_requires_grad_and_apply():
    e, _ = both()
    assert e.requires_grad_(False) is e
    assert not any(p.requires_grad for p in e.parameters())
    seen = []
    e.apply(lambda m: seen.append(type(m).__name__))
    t = T["Net"]()
    tseen = []
    t.apply(lambda m: tseen.append(type(m).__name__))
    assert seen == tseen


def test_to_dtype_keeps_parameter_identity():
    e, t = both()
    e.head.weight.grad = ember.ones(2, 3)
    ids = [id(p) for p in e.parameters()]
    assert e.to(ember.float64) is e
    t.to(torch.float64)
    assert [id(p) for p in e.parameters()] == ids
    assert all(p.dtype == ember.float64 for p in e.parameters())
    assert all(type(p) is ember.nn.Parameter for p in e.parameters())
    assert e.head.weight.grad.dtype == ember.float64
    assert e.block.running.dtype == ember.float64
    for (_, a), (_, b) in zip(e.state_dict().items(), t.state_dict().items()):
        np.testing.assert_array_equal(to_np(a), to_np(b))
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
    e.float()
    assert e.head.weight.dtype == ember.float32
    e.half()
    assert e.head.weight.dtype == ember.float16
    e.bfloat16()
    assert e.head.weight.dtype == ember.bfloat16
    e.double()
    assert e.head.weight.dtype == ember.float64
    e.to("cpu")
    e.to(ember.zeros(1, dtype=ember.float32))
    assert e.head.weight.dtype == ember.float32
    e.register_buffer("count", ember.tensor(3))
    e.double()
    assert e.count.dtype == ember.int64  # integer buffers are left alone
    with pytest.raises(TypeError, match="only accepts floating point"):
        e.to(ember.int64)


# ---------------------------------------------------------------------------- hooks
def _hook_log(m, lib):
    log = []
    m.register_forward_pre_hook(lambda mod, args: log.append(("pre", type(mod).__name__)))
    m.register_forward_hook(lambda mod, args, out: log.append(("post", len(args))))
    m.register_forward_pre_hook(lambda mod, args: log.append(("pre0",)), prepend=True)
    m.head.register_forward_hook(lambda mod, args, out: log.append(("head", tuple(out.shape))))
    m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("kw", sorted(kwargs))),
                            with_kwargs=True)
    return log


def test_hook_order_matches_torch():
    e, t = both()
    le, lt = _hook_log(e, ember), _hook_log(t, torch)
    e(ember.ones(1, 4))
    t(torch.ones(1, 4))
    assert le == lt


def test_hooks_modify_and_remove():
    e, t = both("Block")
    for m, lib in ((e, ember), (t, torch)):
        h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        h2 = m.register_forward_hook(lambda mod, args, out: out + 1)
        m._res = [m(lib.ones(1, 4))]
        h1.remove()
        m._res.append(m(lib.ones(1, 4)))
        h2.remove()
        m._res.append(m(lib.ones(1, 4)))
        with m.register_forward_pre_hook(
                lambda mod, args, kwargs: ((args[0] * 0,), kwargs), with_kwargs=True):
            m._res.append(m(lib.ones(1, 4)))
    for a, b in zip(e._res, t._res):
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-6)


def test_always_call_hook_runs_on_exception():
    for lib in (ember, torch):
        class Bad(lib.nn.Module):
            def forward(self, x):
                raise ValueError("boom")

        m, log = Bad(), []
        m.register_forward_hook(lambda mod, a, o: log.append("plain"))
        m.register_forward_hook(lambda mod, a, o: log.append(("always", o)), always_call=True)
        with pytest.raises(ValueError, match="boom"):
            m(1)
        lib._log = log
    assert ember._log == torch._log == [("always", None)]
    del ember._log, torch._log


# ---------------------------------------------------------------------------- repr, misc
def test_repr_matches_torch():
    e, t = both()
    assert repr(e) == repr(t)
    assert repr(ember.nn.Module()) == repr(torch.nn.Module()) == "Module()"
    assert repr(E["Linear"](2, 3)) == repr(T["Linear"](2, 3))

    class Multi(ember.nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    class TMulti(torch.nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    m, tm = Multi(), TMulti()
    m.child, tm.child = E["Block"](), T["Block"]()
    assert repr(m).replace("Multi", "X") == repr(tm).replace("TMulti", "X")


def test_dir_and_get_name():
    e, t = both()
    de, dt = set(dir(e)), set(dir(t))
    for name in ("block", "head", "steps", "training", "forward", "state_dict"):
        assert name in de and name in dt
    assert e._get_name() == "Net"
    assert set(dir(e.block)) >= {"fc", "running", "scratch"}


def test_deepcopy_module():
    e, _ = both()
    c = copy.deepcopy(e)
    assert repr(c) == repr(e)
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in e.named_parameters()]
    for a, b in zip(c.parameters(), e.parameters()):
        assert type(a) is ember.nn.Parameter and a is not b
        assert a.data_ptr() != b.data_ptr() and a.tolist() == b.tolist()


def test_module_compile_in_place():
    net = E["Net"]()
    for p in net.parameters():
        ember.nn.init.normal_(p)
    x = ember.randn(2, 4)
    want = net(x)
    net.compile()
    assert net._compiled_call_impl is not None
    got = net(x)
    assert ember.equal(got, want)
    assert "_compiled_call_impl" not in net.state_dict()


def test_init_rejects_unexpected_args():
    same_error(lambda: ember.nn.Module(3), lambda: torch.nn.Module(3))
    same_error(lambda: ember.nn.Module(a=3), lambda: torch.nn.Module(a=3))


# ---------------------------------------------------------------------------- backward hooks
def _grad_log(lib, C, x_requires_grad):
    net = C["Net"]()
    fill_deterministic(lib, net)
    log = []

    def rec(name):
        def hook(m, gi, go):
            log.append((name, [None if g is None else np.round(to_np(g), 5).tolist()
                               for g in gi],
                        [None if g is None else np.round(to_np(g), 5).tolist() for g in go]))
        return hook

    net.head.register_full_backward_hook(rec("head"))
    net.block.register_full_backward_hook(rec("block"))
    net.register_full_backward_pre_hook(lambda m, go: log.append(("pre", len(go))))
    net.steps.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    net.steps.register_full_backward_hook(lambda m, gi, go: (gi[0] * 2,))
    x = lib.ones(2, 4, requires_grad=x_requires_grad)
    net(x).sum().backward()
    if x_requires_grad:
        log.append(np.round(to_np(x.grad), 5).tolist())
    log.append(np.round(to_np(net.head.weight.grad), 4).tolist())
    return log


@pytest.mark.parametrize("x_requires_grad", [True, False])
def test_full_backward_hooks_match_torch(x_requires_grad):
    with warnings.catch_warnings(record=True) as we:
        warnings.simplefilter("always")
        le = _grad_log(ember, E, x_requires_grad)
    with warnings.catch_warnings(record=True) as wt:
        warnings.simplefilter("always")
        lt = _grad_log(torch, T, x_requires_grad)
    assert le == lt
    assert [str(w.message) for w in we] == [str(w.message) for w in wt]


def test_full_backward_hook_remove():
    e = E["Linear"](2, 2)
    log = []
    h = e.register_full_backward_hook(lambda m, gi, go: log.append(1))
    e(ember.ones(1, 2, requires_grad=True)).sum().backward()
    h.remove()
    e(ember.ones(1, 2, requires_grad=True)).sum().backward()
    assert log == [1]


# ---------------------------------------------------------------------------- state-dict hooks
def _state_hooks_log(lib, C):
    class WithExtra(C["Block"]):
        def get_extra_state(self):
            return {"calls": 3}

        def set_extra_state(self, state):
            self.loaded = state

    net = lib.nn.Sequential(WithExtra(), C["Linear"](3, 1))
    log = []
    net.register_state_dict_pre_hook(lambda m, prefix, keep: log.append(("pre", prefix, keep)))
    net[0].register_state_dict_post_hook(
        lambda m, sd, prefix, meta: log.append(("post", prefix, sorted(sd))))
    net[1].register_load_state_dict_pre_hook(
        lambda m, sd, prefix, *rest: log.append(("lpre", prefix, sorted(sd))))

    def post(m, keys):
        log.append(("lpost", list(keys.missing_keys), list(keys.unexpected_keys)))
        keys.unexpected_keys.clear()

    net.register_load_state_dict_post_hook(post)
    sd = net.state_dict()
    log.append(sorted(sd))
    log.append(sd["0._extra_state"])
    sd["surprise"] = lib.zeros(1)
    res = net.load_state_dict(sd)   # the post hook clears the unexpected key: no error
    log.append(repr(res))
    log.append(net[0].loaded)
    del sd["0._extra_state"]
    sd.pop("surprise")
    res = net.load_state_dict(sd, strict=False)
    log.append((res.missing_keys, res.unexpected_keys))
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(sd)
    log.append(str(err.value).removeprefix("[load_state_dict] "))
    return log


def test_state_dict_hooks_and_extra_state():
    assert _state_hooks_log(ember, E) == _state_hooks_log(torch, T)


def test_set_submodule():
    def run(lib, C):
        net = C["Net"]()
        net.set_submodule("steps.0", C["Linear"](5, 5))
        net.set_submodule("new", C["Linear"](1, 1))
        out = [repr(net)]
        for args in (("", C["Linear"](1, 1)), ("head", 3), ("nope.x", C["Linear"](1, 1)),
                     ("head.weight", C["Linear"](1, 1)), ("zz", C["Linear"](1, 1), True)):
            try:
                net.set_submodule(*args)
            except Exception as e:  # noqa: BLE001 - comparing torch's and ember's errors
                out.append((type(e).__name__, msg(e)))
        return out

    assert run(ember, E) == run(torch, T)


def test_non_full_backward_hook_not_supported():
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        E["Linear"](1, 1).register_backward_hook(lambda m, gi, go: None)
