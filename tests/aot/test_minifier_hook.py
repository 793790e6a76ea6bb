"""The hook point the minifier plugs into: a failing package build calls
``ember.compiler.minifier.maybe_dump`` with the program and the error (the minifier itself is
tested with its own code)."""

import sys
import types

import pytest

import ember
import ember.nn as nn
from ember.aot import ModelSourceError
from ember.export import export


class Nonzero(nn.Module):
    def forward(self, x):
        return x.nonzero()


def test_failed_build_calls_the_minifier_hook(monkeypatch):
    calls = []
    fake = types.ModuleType("ember.compiler.minifier")
    fake.maybe_dump = lambda **kw: calls.append(kw)
    monkeypatch.setitem(sys.modules, "ember.compiler.minifier", fake)
    monkeypatch.setattr(ember.compiler, "minifier", fake, raising=False)
    ep = export(Nonzero(), (ember.tensor([0.0, 1.0]),))
    cfg = {"aot_inductor.dump_minifier": True}
    with pytest.raises(ModelSourceError):
        ember.aot.compile_and_package(ep, inductor_configs=cfg)
    assert len(calls) == 1
    assert calls[0]["stage"] == "aot_compile" and calls[0]["program"] is ep
    assert calls[0]["configs"]["aot_inductor.dump_minifier"] is True
    assert isinstance(calls[0]["error"], ModelSourceError)


def test_a_broken_hook_only_warns(monkeypatch):
    fake = types.ModuleType("ember.compiler.minifier")

    def broken(**kw):
        raise KeyError("oops")
    fake.maybe_dump = broken
    monkeypatch.setitem(sys.modules, "ember.compiler.minifier", fake)
    monkeypatch.setattr(ember.compiler, "minifier", fake, raising=False)
    ep = export(Nonzero(), (ember.tensor([0.0, 1.0]),))
    with pytest.warns(RuntimeWarning, match="minifier hook failed"):
        with pytest.raises(ModelSourceError):
            ember.aot.compile_and_package(ep)
