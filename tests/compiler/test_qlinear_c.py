"""The int8 dynamic-quantized Linear inside compiled graphs (``qlinear_dynamic`` lowered to C,
ember/compiler/c/lower/qlinear.py): no graph break, no extern, the eager kernel's bits, torch's
``quantize_dynamic`` bits, and the unit built for each x86-64 level explicitly (AVX2
``vpmaddubsw``, AVX-VNNI, AVX-512BW, AVX512-VNNI), not only the host's ``-march=native``."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess

import numpy as np
import pytest

import ember
import ember.ao.quantization as Q
from ember import nn
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import toolchain
from ember.ops import _native

_SCHEMES = {"per_tensor": {nn.Linear}, "per_channel": {nn.Linear: Q.per_channel_dynamic_qconfig},
            "per_token": {nn.Linear: Q.per_token_dynamic_qconfig}}


def _model(k: int = 96, h: int = 200, m: int = 40) -> nn.Module:
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(k, h), nn.GELU(), nn.Linear(h, m))


def _compiled(fn, *args):  # noqa: ANN001, ANN202
    ember.compiler.reset()
    got = ember.compile(fn, backend="c", fullgraph=True)(*args)
    return got, cbackend.last_compiled()


@pytest.mark.parametrize("scheme", list(_SCHEMES))
@pytest.mark.parametrize("shape", [(4, 3, 96), (150, 96), (1, 96), (0, 96)])
def test_compiled_qlinear_is_c_and_exact(scheme: str, shape: tuple) -> None:
    q = Q.quantize_dynamic(_model(), _SCHEMES[scheme], dtype=ember.qint8)
    lin = q[0]
    x = ember.randn(*shape) * 3
    got, cg = _compiled(lin, x)
    assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
    if shape[0]:
        assert "ember_q8_begin(" in cg.source
    np.testing.assert_array_equal(got.numpy(), lin(x).numpy())   # the eager kernel's bits


def test_quantized_model_is_one_c_graph() -> None:
    """Two quantized Linears with GELU between: one graph, every node in C, and the same
    bits as eager (the compiled GELU may differ from eager's in the last bit, which can flip
    one input code of the second product: at most one quantization step there)."""
    q = Q.quantize_dynamic(_model(), {nn.Linear}, dtype=ember.qint8)
    x = ember.randn(64, 96)
    got, cg = _compiled(q, x)
    assert cg.stats.externs == 0 and cg.stats.fallbacks == [], cg.stats.fallbacks
    assert cg.source.count("ember_q8_begin(") >= 2
    want = q(x).numpy()
    w2 = q[2]
    step = float(np.abs(w2.weight().dequantize().numpy()).sum(1).max()) / 127  # one input code
    assert np.abs(got.numpy() - want).max() <= step


def test_strided_input_read_in_place() -> None:
    q = Q.quantize_dynamic(_model(), {nn.Linear}, dtype=ember.qint8)
    base = ember.randn(20, 130)
    got, cg = _compiled(lambda t: q[0](t[:, 7:103]), base)
    assert cg.stats.externs == 0
    np.testing.assert_array_equal(got.numpy(), q[0](base[:, 7:103]).numpy())


def test_dynamic_row_count() -> None:
    """A new batch size recompiles once into a shape-generic graph: the row count is a runtime
    size of the same C kernel."""
    q = Q.quantize_dynamic(_model(), _SCHEMES["per_token"], dtype=ember.qint8)
    ember.compiler.reset()
    f = ember.compile(q[0], backend="c")
    for n in (5, 7, 9, 130):
        x = ember.randn(n, 3, 96)
        got = f(x)
        cg = cbackend.last_compiled()
        assert cg.stats.externs == 0
        np.testing.assert_array_equal(got.numpy(), q[0](x).numpy())
    assert re.search(r"n_ = \(int64_t\)\(\(?[a-z]", cg.source)   # the rows: a runtime size


def test_matches_torch_quantize_dynamic() -> None:
    torch = pytest.importorskip("torch")
    m = _model()
    tm = torch.nn.Sequential(torch.nn.Linear(96, 200), torch.nn.GELU(),
                             torch.nn.Linear(200, 40))
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in
                        m.state_dict().items()})
    q = Q.quantize_dynamic(m, {nn.Linear}, dtype=ember.qint8)
    tq = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)
    x = np.random.default_rng(1).standard_normal((48, 96)).astype(np.float32)
    got, cg = _compiled(lambda t: q[0](t), ember.tensor(x))
    with torch.no_grad():
        want = tq[0](torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(got.numpy(), want)       # one Linear: torch's bits


def test_nan_input_does_what_eager_does() -> None:
    """A NaN makes the kernel hand the graph to eager's kernels: per-tensor scales raise as
    ATen's zero-point rounding does; per-token scales give eager's result."""
    x = ember.randn(8, 96)
    x[3, 5] = float("nan")
    q = Q.quantize_dynamic(_model(), _SCHEMES["per_tensor"], dtype=ember.qint8)
    with pytest.raises(ValueError):
        q[0](x)
    with pytest.raises(ValueError):
        ember.compile(q[0], backend="c", fullgraph=True)(x)
    q = Q.quantize_dynamic(_model(), _SCHEMES["per_token"], dtype=ember.qint8)
    np.testing.assert_array_equal(ember.compile(q[0], backend="c")(x).numpy(), q[0](x).numpy())


# -- each ISA path of the compiled unit, whatever the host -------------------------------------
_LEVELS = {
    "x86-64-v3": (("-march=x86-64-v3",), ("avx2", "fma"), "vpmaddubsw"),
    "x86-64-v3+avxvnni": (("-march=x86-64-v3", "-mavxvnni"), ("avx2", "fma", "avx_vnni"),
                          "vpdpbusd"),
    "x86-64-v4": (("-march=x86-64-v4",), ("avx512bw",), "vpmaddubsw"),
    "x86-64-v4+avx512vnni": (("-march=x86-64-v4", "-mavx512vnni"), ("avx512bw", "avx512_vnni"),
                             "vpdpbusd"),
}


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or shutil.which("gcc") is None,
                    reason="needs gcc on x86-64")
@pytest.mark.parametrize("level", list(_LEVELS))
def test_compiled_unit_per_isa(level: str, monkeypatch, tmp_path) -> None:  # noqa: ANN001
    """Every level's unit is compiled (assembly checked) whatever the host; it also runs, with
    eager's bits, where the host has the instructions."""
    flags, needs, marker = _LEVELS[level]
    q = Q.quantize_dynamic(_model(), _SCHEMES["per_token"], dtype=ember.qint8)
    _, cg = _compiled(q[0], ember.randn(150, 96))      # the unit's C (the host's build)
    src = tmp_path / "unit.c"
    src.write_text(cg.source)
    asm = subprocess.run(["gcc", "-O3", *flags, "-fopenmp", "-ffp-contract=off", "-fPIC", "-S",
                          str(src), "-o", "-"], check=True, capture_output=True, text=True).stdout
    assert marker in asm, f"{flags} did not select its {marker} path"
    if marker == "vpmaddubsw":
        assert "vpdpbusd" not in asm
    host = _native._cpu_flags().split()
    if any(f not in host for f in needs):
        pytest.skip(f"compiled; this CPU cannot run {' '.join(flags)}")
    base = tuple(f for f in toolchain.FLAGS if f != "-march=native")
    monkeypatch.setattr(toolchain, "FLAGS", base + flags)
    monkeypatch.setattr(toolchain, "machine_flags", lambda: ())
    for scheme in ("per_tensor", "per_token"):   # per_token: codes up to 255, the split path
        q = Q.quantize_dynamic(_model(), _SCHEMES[scheme], dtype=ember.qint8)
        x = ember.randn(150, 96) * 3
        got, cg = _compiled(q[0], x)
        assert cg.stats.externs == 0
        np.testing.assert_array_equal(got.numpy(), q[0](x).numpy())


@pytest.mark.parametrize("shape", [(4, 37, 96), (300, 96), (1, 96)])
def test_pointwise_consumers_fuse_into_the_int8_kernel(shape: tuple) -> None:
    """GELU after the product and a residual add after the second product become the int8
    kernels' epilogues (run on each block of rows while it is in cache): two kernels, no
    pointwise pass of their own.  The compiled GELU may differ from eager's in the last bit,
    which can move an input code of the second product by one: the outputs agree within two
    such steps (input scale times the largest weight)."""
    import ember.nn.functional as F

    q = Q.quantize_dynamic(_model(96, 200, 96), _SCHEMES["per_token"], dtype=ember.qint8)

    def block(x):  # noqa: ANN001, ANN202
        return x + q[2](F.gelu(q[0](x)))

    x = ember.randn(*shape)
    got, cg = _compiled(block, x)
    assert cg.stats.externs == 0 and cg.stats.kernels == 2 and cg.stats.epilogues == 2
    assert "ember_gelu_erf" in cg.source.split("ember_q8_plan pl_;", 1)[1]
    want = block(x).numpy()
    h = F.gelu(q[0](x)).numpy().reshape(-1, 200)
    sx = (np.maximum(h.max(1), 0) - np.minimum(h.min(1), 0)) / 255
    step = float(sx.max()) * float(np.abs(q[2].weight().dequantize().numpy()).max())
    assert np.abs(got.numpy() - want).max() <= 2 * step + 1e-6
