"""Export and AOT packages of dynamically quantized models (``quantize_dynamic``, docs/aot.md
"Quantized models", docs/low_precision.md): the packed int8 weights are constants named by
FQN, ``ep.module()``, ``ember.compile(ep.module())``, the package from Python and the package
from the C runner give eager's bits, which are torch's ``quantize_dynamic`` bits (per tensor,
per channel).  torch 2.13 itself cannot export such a model (its packed weights are a
ScriptObject without ``__obj_flatten__``)."""

import importlib.util
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, export
from tests.aot.helpers import CRunner

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
Q = ember.ao.quantization
SCHEMES = {"per_tensor": {nn.Linear}, "per_channel": {nn.Linear: Q.per_channel_dynamic_qconfig},
           "per_token": {nn.Linear: Q.per_token_dynamic_qconfig}}
PACKED = ("_packed_weight", "_packed_colsum", "_packed_scale", "_packed_bias")


def _float_mlp(seed: int = 0) -> nn.Module:
    ember.manual_seed(seed)  # 8 -> 16 -> 4, as examples/aot_c/app.c feeds and prints
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()


def _torch_quantized(model: nn.Module, scheme: str):
    tf = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    tf.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                        for k, v in model.state_dict().items()})
    spec = ({torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
            if scheme == "per_channel" else {torch.nn.Linear})
    return torch.ao.quantization.quantize_dynamic(tf.eval(), spec, dtype=torch.qint8)


@pytest.fixture(scope="module", params=sorted(SCHEMES))
def qmlp(request, tmp_path_factory):
    q = Q.quantize_dynamic(_float_mlp(), SCHEMES[request.param], dtype=ember.qint8)
    ep = export(q, (ember.randn(3, 8),), dynamic_shapes=({0: Dim("n")},))
    path = str(tmp_path_factory.mktemp("qmlp") / "q.pt2")
    ember._inductor.aoti_compile_and_package(ep, package_path=path)
    return request.param, q, ep, path


def _inputs():
    g = np.random.default_rng(3)   # 130 rows: the threaded row split; 1 and 5: column split
    return [ember.tensor((g.standard_normal((n, 8)) * 3).astype(np.float32))
            for n in (1, 5, 130)]


def test_packed_weights_are_named_constants(qmlp):
    _, q, ep, path = qmlp
    specs = ep.graph_signature.input_specs
    want = [f"{i}._packed_params.{p}" for i in (0, 2) for p in PACKED]
    assert [s.target for s in specs[:-1]] == want
    assert {s.kind.name for s in specs[:-1]} == {"CONSTANT_TENSOR"}
    assert ep.state_dict == {}   # no float weights left
    assert ep.constants["0._packed_params._packed_weight"].dtype is ember.int8
    np.testing.assert_array_equal(ep.constants["2._packed_params._packed_weight"].numpy(),
                                  q[2]._packed_params._packed_weight.numpy())
    ops = [n.target.name for n in ep.graph.nodes if n.op == "call_function"]
    assert ops == ["qlinear_dynamic", "relu", "qlinear_dynamic"]
    assert ember._inductor.aoti_load_package(path).get_constant_fqns() == want


def test_ep_module_and_compiled_equal_eager_and_torch(qmlp):
    scheme, q, ep, _ = qmlp
    compiled = ember.compile(ep.module())
    tq = None if scheme == "per_token" else _torch_quantized(_float_mlp(), scheme)
    for x in _inputs():
        want = q(x).numpy()
        np.testing.assert_array_equal(ep.module()(x).detach().numpy(), want)
        np.testing.assert_array_equal(compiled(x).detach().numpy(), want)
        if tq is not None:   # PyTorch's schemes: eager is fbgemm's bits
            np.testing.assert_array_equal(want, tq(torch.from_numpy(x.numpy())).numpy())


def test_saved_exported_program_runs(qmlp):
    _, q, ep, _ = qmlp
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    ep2 = ember.export.load(buf)
    for x in _inputs():
        np.testing.assert_array_equal(ep2.module()(x).detach().numpy(), q(x).numpy())


def test_package_from_python_and_c_equals_eager(qmlp):
    _, q, _, path = qmlp
    model = ember._inductor.aoti_load_package(path)
    c = CRunner()
    rc, h, err = c.load(path)
    assert rc == 0, err
    try:
        for x in _inputs():
            want = q(x).numpy()
            np.testing.assert_array_equal(model(x).numpy(), want)
            rc, outs = c.run(h, [x.numpy()])
            assert rc == 0, c.error()
            np.testing.assert_array_equal(outs[0], want)
    finally:
        c.lib.ember_aot_unload(h)


def test_package_refuses_a_nan_input(qmlp):
    scheme, q, _, path = qmlp
    x = ember.randn(4, 8)
    x[1, 2] = float("nan")
    if scheme != "per_token":
        with pytest.raises(ValueError):   # eager: ATen's zero point of a NaN range
            q(x)
    with pytest.raises(ember.errors.EmberRuntimeError, match="NaN into a dynamically"):
        ember._inductor.aoti_load_package(path)(x)
    c = CRunner()
    rc, h, err = c.load(path)
    assert rc == 0, err
    try:
        rc, _ = c.run(h, [x.numpy()])
        assert rc == 8 and "NaN into a dynamically quantized Linear" in c.error()  # ERUN
    finally:
        c.lib.ember_aot_unload(h)


def test_load_constants_swaps_the_quantized_weights(qmlp):
    scheme, _, _, path = qmlp
    other = Q.quantize_dynamic(_float_mlp(seed=7), SCHEMES[scheme], dtype=ember.qint8)
    ep2 = export(other, (ember.randn(3, 8),), dynamic_shapes=({0: Dim("n")},))
    model = ember._inductor.aoti_load_package(path)
    model.load_constants(dict(ep2.constants), check_full_update=True)
    for x in _inputs():
        np.testing.assert_array_equal(model(x).numpy(), other(x).numpy())


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_c_program_runs_the_quantized_package(qmlp, tmp_path):
    """examples/aot_c/app.c, built with gcc against libember_aot, runs the package."""
    _, q, _, path = qmlp
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    inc, lib = (subprocess.run([sys.executable, "-m", "ember.aot", flag], capture_output=True,
                               text=True, env=env, check=True).stdout.strip()
                for flag in ("--include-dir", "--lib-dir"))
    exe = tmp_path / "app"
    subprocess.run(["gcc", "-Wall", "-Werror", str(ROOT / "examples/aot_c/app.c"), f"-I{inc}",
                    f"-L{lib}", f"-Wl,-rpath,{lib}", "-lember_aot", "-ldl", "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe), path, "7"], capture_output=True, text=True, timeout=60,
                         env={"PATH": os.environ.get("PATH", ""), "TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    got = np.array([float(v) for v in out.stdout.split("\n")[1:] if v], np.float32)
    x = ((np.arange(7 * 8) % 7) * 0.25 - 0.5).astype(np.float32).reshape(7, 8)
    np.testing.assert_array_equal(got.reshape(7, 4), q(ember.tensor(x)).numpy())


# ------------------------------------------------------------------ a MiniLM-shaped encoder
@pytest.fixture(scope="module")
def qbert(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("minilm_example", ROOT / "examples/minilm.py")
    mm = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("minilm_example", mm)   # its dataclass looks its module up
    spec.loader.exec_module(sys.modules["minilm_example"])
    mm = sys.modules["minilm_example"]
    ember.manual_seed(0)
    cfg = mm.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=24)
    q = Q.quantize_dynamic(mm.BertModel(cfg).eval(), SCHEMES["per_token"])
    ids = ember.randint(1, 50, (3, 10))
    mask = ember.ones(3, 10, dtype=ember.int64)
    b, s = Dim("batch", max=16), Dim("seq", max=24)
    ep = export(q, (ids, mask), dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}))
    path = str(tmp_path_factory.mktemp("qbert") / "bert.pt2")
    ember._inductor.aoti_compile_and_package(ep, package_path=path)
    return q, ep, path


def _bert_inputs():
    g = np.random.default_rng(5)
    out = []
    for b, t in ((3, 10), (2, 17), (1, 5)):
        mask = np.ones((b, t), np.int64)
        mask[0, t - 2:] = 0               # padded keys
        out.append((ember.tensor(g.integers(1, 50, (b, t))), ember.tensor(mask)))
    return out


def test_quantized_encoder_exports_and_packages(qbert):
    q, ep, path = qbert
    names = [s.target for s in ep.graph_signature.input_specs]
    assert "encoder.layer.1.output.dense._packed_params._packed_weight" in names
    n_q = sum(getattr(n.target, "name", None) == "qlinear_dynamic"
              for n in ep.graph.nodes)
    assert n_q == 12                          # 6 quantized Linears a layer
    model = ember._inductor.aoti_load_package(path)
    compiled = ember.compile(q)
    c = CRunner()
    rc, h, err = c.load(path)
    assert rc == 0, err
    try:
        for ids, mask in _bert_inputs():
            with ember.no_grad():
                want = q(ids, mask).numpy()
                np.testing.assert_array_equal(ep.module()(ids, mask).numpy(), want)
                comp = compiled(ids, mask).numpy()
            # C float kernels (layer norm, softmax, GELU) differ from eager's in the last
            # bits of float32; the int8 products then see the same codes here (a code that
            # flipped would move an output by one quantization step, ~1e-2)
            np.testing.assert_allclose(comp, want, rtol=0, atol=1e-5)
            got = model(ids, mask).numpy()
            np.testing.assert_allclose(got, comp, rtol=0, atol=1e-5)
            rc, outs = c.run(h, [ids.numpy(), mask.numpy()])
            assert rc == 0, c.error()
            np.testing.assert_array_equal(outs[0], got)
    finally:
        c.lib.ember_aot_unload(h)
