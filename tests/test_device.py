"""Devices, DeviceGuard and Stream on the CPU."""

from __future__ import annotations

import pytest

import ember

dev_mod = __import__("sys").modules["ember.device"]


def test_device_objects():
    d = ember.device("cpu")
    assert d.type == "cpu" and d.index is None and str(d) == "cpu"
    assert repr(d) == "device(type='cpu')"
    assert ember.device("cpu:0").index == 0 and ember.device("cpu", 0) == ember.device("cpu:0")
    assert ember.zeros(2).device == ember.device("cpu") == "cpu"
    with pytest.raises(ValueError, match="device"):
        ember.device("tpu")


def test_to_device_and_cpu():
    t = ember.ones(3)
    assert t.to("cpu") is t and t.cpu() is t and t.to(ember.device("cpu")) is t
    with pytest.raises(RuntimeError, match=r"\[to\] device 'cuda' is not available"):
        t.to("cuda")
    with pytest.raises(ember.DeviceError):
        ember.zeros(2, device="cuda:0")
    with pytest.raises(RuntimeError, match="not available"):
        t.cuda()


def test_device_guard_and_streams():
    with ember.DeviceGuard("cpu") as g:
        assert g.device == ember.device("cpu")
        assert dev_mod.current_device() == 0
    s = ember.Stream()
    assert s.query() and s.synchronize() is None
    assert dev_mod.current_stream() is dev_mod.default_stream()
    with s:
        assert dev_mod.current_stream() is s
    assert dev_mod.current_stream() is dev_mod.default_stream()
    with pytest.raises(RuntimeError):
        ember.Stream(device="cuda")
