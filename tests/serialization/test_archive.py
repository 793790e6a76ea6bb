"""ember.save / ember.load round trips, in both formats: PyTorch's zip (the default) and ember's
JSON + safetensors archive (``format="ember"``)."""

from __future__ import annotations

import collections
import io
import json
import math
import zipfile

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.serialization import (
    SerializationError,
    UnpicklingError,
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    load,
    safe_globals,
    save,
)

ALL = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64,
       ember.float16, ember.bfloat16, ember.float32, ember.float64]


class Point:  # a user class for the allowlist tests (module level so it pickles)
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y


@pytest.fixture(params=["torch", "ember"])
def fmt(request):
    return request.param


def _rt(obj, fmt, **kw):
    buf = io.BytesIO()
    save(obj, buf, format=fmt)
    buf.seek(0)
    return load(buf, **kw)


def _sample(dtype, shape, rng):
    a = rng.standard_normal(shape) * 5
    if dtype is ember.bool:
        a = a > 0
    return ember.tensor(a.astype(dtype.np))


def _same(a, b):
    assert type(a) is type(b) or (isinstance(a, ember.Tensor) and isinstance(b, ember.Tensor))
    assert a.dtype is b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.asarray(a._data).astype(np.float64),
                                  np.asarray(b._data).astype(np.float64))


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
def test_roundtrip_every_dtype(dtype, rng, fmt):
    ts = {"m": _sample(dtype, (3, 4), rng), "s": _sample(dtype, (), rng),
          "e": _sample(dtype, (0, 3), rng), "v": _sample(dtype, (5,), rng)}
    out = _rt(ts, fmt)
    for k in ts:
        _same(ts[k], out[k])
    assert out["s"].ndim == 0 and out["e"].shape == (0, 3)


def test_bfloat16_bits_exact(fmt):
    x = ember.tensor(np.array([1.5, -0.0, np.inf, np.nan, 3.140625], dtype=ml_dtypes.bfloat16))
    y = _rt(x, fmt)
    assert y.dtype is ember.bfloat16
    assert x._data.view(np.uint16).tolist() == y._data.view(np.uint16).tolist()


def test_nested_python_objects(fmt):
    obj = collections.OrderedDict(
        b=[1, 2.5, float("inf"), float("-inf"), float("nan"), True, None, "s", (1, (2, 3)), []],
        a={0: "int key", "x": {"deep": (ember.float16, ember.Size([2, 3]))}},
        z=b"\x00\xff", big=2 ** 80, neg=-7,
    )
    out = _rt(obj, fmt)
    assert type(out) is collections.OrderedDict and list(out) == ["b", "a", "z", "big", "neg"]
    b = out["b"]
    assert b[:4] == [1, 2.5, float("inf"), float("-inf")] and math.isnan(b[4])
    assert b[5] is True and b[6] is None and b[7] == "s" and b[8] == (1, (2, 3)) and b[9] == []
    assert type(b[8]) is tuple and type(b[0]) is int and type(b[1]) is float
    assert type(out["a"]) is dict and out["a"][0] == "int key"
    dt, size = out["a"]["x"]["deep"]
    assert dt is ember.float16 and type(size) is ember.Size and size == (2, 3)
    assert out["z"] == b"\x00\xff" and out["big"] == 2 ** 80 and out["neg"] == -7


def test_views_keep_sharing_storage(fmt):
    base = ember.arange(24.0).reshape(4, 6)
    t = base.t()                  # non-contiguous
    s = base[1:, ::2]             # offset + stride
    d = base.diagonal()
    out = _rt({"base": base, "t": t, "s": s, "d": d, "again": base}, fmt)
    for k, v in {"base": base, "t": t, "s": s, "d": d}.items():
        _same(v, out[k])
        assert out[k].stride() == v.stride() and out[k].storage_offset() == v.storage_offset()
    assert out["again"] is out["base"]  # one tensor saved twice loads as one object
    ptr = out["base"].untyped_storage().data_ptr()
    for k in ("t", "s", "d"):
        assert out[k].untyped_storage().data_ptr() == ptr
    out["base"][1, 2] = -100.0
    assert out["t"][2, 1].item() == -100.0 and out["s"][0, 1].item() == -100.0
    assert not out["t"].is_contiguous()


def test_separate_tensors_stay_separate(fmt):
    a, b = ember.zeros(3), ember.zeros(3)
    out = _rt([a, b], fmt)
    out[0][0] = 1.0
    assert out[1][0].item() == 0.0


def test_requires_grad_preserved(fmt):
    w = ember.randn(3, 2, requires_grad=True)
    y = w * 2  # a non-leaf saves as a leaf that requires grad (as in PyTorch)
    out = _rt({"w": w, "y": y, "n": ember.ones(2)}, fmt)
    assert out["w"].requires_grad and out["w"].is_leaf
    assert out["y"].requires_grad and out["y"].grad_fn is None
    assert not out["n"].requires_grad
    out["w"].sum().backward()
    assert out["w"].grad is not None


def test_save_to_path_and_map_location(tmp_path, fmt):
    p = tmp_path / "ck.ember"
    save({"x": ember.ones(2)}, p, format=fmt)
    for ml in (None, "cpu", ember.device("cpu"), {"cuda:0": "cpu"}, lambda s, loc: s):
        out = load(p, map_location=ml)
        _same(out["x"], ember.ones(2))
    save([1], str(p), format=fmt)
    assert load(str(p)) == [1]


def test_archive_layout():
    buf = io.BytesIO()
    save({"x": ember.ones(2, dtype=ember.bfloat16)}, buf, format="ember")
    zf = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    assert set(zf.namelist()) == {"manifest.json", "object.json", "data.safetensors"}
    assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
    man = json.loads(zf.read("manifest.json"))
    assert man == {"format": "ember.checkpoint", "version": 1}
    doc = json.loads(zf.read("object.json"))
    assert doc["tensors"][0]["dtype"] == "bfloat16"
    raw = zf.read("data.safetensors")
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    assert header["s0"]["dtype"] == "BF16"


def test_unrepresentable_object_names_path():
    # ember's format stores data only: anything else is refused at save time
    with pytest.raises(SerializationError, match=r"obj\['model'\]\['fn'\]"):
        save({"model": {"fn": print}}, io.BytesIO(), format="ember")
    with pytest.raises(SerializationError, match=r"obj\[1\]\[0\]"):
        save([0, [Point(1, 2)]], io.BytesIO(), format="ember")
    with pytest.raises(SerializationError, match="key"):
        save({(1, 2): 3}, io.BytesIO(), format="ember")
    assert issubclass(SerializationError, EmberError) and issubclass(SerializationError,
                                                                      RuntimeError)


def test_allow_pickle_needs_weights_only_false_or_allowlist(fmt):
    buf = io.BytesIO()
    save({"p": Point(1, 2), "t": ember.ones(2)}, buf, format=fmt, allow_pickle=True)
    with pytest.raises(UnpicklingError, match="Point.*add_safe_globals|add_safe_globals"):
        load(io.BytesIO(buf.getvalue()))
    with pytest.warns(FutureWarning, match="weights_only=False"):
        out = load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert (out["p"].x, out["p"].y) == (1, 2)
    with safe_globals([Point]):
        assert Point in get_safe_globals()
        out = load(io.BytesIO(buf.getvalue()))
        assert out["p"].y == 2
    assert Point not in get_safe_globals()


def test_add_and_clear_safe_globals():
    try:
        add_safe_globals([Point])
        assert Point in get_safe_globals()
        buf = io.BytesIO()
        save([Point(3, 4)], buf, format="ember")  # an allowlisted type needs no allow_pickle
        assert load(io.BytesIO(buf.getvalue()))[0].x == 3
    finally:
        clear_safe_globals()
    assert get_safe_globals() == []


def test_pickled_objects_share_tensors_with_json_part(fmt):
    t = ember.arange(6.0)
    buf = io.BytesIO()
    p = Point(t, t[2:])
    save({"t": t, "p": p}, buf, format=fmt, allow_pickle=True)
    with safe_globals([Point]):
        out = load(io.BytesIO(buf.getvalue()))
    assert out["p"].x is out["t"]
    out["t"][3] = 50.0
    assert out["p"].y[1].item() == 50.0


def test_weights_only_false_warns(fmt):
    buf = io.BytesIO()
    save([1, 2], buf, format=fmt)
    with pytest.warns(FutureWarning):
        assert load(io.BytesIO(buf.getvalue()), weights_only=False) == [1, 2]


def test_mmap_load(tmp_path, rng, fmt):
    base = ember.tensor(rng.standard_normal((8, 8)).astype(np.float32))
    obj = {"b": base, "t": base.t(), "h": ember.ones(3, dtype=ember.bfloat16)}
    p = tmp_path / "m.ember"
    save(obj, p, format=fmt)
    before = p.read_bytes()
    out = load(p, mmap=True)
    for k in obj:
        _same(obj[k], out[k])
        root = out[k]._data
        while isinstance(root.base, np.ndarray):
            root = root.base
        assert not root.flags.owndata  # built over the mapping, not copied
    out["b"][0, 1] = 5.0  # a private mapping: writable, shared between views, file untouched
    assert out["t"][1, 0].item() == 5.0
    assert p.read_bytes() == before
    with pytest.raises(SerializationError, match="path"):
        load(io.BytesIO(before), mmap=True)


def test_save_options():
    buf = io.BytesIO()
    save({"x": ember.ones(2)}, buf, _disable_byteorder_record=True)
    names = zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()
    assert "archive/data.pkl" in names and "archive/byteorder" not in names
    assert load(io.BytesIO(buf.getvalue()))["x"].tolist() == [1.0, 1.0]
    with pytest.raises(SerializationError, match="legacy"):
        save([1], io.BytesIO(), _use_new_zipfile_serialization=False)
    with pytest.raises(SerializationError, match="format"):
        save([1], io.BytesIO(), format="onnx")
    with pytest.raises(SerializationError, match="pickle_module"):
        save([1], io.BytesIO(), pickle_module=json)
    import pickle
    save([1], buf, pickle_module=pickle)  # the standard module is accepted


def test_torch_format_pickles_any_object_but_loads_it_only_when_allowed():
    # format="torch" pickles what torch.save pickles; the restriction is on the loading side
    buf = io.BytesIO()
    save({"fn": print, "p": Point(1, 2)}, buf)
    with pytest.raises(UnpicklingError, match=r"builtins\.print"):
        load(io.BytesIO(buf.getvalue()))
    with safe_globals([print, Point]):
        out = load(io.BytesIO(buf.getvalue()))
    assert out["fn"] is print and out["p"].y == 2
