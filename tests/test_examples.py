"""The examples run as tests with small sizes."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mlp_digits_reaches_95_percent():
    pytest.importorskip("sklearn")
    acc = _load("mlp_digits").main(epochs=15, verbose=False)
    assert acc >= 0.95, acc


def test_char_gpt_example_learns(capsys):
    losses = _load("char_gpt").main(["--steps", "60", "--batch", "8", "--block", "32",
                                     "--sample", "10"])
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < first - 0.5, (first, last, losses)
    assert "sample:" in capsys.readouterr().out


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_char_gpt_example_learns_under_autocast(dtype, capsys):
    """``--dtype``: autocast training (float16 with GradScaler) learns like float32."""
    losses = _load("char_gpt").main(["--steps", "60", "--batch", "8", "--block", "32",
                                     "--sample", "0", "--dtype", dtype])
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < first - 0.5, (first, last, losses)


def test_char_gpt_example_generates_with_kv_cache(capsys):
    _load("char_gpt").main(["--steps", "2", "--batch", "2", "--block", "16", "--d", "24",
                            "--heads", "3", "--sample", "40", "--generate"])
    out = capsys.readouterr().out
    assert "generated 12 characters with the KV cache" in out
    sample = out.split("sample:\n", 1)[1]
    assert sample.startswith("The ") and len(sample) == 16 + 1  # block chars, print's newline
