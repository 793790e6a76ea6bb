"""Reading checkpoints written by torch.save (torch is the oracle; ember never imports it)."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

import ember
from ember.serialization import SerializationError, UnpicklingError, load, safe_globals, save

torch = pytest.importorskip("torch")


@dataclasses.dataclass
class Config:
    width: int
    name: str


def _np(t):
    if isinstance(t, ember.Tensor):
        return np.asarray(t._data).astype(np.float64)
    return t.detach().to(torch.float64).numpy()


def _check(e, t):
    assert isinstance(e, ember.Tensor)
    assert e.dtype.name == str(t.dtype).removeprefix("torch.")
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(_np(e), _np(t))
    assert e.stride() == t.stride() and e.storage_offset() == t.storage_offset()


@pytest.fixture
def tgen():
    return torch.Generator().manual_seed(0)


def test_state_dict_all_dtypes(tmp_path, tgen):
    sd = collections.OrderedDict()
    sd["f32"] = torch.randn(3, 4, generator=tgen)
    sd["f16"] = torch.randn(5, generator=tgen).half()
    sd["bf16"] = torch.randn(2, 3, generator=tgen).bfloat16()
    sd["f64"] = torch.randn(2, generator=tgen).double()
    sd["i64"] = torch.arange(-3, 7)
    sd["i32"] = torch.arange(4, dtype=torch.int32)
    sd["i16"] = torch.arange(4, dtype=torch.int16)
    sd["i8"] = torch.arange(-2, 2, dtype=torch.int8)
    sd["u8"] = torch.arange(250, 256, dtype=torch.uint8)
    sd["b"] = torch.tensor([True, False])
    sd["scalar"] = torch.tensor(2.5)
    sd["empty"] = torch.zeros(0, 3)
    p = tmp_path / "sd.pt"
    torch.save(sd, p)
    out = load(p)
    assert type(out) is collections.OrderedDict and list(out) == list(sd)
    for k in sd:
        _check(out[k], sd[k])


def test_shared_storages_stay_shared(tmp_path, tgen):
    w = torch.randn(4, 6, generator=tgen)
    sd = {"w": w, "wt": w.t(), "row": w[2], "cols": w[:, 1::2], "tied": w}
    p = tmp_path / "shared.pt"
    torch.save(sd, p)
    out = load(p)
    for k in sd:
        _check(out[k], sd[k])
    assert out["tied"] is out["w"]
    out["w"][2, 3] = 1234.0
    assert out["wt"][3, 2].item() == 1234.0
    assert out["row"][3].item() == 1234.0
    assert out["cols"][2, 1].item() == 1234.0


def test_module_state_dict_and_parameters(tmp_path):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    p = tmp_path / "m.pt"
    torch.save({"sd": m.state_dict(), "param": m[0].weight}, p)
    out = load(p)
    for k, v in m.state_dict().items():
        _check(out["sd"][k], v)
        assert not out["sd"][k].requires_grad
    _check(out["param"], m[0].weight)
    assert out["param"].requires_grad


def test_optimizer_state(tmp_path):
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(lin.parameters(), lr=1e-3, betas=(0.9, 0.99))
    lin(torch.randn(5, 3)).sum().backward()
    opt.step()
    sd = opt.state_dict()
    p = tmp_path / "opt.pt"
    torch.save({"optimizer": sd, "epoch": 3, "losses": [0.5, 0.25], "size": torch.Size([2, 3]),
                "dtype": torch.bfloat16, "pair": (1, "a")}, p)
    out = load(p)
    st = out["optimizer"]["state"]
    assert set(st) == set(sd["state"]) == {0, 1}
    for i in st:
        for k, v in sd["state"][i].items():
            _check(st[i][k], v)
    g, tg = out["optimizer"]["param_groups"][0], sd["param_groups"][0]
    assert g == {k: v for k, v in tg.items()}
    assert g["betas"] == (0.9, 0.99) and g["params"] == [0, 1]
    assert out["epoch"] == 3 and out["losses"] == [0.5, 0.25] and out["pair"] == (1, "a")
    assert out["size"] == (2, 3) and type(out["size"]) is ember.Size
    assert out["dtype"] is ember.bfloat16


def test_requires_grad_and_map_location(tmp_path):
    x = torch.randn(3, requires_grad=True)
    p = tmp_path / "rg.pt"
    torch.save({"x": x}, p)
    for ml in ("cpu", ember.device("cpu"), {"cuda:0": "cpu"}, lambda s, loc: s):
        out = load(p, map_location=ml)
        _check(out["x"], x)
        assert out["x"].requires_grad


def test_custom_class_needs_allowlist(tmp_path):
    p = tmp_path / "cfg.pt"
    torch.save({"cfg": Config(3, "x"), "w": torch.ones(2)}, p)
    with pytest.raises(UnpicklingError, match=r"Config.*add_safe_globals"):
        load(p)
    with safe_globals([Config]):
        out = load(p)
    assert out["cfg"] == Config(3, "x")
    with pytest.warns(FutureWarning):
        assert load(p, weights_only=False)["cfg"].width == 3


def test_ember_saves_what_torch_checkpoint_held(tmp_path, tgen):
    w = torch.randn(3, 3, generator=tgen).bfloat16()
    torch.save({"w": w, "v": w[1:]}, tmp_path / "a.pt")
    out = load(tmp_path / "a.pt")
    save(out, tmp_path / "b.ember")
    again = load(tmp_path / "b.ember")
    _check(again["w"], w)
    _check(again["v"], w[1:])
    again["w"][1, 0] = 7.0
    assert again["v"][0, 0].item() == 7.0


def test_mmap_load(tmp_path, tgen):
    w = torch.randn(5, 4, generator=tgen)
    sd = {"w": w, "wt": w.t(), "h": torch.ones(3, dtype=torch.float16)}
    p = tmp_path / "m.pt"
    torch.save(sd, p)
    out = load(p, mmap=True)
    for k in sd:
        _check(out[k], sd[k])
    out["w"][0, 2] = 9.0
    assert out["wt"][2, 0].item() == 9.0
    np.testing.assert_array_equal(torch.load(p)["w"].numpy(), w.numpy())  # file untouched


@pytest.mark.parametrize("dtype", ["complex64", "uint16"])
def test_unsupported_torch_dtype_is_named(tmp_path, dtype):
    p = tmp_path / "c.pt"
    torch.save({"x": torch.zeros(2, dtype=getattr(torch, dtype))}, p)
    with pytest.raises(SerializationError, match="ember has no such dtype"):
        load(p)


def test_bare_tensor_and_device(tmp_path):
    p = tmp_path / "t.pt"
    torch.save(torch.arange(5), p)
    _check(load(p), torch.arange(5))
    torch.save({"d": torch.device("cpu")}, p)
    assert str(load(p)["d"]) == "cpu"
