"""ember.export.save / load: round trips, the golden archive, and hostile or broken files."""

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, ExportedProgram, export, load, save
from ember.serialization._errors import SerializationError

GOLDEN = Path(__file__).parent / "golden" / "golden_v1_0.ep.zip"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)
        self.bn = nn.BatchNorm1d(6)
        self.register_buffer("offset", ember.full((3,), 0.25), persistent=False)

    def forward(self, x, y):
        h = self.bn(self.fc(x)).relu().view(-1, 3) + self.offset
        return {"h": h, "both": (h.sum(1), y * 2)}


def _export():
    ember.manual_seed(0)
    m = Net().eval()
    b = Dim("b", max=128)
    ep = export(m, (ember.randn(4, 8), ember.randn(4, 5)),
                dynamic_shapes={"x": {0: b}, "y": {0: b, 1: Dim.AUTO}})
    return m, ep


def _same_outputs(a, b):
    np.testing.assert_allclose(a["h"].detach().numpy(), b["h"].detach().numpy(), rtol=1e-6)
    for u, v in zip(a["both"], b["both"]):
        np.testing.assert_allclose(u.detach().numpy(), v.detach().numpy(), rtol=1e-6)


def _check_round_trip(m, ep, ep2):
    assert isinstance(ep2, ExportedProgram)
    assert str(ep2) == str(ep)
    assert {str(k): (v.lower, v.upper) for k, v in ep2.range_constraints.items()} == \
        {str(k): (v.lower, v.upper) for k, v in ep.range_constraints.items()}
    assert ep2.graph_signature == ep.graph_signature
    assert set(ep2.state_dict) == set(ep.state_dict) and set(ep2.constants) == set(ep.constants)
    for k, v in ep.state_dict.items():
        np.testing.assert_array_equal(ep2.state_dict[k].detach().numpy(), v.detach().numpy())
    assert isinstance(ep2.state_dict["fc.weight"], nn.Parameter)
    x, y = ember.randn(7, 8), ember.randn(7, 3)
    _same_outputs(ep2.module()(x, y), m(x, y))
    with pytest.raises(AssertionError, match="Guard failed"):
        ep2.module()(ember.randn(7, 8), ember.randn(6, 3))
    (a, b), kw = ep2.example_inputs
    np.testing.assert_array_equal(a.numpy(), ep.example_inputs[0][0].numpy())
    assert kw == {}


def test_round_trip_bytesio():
    m, ep = _export()
    buf = io.BytesIO()
    save(ep, buf, extra_files={"meta.txt": "hello"})
    buf.seek(0)
    extra = {"meta.txt": "", "absent.txt": ""}
    ep2 = load(buf, extra_files=extra)
    assert extra == {"meta.txt": "hello", "absent.txt": ""}
    _check_round_trip(m, ep, ep2)


def test_round_trip_file_and_reexport(tmp_path):
    m, ep = _export()
    path = tmp_path / "net.ep.zip"
    save(ep, path)
    save(ep, str(tmp_path / "net2.ep.zip"))
    ep2 = load(str(path))
    _check_round_trip(m, ep, ep2)
    # a loaded program's module re-exports; its guards hold the new trace to their range
    with pytest.raises(ember._dynamo.exc.UserError, match=r"b = Dim\('b', min=2, max=128\)"):
        export(ep2.module(), (ember.randn(4, 8), ember.randn(4, 5)),
               dynamic_shapes={"x": {0: Dim("b")}, "y": {0: Dim("b"), 1: Dim.AUTO}})
    b = Dim("b", max=128)
    re = export(ep2.module(), (ember.randn(4, 8), ember.randn(4, 5)),
                dynamic_shapes={"x": {0: b}, "y": {0: b, 1: Dim.AUTO}})
    x, y = ember.randn(9, 8), ember.randn(9, 2)
    _same_outputs(re.module()(x, y), m(x, y))


def test_golden_archive_still_loads():
    """Written by tests/export/golden/make_golden.py with format 1.0: a format change that
    breaks old files fails here.  Expected values are computed with NumPy from the closed-form
    weights the generator used."""
    extra = {"README": ""}
    ep = load(GOLDEN, extra_files=extra)
    assert extra["README"] == "ember export golden v1.0"
    assert [str(k) for k in ep.range_constraints] == ["s0"]
    vr = next(iter(ep.range_constraints.values()))
    assert (vr.lower, vr.upper) == (2, 64)
    w = (np.arange(24, dtype=np.float32).reshape(6, 4) - 11.5) / 10
    b = np.linspace(-1, 1, 6, dtype=np.float32)
    x = np.linspace(-3, 3, 20, dtype=np.float32).reshape(5, 4)
    expected = (np.maximum(x @ w.T + b, 0) * 0.5).reshape(-1, 2)
    got = ep.module()(ember.tensor(x))
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[0\] <= 64"):
        ep.module()(ember.randn(65, 4))


def _mutated(data: bytes, member: str, new: bytes) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name in src.namelist():
            zf.writestr(name, new if name == member else src.read(name))
    return out.getvalue()


def test_truncated_and_corrupted_files():
    data = GOLDEN.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 30):
        with pytest.raises(SerializationError, match=r"\[export.load\]"):
            load(io.BytesIO(data[:cut]))
    flipped = bytearray(data)
    flipped[200] ^= 0xFF  # inside a stored member: the CRC check catches it
    with pytest.raises(SerializationError, match=r"\[export.load\]"):
        load(io.BytesIO(bytes(flipped)))
    with pytest.raises(SerializationError, match="not valid JSON"):
        load(io.BytesIO(_mutated(data, "model.json", b"{not json")))
    with pytest.raises(SerializationError, match=r"\[safetensors\]"):
        load(io.BytesIO(_mutated(data, "weights.safetensors", b"\x01\x00")))


def test_versions():
    data = GOLDEN.read_bytes()
    with pytest.raises(SerializationError, match="format version 2.0"):
        load(io.BytesIO(_mutated(data, "version", b"2.0")))
    ep = load(io.BytesIO(_mutated(data, "version", b"1.7")))  # newer minor: additions only
    assert isinstance(ep, ExportedProgram)


def test_hostile_model_json_runs_nothing():
    data = GOLDEN.read_bytes()
    model = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("model.json"))
    calls = [n for n in model["nodes"] if n["op"] == "call_function"]
    calls[0]["target"] = "os.system"
    with pytest.raises(SerializationError, match="not an ember op"):
        load(io.BytesIO(_mutated(data, "model.json", json.dumps(model).encode())))
    model = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("model.json"))
    model["range_constraints"][0][0] = {"fn": "__import__", "args": ["os"]}
    with pytest.raises(SerializationError, match="malformed expression"):
        load(io.BytesIO(_mutated(data, "model.json", json.dumps(model).encode())))
    model = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("model.json"))
    model["nodes"][-1]["args"] = {"tuple": [{"tuple": [{"node": "nope"}]}]}
    with pytest.raises(SerializationError, match="not an earlier node"):
        load(io.BytesIO(_mutated(data, "model.json", json.dumps(model).encode())))


def test_save_rejects_non_programs():
    with pytest.raises(TypeError, match="ExportedProgram"):
        save(nn.Linear(2, 2), io.BytesIO())


def test_zip_bomb_and_deep_json_are_refused():
    data = GOLDEN.read_bytes()
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name in src.namelist():
            zf.writestr(name, src.read(name))
        zf.writestr("extra_files/bomb", b"\0" * (8 << 20), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(SerializationError, match="expands"):
        load(io.BytesIO(out.getvalue()))
    deep = b'{"format": "ember.export", "nodes": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    with pytest.raises(SerializationError, match=r"\[export.load\]"):
        load(io.BytesIO(_mutated(data, "model.json", deep)))
