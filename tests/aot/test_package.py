"""AOT packages from Python: round trips against ``ep.module()`` (dynamic batch, dict outputs,
the export zoo's char GPT), the PT2 layout on disk, metadata, weight swaps, several models per
archive, re-export, and the ops/programs a package refuses."""

import json
import mmap
import zipfile

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.aot import IncompatiblePackageError, ModelSourceError
from ember.export import Dim, export


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)
        self.ln = nn.LayerNorm(6)
        self.register_buffer("offset", ember.full((6,), 0.25))

    def forward(self, x, y):
        h = self.ln(self.fc(x)).relu() + self.offset
        return {"h": h, "pair": (h.sum(1), y * 2)}


def _assert_same(got, want, rtol=1e-5, atol=1e-6):
    if isinstance(want, dict):
        assert set(got) == set(want)
        for k in want:
            _assert_same(got[k], want[k], rtol, atol)
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for u, v in zip(got, want):
            _assert_same(u, v, rtol, atol)
    else:
        assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol,
                                   atol=atol)


@pytest.fixture(scope="module")
def net_package(tmp_path_factory):
    ember.manual_seed(0)
    m = Net().eval()
    b = Dim("b", max=64)
    ep = export(m, (ember.randn(4, 8), ember.randn(4, 5)),
                dynamic_shapes={"x": {0: b}, "y": {0: b, 1: Dim.AUTO}})
    path = tmp_path_factory.mktemp("aot") / "net.pt2"
    out = ember._inductor.aoti_compile_and_package(
        ep, package_path=str(path), inductor_configs={"aot_inductor.metadata": {"who": "test"}})
    return ep, out


def test_round_trip_dynamic_batch(net_package):
    ep, path = net_package
    model = ember._inductor.aoti_load_package(path)
    for n, k in ((1, 5), (4, 5), (17, 3)):
        x, y = ember.randn(n, 8), ember.randn(n, k)
        _assert_same(model(x, y), ep.module()(x, y))
    _assert_same(model(x=ember.ones(3, 8), y=ember.ones(3, 2)),
                 ep.module()(x=ember.ones(3, 8), y=ember.ones(3, 2)))


def test_guard_failures_match_ep_module(net_package):
    ep, path = net_package
    model = ember.aot.load_package(path)
    bad = (ember.randn(3, 8), ember.randn(4, 5))  # batch sizes differ
    with pytest.raises(AssertionError) as ours:
        model(*bad)
    with pytest.raises(AssertionError):
        ep.module()(*bad)
    assert "Guard failed" in str(ours.value)
    with pytest.raises(AssertionError, match="<= 64"):
        model(ember.randn(65, 8), ember.randn(65, 5))
    with pytest.raises(ember.errors.EmberValueError, match="float64"):
        model(ember.randn(3, 8, dtype=ember.float64), ember.randn(3, 5))


def test_metadata_and_constant_fqns(net_package):
    ep, path = net_package
    model = ember._inductor.aoti_load_package(path)
    meta = model.get_metadata()
    assert meta["who"] == "test"
    assert meta["AOTI_DEVICE_KEY"] == "cpu" and meta["ember.runtime_abi"] == "1"
    assert model.get_constant_fqns() == ["fc.weight", "fc.bias", "ln.weight", "ln.bias",
                                         "offset"]


def test_weights_are_mapped_not_copied(net_package):
    _, path = net_package
    model = ember.aot.load_package(path)
    w = model._constants["fc.weight"]
    base = w
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    assert base is model._archive.map and isinstance(base, mmap.mmap)
    assert not w.flags.writeable and w.ctypes.data % 64 == 0


def test_archive_layout(net_package):
    _, path = net_package
    zf = zipfile.ZipFile(path)
    names = zf.namelist()
    root = names[0].split("/")[0]
    assert root == "net" and all(n.startswith("net/") for n in names)
    assert zf.read("net/archive_format") == b"pt2"
    assert zf.read("net/byteorder") == b"little"
    assert "net/archive_version" in names and "net/models/model.json" in names
    assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
    so = [n for n in names if n.endswith(".wrapper.so")]
    assert len(so) == 1 and so[0].startswith("net/data/aotinductor/model/")
    config = json.loads(zf.read("net/data/weights/model_weights_config.json"))
    assert config["fc.weight"]["shape"] == [6, 8] and config["fc.weight"]["dtype"] == "float32"
    raw = open(path, "rb").read()
    for fqn, c in config.items():
        info = zf.getinfo(f"net/data/weights/model/{c['file']}")
        start = info.header_offset + 30 + len(info.filename) + len(info.extra)
        assert start % 64 == 0, fqn
        assert raw[start:start + info.file_size] == zf.read(info)


def test_load_constants_swaps_weights(net_package):
    ep, path = net_package
    model = ember.aot.load_package(path)
    ember.manual_seed(1)
    other = Net().eval()
    other.offset.fill_(-0.5)
    new = {k: v.detach() for k, v in other.state_dict().items()}
    x, y = ember.randn(5, 8), ember.randn(5, 2)
    with pytest.raises(ember.errors.EmberValueError, match="missing"):
        model.load_constants({"fc.weight": new["fc.weight"]}, check_full_update=True)
    with pytest.raises(ember.errors.EmberValueError, match="unknown"):
        model.load_constants({"nope": new["fc.weight"]}, check_full_update=False)
    model.load_constants({"fc.bias": new["fc.bias"]}, check_full_update=False)
    assert np.array_equal(model._constants["fc.bias"], new["fc.bias"].numpy())
    model.load_constants(new, check_full_update=True)
    _assert_same(model(x, y), other(x, y))


def test_several_models_in_one_archive(tmp_path):
    ember.manual_seed(0)
    a = nn.Sequential(nn.Linear(4, 3), nn.Tanh()).eval()
    b = nn.Sequential(nn.Linear(4, 2), nn.Sigmoid()).eval()
    x = ember.randn(2, 4)
    ep_a = export(a, (x,), dynamic_shapes=({0: Dim("n")},))
    ep_b = export(b, (x,))
    files_a = ember._inductor.aot_compile(ep_a, options={"aot_inductor.package": True})
    files_b = ember._inductor.aot_compile(ep_b, options={"aot_inductor.package": True})
    path = ember._inductor.package.package_aoti(str(tmp_path / "two.pt2"),
                                                {"enc": files_a, "dec": files_b})
    ma = ember._inductor.package.load_package(path, "enc")
    mb = ember._inductor.package.load_package(path, "dec")
    _assert_same(ma(ember.ones(5, 4)), a(ember.ones(5, 4)))
    _assert_same(mb(x), b(x))
    with pytest.raises(ember.aot.PackageError, match=r"no model 'model'.*\['dec', 'enc'\]"):
        ember._inductor.aoti_load_package(path)


def test_reexport_from_package(net_package, tmp_path):
    ep, path = net_package
    ep2 = ember.aot.load_exported_program(path)
    x, y = ember.randn(6, 8), ember.randn(6, 5)
    _assert_same(ep2.module()(x, y), ep.module()(x, y), rtol=0, atol=0)
    again = ember.aot.compile_and_package(ep2, package_path=str(tmp_path / "again.pt2"))
    _assert_same(ember.aot.load_package(again)(x, y), ep.module()(x, y))


def _char_gpt():
    from ember.demo import CharGPT
    ember.manual_seed(0)
    return CharGPT(30, block=32, d=16, layers=2, heads=2).eval()


def test_char_gpt_static(tmp_path):
    m = _char_gpt()
    ep = export(m, (ember.randint(0, 30, (2, 9)),))
    model = ember.aot.load_package(ember.aot.compile_and_package(
        ep, package_path=str(tmp_path / "gpt.pt2")))
    for _ in range(2):
        idx = ember.randint(0, 30, (2, 9))
        _assert_same(model(idx), ep.module()(idx), rtol=1e-4, atol=1e-5)


def test_char_gpt_dynamic_batch_and_sequence(tmp_path):
    """Token lookup, head views and the broadcast causal mask all lower over runtime sizes, so
    one size-generic package serves every (batch, sequence)."""
    m = _char_gpt()
    ep = export(m, (ember.randint(0, 30, (2, 9)),),
                dynamic_shapes={"idx": {0: Dim("b"), 1: Dim("t", max=32)}})
    model = ember.aot.load_package(ember.aot.compile_and_package(
        ep, package_path=str(tmp_path / "gpt.pt2")))
    for shape in ((1, 5), (3, 17), (2, 32)):
        idx = ember.randint(0, 30, shape)
        _assert_same(model(idx), ep.module()(idx), rtol=1e-4, atol=1e-5)


def test_python_fallback_ops_are_refused_naming_the_op():
    class Sorter(nn.Module):
        def forward(self, x):
            return x.nonzero()

    ep = export(Sorter(), (ember.tensor([0.0, 1.0, 2.0]),))
    with pytest.raises(ModelSourceError, match=r"\[aoti_compile_and_package\]"):
        ember.aot.compile_and_package(ep)


def test_input_mutating_programs_are_refused():
    """Buffers may be updated in place (tests/aot/test_mutation.py); user inputs may not."""
    class Scale(nn.Module):
        def forward(self, x):
            x.mul_(2)
            return x + 1

    ep = export(Scale(), (ember.randn(3),))
    with pytest.raises(ModelSourceError, match="mutates.*USER_INPUT_MUTATION"):
        ember.aot.compile_and_package(ep)


def test_not_an_exported_program():
    with pytest.raises(ember.errors.EmberTypeError, match="ExportedProgram"):
        ember.aot.compile_and_package(nn.Linear(2, 2))


def test_incompatible_cpu_and_runtime_are_named(net_package, tmp_path):
    from tests.aot.helpers import edit_metadata
    _, path = net_package
    bad = edit_metadata(path, tmp_path / "isa.pt2", {"ember.cpu_features": "sse2,fakeisa512"})
    with pytest.raises(IncompatiblePackageError, match="lacks: fakeisa512"):
        ember.aot.load_package(bad)
    bad = edit_metadata(path, tmp_path / "abi.pt2", {"ember.runtime_abi": "7"})
    with pytest.raises(IncompatiblePackageError, match="runtime abi version 7"):
        ember.aot.load_package(bad)
    bad = edit_metadata(path, tmp_path / "arch.pt2", {"AOTI_MACHINE": "aarch64"})
    with pytest.raises(IncompatiblePackageError, match="AOTI_MACHINE='aarch64'"):
        ember.aot.load_package(bad)


@pytest.mark.parametrize("shape", [(2, 3, 17, 8), (1, 2, 70, 24), (1, 1, 33, 40)],
                         ids=["17x8", "70x24", "33x40"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_without_blas(tmp_path, dtype, causal, shape):
    """Packages have no BLAS: attention's products take the generated loops (same sums in the
    same order as the reference dot products; column blocks of 32, 24, 16, 8 and single
    columns, row pairs and a last single row), checked against ep.module()."""
    import ember.nn.functional as F

    class Attn(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    ember.manual_seed(0)
    q, k, v = (ember.randn(*shape, dtype=dtype) for _ in range(3))
    ep = export(Attn(), (q, k, v))
    model = ember.aot.load_package(ember.aot.compile_and_package(
        ep, package_path=str(tmp_path / "attn.pt2")))
    tol = 1e-5 if dtype == ember.float32 else 1e-12
    _assert_same(model(q, k, v), ep.module()(q, k, v), rtol=tol, atol=tol)


def test_package_in_a_bytes_buffer(net_package):
    import io
    ep, path = net_package
    buf = io.BytesIO(open(path, "rb").read())
    model = ember._inductor.aoti_load_package(buf)
    x, y = ember.randn(2, 8), ember.randn(2, 3)
    _assert_same(model(x, y), ep.module()(x, y))
    out = io.BytesIO()
    assert ember.aot.compile_and_package(ep, package_path=out) is out
    out.seek(0)
    _assert_same(ember.aot.load_package(out)(x, y), ep.module()(x, y))


def test_aot_compile_takes_a_module_and_args_like_torch(tmp_path):
    import io
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
    x = ember.randn(2, 4)
    files = ember._inductor.aot_compile(m, (x,), options={"aot_inductor.package": True})
    ep_files = ember._inductor.aot_compile(export(m, (x,)).module())
    buf = io.BytesIO()
    assert ember._inductor.package.package_aoti(buf, {"a": files, "b": ep_files}) is buf
    buf.seek(0)
    got = ember._inductor.package.load_package(buf, "b", num_runners=2)(x)
    _assert_same(got, m(x))


def test_thread_count_follows_ember(net_package):
    _, path = net_package
    model = ember.aot.load_package(path)
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(2)
        assert model._lib.ember_get_num_threads() == 2
        ember.set_num_threads(1)
        assert model._lib.ember_get_num_threads() == 1
    finally:
        ember.set_num_threads(old)


def test_package_path_must_end_in_pt2_like_torch(net_package, tmp_path):
    torch = pytest.importorskip("torch")
    ep, _ = net_package
    with pytest.raises(AssertionError, match="ending in .pt2") as ours:
        ember._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "m.zip"))
    t_ep = torch.export.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
    with pytest.raises(AssertionError) as theirs:
        torch._inductor.aoti_compile_and_package(t_ep, package_path=str(tmp_path / "m.zip"))
    assert str(ours.value) == str(theirs.value)


def test_calls_from_several_threads(net_package):
    """Each thread reuses argument tables of its own: concurrent calls at different batch
    sizes all give ep.module()'s results."""
    import threading
    ep, path = net_package
    model = ember.aot.load_package(path)
    cases = [(ember.randn(b, 8), ember.randn(b, 3)) for b in (1, 2, 5, 9)]
    wants = [ep.module()(*c) for c in cases]
    errors = []

    def work(k):
        try:
            for _ in range(20):
                _assert_same(model(*cases[k]), wants[k])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
