"""Checkpoint interop with PyTorch both ways: ember.save -> torch.load (its default
weights_only=True) and torch.save -> ember.load, for state dicts, optimizer states, nested
containers, every dtype, shared views, Parameters and whole modules.  torch is the oracle."""

from __future__ import annotations

import collections
import io
import zipfile

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.serialization import UnpicklingError, load, safe_globals, save

torch = pytest.importorskip("torch")

etorch = ember  # what a user's `import ember as torch` script spells `torch.`

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


def _bits(a: np.ndarray) -> np.ndarray:
    # compare exact bit patterns (NaNs and -0.0 included)
    a = np.ascontiguousarray(a)
    return a.view(np.uint8) if a.dtype.itemsize == 1 else a.view(f"u{a.dtype.itemsize}")


def _t_np(t) -> np.ndarray:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _same_tensor(e, t) -> None:
    """An ember tensor ``e`` equals a torch tensor ``t``: dtype, shape, strides, offset, bits."""
    assert isinstance(e, ember.Tensor) and isinstance(t, torch.Tensor)
    assert e.dtype.name == str(t.dtype).removeprefix("torch.")
    assert tuple(e.shape) == tuple(t.shape)
    assert e.stride() == t.stride() and e.storage_offset() == t.storage_offset()
    assert e.requires_grad == t.requires_grad
    np.testing.assert_array_equal(_bits(np.asarray(e._data)), _bits(_t_np(t)))


def _sample(name: str, shape: tuple, seed: int = 0) -> ember.Tensor:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 50
    if name == "bool":
        a = a > 0
    if name in ("float32", "float64") and a.size > 2:
        a.flat[0], a.flat[1] = np.nan, -0.0
    return ember.tensor(a.astype(getattr(ember, name).np))


def _ember_to_torch(obj, tmp_path, name="ckpt.pt", **kw):
    p = tmp_path / name
    save(obj, p)
    return torch.load(p, **kw)


# ------------------------------------------------------------------ ember.save -> torch.load
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_to_torch(tmp_path, dtype):
    ts = {"m": _sample(dtype, (3, 4)), "s": _sample(dtype, ()), "e": _sample(dtype, (0, 3)),
          "v": _sample(dtype, (7,))}
    out = _ember_to_torch(ts, tmp_path)
    assert set(out) == set(ts)
    for k in ts:
        _same_tensor(ts[k], out[k])


def test_views_share_storage_in_torch(tmp_path):
    base = ember.arange(24.0).reshape(4, 6)
    objs = {"base": base, "t": base.t(), "s": base[1:, ::2], "d": base.diagonal(),
            "row": base[2], "col": base[:, 2:3], "u": base.unsqueeze(1),
            "x": ember.ones(3).expand(4, 3), "again": base}
    out = _ember_to_torch(objs, tmp_path)
    for k, v in objs.items():
        _same_tensor(v, out[k])
    assert out["again"] is out["base"]
    assert not out["t"].is_contiguous() and out["x"].stride() == (0, 1)
    ptr = out["base"].untyped_storage().data_ptr()
    assert all(out[k].untyped_storage().data_ptr() == ptr
               for k in ("t", "s", "d", "row", "col", "u"))
    out["base"][1, 2] = -100.0
    assert out["t"][2, 1].item() == -100.0 and out["s"][0, 1].item() == -100.0
    assert out["d"][1].item() == base[1, 1].item()  # untouched diagonal element


def test_structures_scalars_and_metadata_to_torch(tmp_path):
    w = _sample("float32", (2, 3))
    obj = collections.OrderedDict(
        nested={"a": [w, (w[0], {"deep": [1, 2.5, "s"]})], 3: None},
        scalars=(True, -7, 2 ** 70, float("inf"), "text", b"\x00\xff"),
        size=ember.Size([2, 3]), dtype=ember.bfloat16, device=ember.device("cpu"),
        empty_od=collections.OrderedDict(), aset={1, 2})
    out = _ember_to_torch(obj, tmp_path)
    assert type(out) is collections.OrderedDict and list(out) == list(obj)
    a = out["nested"]["a"]
    _same_tensor(w, a[0])
    _same_tensor(w[0], a[1][0])
    assert a[1][0].untyped_storage().data_ptr() == a[0].untyped_storage().data_ptr()
    assert a[1][1] == {"deep": [1, 2.5, "s"]} and out["nested"][3] is None
    assert out["scalars"] == (True, -7, 2 ** 70, float("inf"), "text", b"\x00\xff")
    assert type(out["size"]) is torch.Size and out["size"] == (2, 3)
    assert out["dtype"] is torch.bfloat16 and out["device"] == torch.device("cpu")
    assert type(out["empty_od"]) is collections.OrderedDict and out["aset"] == {1, 2}


def test_parameters_and_requires_grad_to_torch(tmp_path):
    p = ember.nn.Parameter(_sample("float32", (3,)))
    frozen = ember.nn.Parameter(_sample("float32", (2,)), requires_grad=False)
    rg = _sample("float64", (2,)).requires_grad_()
    out = _ember_to_torch({"p": p, "frozen": frozen, "rg": rg, "plain": p.detach()}, tmp_path)
    assert type(out["p"]) is torch.nn.Parameter and out["p"].requires_grad
    assert type(out["frozen"]) is torch.nn.Parameter and not out["frozen"].requires_grad
    assert type(out["rg"]) is torch.Tensor and out["rg"].requires_grad
    _same_tensor(p, out["p"])
    _same_tensor(rg, out["rg"])
    assert not out["plain"].requires_grad
    # p.detach() shares p's memory: the file keeps one storage for both
    assert out["plain"].untyped_storage().data_ptr() == out["p"].untyped_storage().data_ptr()


def _ember_net():
    ember.manual_seed(0)
    return ember.nn.Sequential(
        ember.nn.Conv2d(2, 4, 3, padding=1), ember.nn.ReLU(), ember.nn.BatchNorm2d(4),
        ember.nn.Flatten(), ember.nn.Linear(4 * 5 * 5, 3))


def _torch_net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.BatchNorm2d(4),
        torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 5, 3))


def test_model_and_optimizer_state_train_on_in_torch(tmp_path):
    """An ember training checkpoint resumes in PyTorch: same weights, same next step."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 2, 5, 5)).astype(np.float32)
    y = rng.standard_normal((6, 3)).astype(np.float32)
    net = _ember_net()
    opt = ember.optim.Adam(net.parameters(), lr=1e-2, betas=(0.8, 0.99))
    for _ in range(2):
        opt.zero_grad()
        ember.nn.functional.mse_loss(net(ember.tensor(x)), ember.tensor(y)).backward()
        opt.step()
    ck = _ember_to_torch({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 2},
                         tmp_path)
    tnet = _torch_net()
    tnet.load_state_dict(ck["model"])
    topt = torch.optim.Adam(tnet.parameters(), lr=1.0)
    topt.load_state_dict(ck["optimizer"])
    assert ck["epoch"] == 2 and topt.param_groups[0]["betas"] == (0.8, 0.99)
    for _ in range(2):
        opt.zero_grad()
        ember.nn.functional.mse_loss(net(ember.tensor(x)), ember.tensor(y)).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.mse_loss(tnet(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        topt.step()
    for (k, e), (k2, t) in zip(net.state_dict().items(), tnet.state_dict().items()):
        assert k == k2
        np.testing.assert_allclose(np.asarray(e._data, np.float64), _t_np(t).astype(np.float64),
                                   rtol=1e-4, atol=1e-5, err_msg=k)


def test_archive_records_match_torch(tmp_path):
    sd = {"w": _sample("float32", (2, 2)), "h": _sample("float16", (3,))}
    save(sd, tmp_path / "model.v1.pt")
    torch.save({"w": torch.zeros(2, 2), "h": torch.zeros(3, dtype=torch.half)},
               tmp_path / "model.v1.torch.pt")
    ours = zipfile.ZipFile(tmp_path / "model.v1.pt")
    theirs = zipfile.ZipFile(tmp_path / "model.v1.torch.pt")
    strip = lambda names: {n.split("/", 1)[1] for n in names}  # noqa: E731
    assert {n.split("/", 1)[0] for n in ours.namelist()} == {"model.v1"}  # the stem, as torch
    assert strip(ours.namelist()) == strip(theirs.namelist())
    for rec in ("version", "byteorder", ".format_version", ".storage_alignment"):
        assert ours.read(f"model.v1/{rec}") == theirs.read(f"model.v1.torch/{rec}")
    assert all(i.compress_type == zipfile.ZIP_STORED for i in ours.infolist())
    raw = (tmp_path / "model.v1.pt").read_bytes()
    for i in ours.infolist():  # every record starts 64-byte aligned, as torch writes them
        n, m = np.frombuffer(raw[i.header_offset + 26:i.header_offset + 30], "<u2")
        assert (i.header_offset + 30 + int(n) + int(m)) % 64 == 0, i.filename
    buf = io.BytesIO()
    save([1], buf)
    assert zipfile.ZipFile(buf).namelist()[0] == "archive/data.pkl"


def test_torch_mmap_load_of_ember_file(tmp_path):
    w = _sample("float32", (16, 8))
    save({"w": w, "wt": w.t()}, tmp_path / "m.pt")
    out = torch.load(tmp_path / "m.pt", mmap=True)
    _same_tensor(w, out["w"])
    _same_tensor(w.t(), out["wt"])


# ------------------------------------------------------------------ torch.save -> ember.load
def test_torch_file_through_ember_and_back(tmp_path):
    """torch.save -> ember.load -> ember.save -> torch.load keeps values, geometry, sharing."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 6, generator=g)
    src = {"w": w, "wt": w.t(), "cols": w[:, 1::2],
           "p": torch.nn.Parameter(torch.randn(3, generator=g).bfloat16()),
           "b": torch.tensor([True, False]), "i": torch.arange(-3, 3, dtype=torch.int16)}
    torch.save(src, tmp_path / "a.pt")
    mid = load(tmp_path / "a.pt")
    assert isinstance(mid["p"], ember.nn.Parameter)
    out = _ember_to_torch(mid, tmp_path, "b.pt")
    for k, v in src.items():
        assert torch.equal(out[k], v) and out[k].stride() == v.stride()
        assert out[k].storage_offset() == v.storage_offset() and out[k].dtype == v.dtype
    assert type(out["p"]) is torch.nn.Parameter
    out["w"][0, 3] = 42.0
    assert out["wt"][3, 0].item() == 42.0 and out["cols"][0, 1].item() == 42.0


# ------------------------------------------------------------------ whole modules
class Tied(ember.nn.Module):
    """A user module (module level so it pickles by its import path)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = ember.nn.Embedding(5, 4)
        self.attn = ember.nn.MultiheadAttention(4, 2, batch_first=True)
        self.head = ember.nn.Linear(4, 5, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.register_buffer("scale", ember.tensor(0.5))
        self.note = "kept"

    def forward(self, idx):
        h = self.emb(idx)
        return self.head(self.attn(h, h, h)[0] * self.scale)


def test_ember_whole_module_round_trip(tmp_path):
    ember.manual_seed(0)
    m = Tied()
    m.eval()
    save(m, tmp_path / "m.pt")
    with pytest.warns(FutureWarning, match="weights_only=False"):
        m2 = load(tmp_path / "m.pt", weights_only=False)
    assert type(m2) is Tied and not m2.training and m2.note == "kept"
    assert m2.head.weight is m2.emb.weight  # tying survives
    assert isinstance(m2.emb.weight, ember.nn.Parameter)
    assert type(m2.attn.out_proj) is ember.nn.modules.linear.NonDynamicallyQuantizableLinear
    idx = ember.tensor([[0, 3, 4], [1, 1, 2]])
    np.testing.assert_array_equal(np.asarray(m2(idx).detach()._data),
                                  np.asarray(m(idx).detach()._data))
    # under weights_only=True the module classes must be allowed by name
    with pytest.raises(UnpicklingError, match=r"refused the global [\w.]*test_torch_interop"
                                              r"\.Tied: it is not on the allowlist"):
        load(tmp_path / "m.pt")
    classes = [Tied, ember.nn.Embedding, ember.nn.modules.activation.MultiheadAttention,
               ember.nn.modules.linear.NonDynamicallyQuantizableLinear, ember.nn.Linear]
    with safe_globals(classes):
        m3 = load(tmp_path / "m.pt")
    assert m3.head.weight is m3.emb.weight
    np.testing.assert_array_equal(np.asarray(m3(idx).detach()._data),
                                  np.asarray(m(idx).detach()._data))


def test_ember_whole_module_global_names(tmp_path):
    save(ember.nn.MultiheadAttention(4, 2), tmp_path / "a.pt")
    pkl = zipfile.ZipFile(tmp_path / "a.pt").read("a/data.pkl")
    assert b"ember.nn.modules.activation\nMultiheadAttention\n" in pkl
    assert b"ember.nn.modules.linear\nNonDynamicallyQuantizableLinear\n" in pkl
    assert b"torch._utils\n_rebuild_parameter\n" in pkl and b"\nFloatStorage\n" in pkl


def _torch_modules():
    torch.manual_seed(0)
    return {
        "linear": (torch.nn.Linear(4, 3), (2, 4)),
        "sequential": (torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(),
                                           torch.nn.LayerNorm(8), torch.nn.Linear(8, 2)), (3, 4)),
        "conv2d": (torch.nn.Conv2d(2, 3, 3, stride=2, padding=1), (1, 2, 7, 7)),
        "mha": (torch.nn.MultiheadAttention(8, 2, batch_first=True), (2, 5, 8)),
        "transformer": (torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
            enable_nested_tensor=False), (2, 5, 8)),
    }


def _run(m, x):
    if isinstance(m, (torch.nn.MultiheadAttention, ember.nn.MultiheadAttention)):
        return m(x, x, x)[0]
    return m(x)


@pytest.mark.parametrize("name", ["linear", "sequential", "conv2d", "mha", "transformer"])
@pytest.mark.parametrize("mode", ["weights_only_false", "safe_globals"])
def test_torch_whole_module_loads_into_ember(tmp_path, name, mode):
    tm, shape = _torch_modules()[name]
    tm.eval()
    torch.save(tm, tmp_path / "m.pt")
    if mode == "weights_only_false":
        with pytest.warns(FutureWarning):
            em = load(tmp_path / "m.pt", weights_only=False)
    else:
        # the classes a PyTorch script lists, spelled with `import ember as torch`
        allowed = [etorch.nn.modules.linear.Linear, etorch.nn.modules.container.Sequential,
                   etorch.nn.modules.activation.GELU, etorch.nn.modules.normalization.LayerNorm,
                   etorch.nn.modules.conv.Conv2d, etorch.nn.modules.activation.MultiheadAttention,
                   etorch.nn.modules.linear.NonDynamicallyQuantizableLinear,
                   etorch.nn.modules.transformer.TransformerEncoder,
                   etorch.nn.modules.transformer.TransformerEncoderLayer,
                   etorch.nn.modules.container.ModuleList, etorch.nn.modules.dropout.Dropout,
                   etorch.nn.functional.relu]  # TransformerEncoderLayer.activation
        with pytest.raises(UnpicklingError, match=r"refused the global torch\.nn\.modules\."):
            load(tmp_path / "m.pt")
        with etorch.serialization.safe_globals(allowed):
            em = load(tmp_path / "m.pt")
    assert type(em).__name__ == type(tm).__name__ and isinstance(em, ember.nn.Module)
    assert not em.training
    params = list(em.parameters())
    assert len(params) == len(list(tm.parameters())) and all(
        type(p) is ember.nn.Parameter and p.requires_grad for p in params)
    tsd, esd = tm.state_dict(), em.state_dict()
    assert list(tsd) == list(esd)
    for k in tsd:
        _same_tensor(esd[k], tsd[k])
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        want = _run(tm, torch.from_numpy(x)).numpy()
    got = np.asarray(_run(em, ember.tensor(x)).detach()._data)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_torch_globals_resolve_to_ember_with_weights_only_false(tmp_path):
    torch.save({"t": torch.Tensor, "p": torch.nn.Parameter, "f": torch.nn.functional.relu,
                "c": torch.nn.modules.conv.Conv2d, "d": torch.float16}, tmp_path / "g.pt")
    with pytest.warns(FutureWarning):
        out = load(tmp_path / "g.pt", weights_only=False)
    assert out["t"] is ember.Tensor and out["p"] is ember.nn.Parameter
    assert out["f"] is ember.nn.functional.relu and out["c"] is ember.nn.Conv2d
    assert out["d"] is ember.float16
    # a class ember lacks is named, with the path ember looked for
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02ctorch.nn.modules.fancy\nGizmo\n.")
    buf.seek(0)
    with pytest.warns(FutureWarning), pytest.raises(
            UnpicklingError, match=r"needs torch\.nn\.modules\.fancy\.Gizmo, and ember has no "
                                   r"ember\.nn\.modules\.fancy\.Gizmo"):
        load(buf, weights_only=False)


def test_torch_lstm_whole_module():
    rnn = pytest.importorskip("ember.nn.modules.rnn", reason="ember.nn.modules.rnn not merged")
    assert rnn.LSTM is ember.nn.LSTM and ember.nn.LSTM.__module__ == "ember.nn.modules.rnn"
    torch.manual_seed(0)
    tm = torch.nn.LSTM(3, 4, num_layers=2, batch_first=True)
    buf = io.BytesIO()
    torch.save(tm, buf)
    buf.seek(0)
    with safe_globals([ember.nn.LSTM]):
        em = load(buf)
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x))[0].numpy()
    got = np.asarray(em(ember.tensor(x))[0].detach()._data)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_torch_class_paths_resolve_to_ember_classes():
    """Every ember.nn module class torch.nn also has lives at PyTorch's path under ember.
    (``__module__`` included), so checkpoints and safe_globals lists name it as PyTorch does."""
    import importlib
    import inspect
    checked, wrong = 0, []
    for name in dir(ember.nn):
        cls = getattr(ember.nn, name)
        tcls = getattr(torch.nn, name, None)
        if not (inspect.isclass(cls) and issubclass(cls, ember.nn.Module)) or tcls is None:
            continue
        path = "ember" + tcls.__module__.removeprefix("torch")
        found = getattr(importlib.import_module(path), name, None)
        checked += 1
        if found is not cls or cls.__module__ != path:
            wrong.append(f"{name}: torch has {tcls.__module__}, ember {cls.__module__}")
    assert checked > 40 and not wrong, wrong


def test_the_same_dtype_saved_twice_loads_in_both() -> None:
    """A dtype (a pickled global) written twice is a memo reference the second time."""
    obj = {"a": ember.float32, "b": ember.float32, "c": [ember.int64, ember.float32],
           "t": ember.ones(2, dtype=ember.float32)}
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    back = ember.load(buf)
    assert back["a"] is ember.float32 and back["b"] is ember.float32
    assert back["c"] == [ember.int64, ember.float32]
    buf.seek(0)
    theirs = torch.load(buf)
    assert theirs["a"] is torch.float32 and theirs["b"] is torch.float32
    assert theirs["c"] == [torch.int64, torch.float32]
