"""Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict against torch."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import ember
from tests.nn._tree import fill_deterministic, make_classes, to_np

torch = pytest.importorskip("torch")

E = make_classes(ember)
T = make_classes(torch)


def pair(build):
    """``build(lib, classes)`` run for ember and for torch."""
    return build(ember, E), build(torch, T)


def names(m):
    return [n for n, _ in m.named_parameters()], [n for n, _ in m.named_modules()]


def test_sequential_indexing_and_repr():
    e, t = pair(lambda lib, C: lib.nn.Sequential(C["Linear"](4, 3), C["Linear"](3, 2)))
    assert repr(e) == repr(t) and len(e) == len(t) == 2
    assert names(e) == names(t)
    assert e[-1] is list(e)[1]
    assert isinstance(e[0:1], ember.nn.Sequential) and repr(e[0:1]) == repr(t[0:1])
    assert repr(e[::-1]) == repr(t[::-1])
    with pytest.raises(IndexError, match="index 2 is out of range"):
        e[2]
    fill_deterministic(ember, e)
    fill_deterministic(torch, t)
    x = np.linspace(-1, 1, 8).reshape(2, 4)
    np.testing.assert_allclose(to_np(e(ember.tensor(x, dtype=ember.float32))),
                               to_np(t(torch.tensor(x, dtype=torch.float32))), rtol=1e-6)


def test_sequential_ordereddict_and_mutation():
    def build(lib, C):
        named = lib.nn.Sequential(OrderedDict([("fc", C["Linear"](2, 2)),
                                               ("out", C["Linear"](2, 1))]))
        named.append(C["Linear"](1, 1))
        r0 = (repr(named), names(named), repr(named[1:]))
        s = lib.nn.Sequential(C["Linear"](2, 2), C["Linear"](2, 1))
        s.insert(0, C["Linear"](3, 2))
        s.insert(-1, lib.nn.Module())
        s.extend([C["Linear"](1, 5)])
        r1 = repr(s)
        del s[1]
        r2 = repr(s)
        s[0] = C["Linear"](9, 9)
        popped = s.pop(-1)
        s2 = s + lib.nn.Sequential(C["Linear"](7, 7))
        s3 = lib.nn.Sequential(C["Linear"](1, 1)) * 2
        return r0, r1, r2, repr(s), repr(popped), repr(s2), repr(s3), names(s)

    e, t = pair(build)
    assert e == t


def test_sequential_errors():
    for case in (lambda lib: lib.nn.Sequential() + 3,
                 lambda lib: lib.nn.Sequential() * 0,
                 lambda lib: lib.nn.Sequential().insert(3, lib.nn.Module())):
        with pytest.raises(Exception) as te:
            case(torch)
        with pytest.raises(type(te.value)) as ee:
            case(ember)
        assert str(ee.value).replace("ember", "torch").split("'")[0] == \
            str(te.value).split("'")[0]


def test_modulelist_repr_compresses_runs():
    def build(lib, C):
        ml = lib.nn.ModuleList([C["Linear"](2, 2) for _ in range(3)] + [C["Linear"](2, 3)])
        ml.append(C["Linear"](2, 3))
        ml.extend([lib.nn.Sequential(C["Linear"](1, 1), C["Linear"](1, 1))])
        ml.insert(1, C["Linear"](5, 5))
        r = [repr(ml), repr(ml[1:3]), len(ml), repr(lib.nn.ModuleList())]
        del ml[0]
        r.append(repr(ml))
        r.append(repr(ml.pop(0)))
        r.append(repr(ml + lib.nn.ModuleList([lib.nn.Module()])))
        ml[-1] = C["Linear"](8, 8)
        r.append(names(ml))
        return r

    e, t = pair(build)
    assert e == t
    with pytest.raises(IndexError, match="index 5 is out of range"):
        ember.nn.ModuleList([ember.nn.Module()])[5]
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable"):
        ember.nn.ModuleList().extend(3)


def test_moduledict():
    def build(lib, C):
        md = lib.nn.ModuleDict({"b": C["Linear"](1, 2), "a": C["Linear"](2, 1)})
        md["c"] = lib.nn.Module()
        md.update([("d", C["Linear"](3, 3))])
        r = [repr(md), list(md), list(md.keys()), "a" in md, len(md), names(md)]
        md.pop("b")
        del md["c"]
        r += [repr(md), [type(v).__name__ for v in md.values()], [k for k, _ in md.items()]]
        md.clear()
        r.append(repr(md))
        return r

    e, t = pair(build)
    assert e == t
    with pytest.raises(ValueError, match="has length 1; 2 is required"):
        ember.nn.ModuleDict([("a",)])


def test_parameterlist():
    def build(lib, C):
        pl = lib.nn.ParameterList([lib.nn.Parameter(lib.zeros(2, 3)), lib.ones(4)])
        pl.append(lib.zeros(1, dtype=lib.float64))
        pl.extend([lib.nn.Parameter(lib.zeros(2), requires_grad=False)])
        pl.append("text")
        r = [repr(pl), len(pl), [type(p).__name__ for p in pl],
             [n for n, _ in pl.named_parameters()], repr(pl[1:3])]
        pl[0] = lib.zeros(5)
        r.append([tuple(p.shape) for p in pl.parameters()])
        return r

    e, t = pair(build)
    assert e[0].replace("ember.", "torch.") == t[0]
    assert (e[1:4], e[5]) == (t[1:4], t[5])
    assert e[4].replace("ember.", "torch.") == t[4]
    with pytest.raises(RuntimeError, match="ParameterList should not be called"):
        ember.nn.ParameterList()()
    with pytest.raises(TypeError, match="ParameterList.extend should be called"):
        ember.nn.ParameterList().extend(ember.zeros(2))


def test_parameterdict():
    def build(lib, C):
        pd = lib.nn.ParameterDict({"w": lib.zeros(2, 3), "b": lib.nn.Parameter(lib.ones(3))})
        pd["x"] = lib.zeros(1, dtype=lib.float64)
        pd.update(OrderedDict([("z", lib.zeros(2)), ("a", lib.zeros(1))]))
        r = [repr(pd), list(pd), len(pd), "w" in pd, [n for n, _ in pd.named_parameters()]]
        r.append(tuple(pd.pop("z").shape))
        r.append(pd.popitem()[0])
        r.append(pd.get("nope", 3))
        r.append(list(pd.copy()))
        r.append(list(pd | lib.nn.ParameterDict({"q": lib.zeros(1)})))
        pd.setdefault("s", lib.zeros(2))
        r.append(list(reversed(pd)))
        pd.clear()
        r.append(repr(pd))
        return r

    e, t = pair(build)
    assert e[0].replace("ember.", "torch.") == t[0]
    assert e[1:] == t[1:]
    with pytest.raises(TypeError, match="cannot be used as a key"):
        ember.nn.ParameterDict()[3]


def test_containers_state_dict_and_to():
    e, t = pair(lambda lib, C: lib.nn.ModuleDict({
        "seq": lib.nn.Sequential(C["Block"](), C["Linear"](3, 1)),
        "lst": lib.nn.ModuleList([C["Linear"](1, 1)]),
        "pl": lib.nn.ParameterList([lib.zeros(2)]),
        "pd": lib.nn.ParameterDict({"k": lib.zeros(3)}),
    }))
    assert list(e.state_dict()) == list(t.state_dict())
    assert repr(e).replace("ember.", "torch.") == repr(t)
    e.to(ember.float64)
    assert all(p.dtype == ember.float64 for p in e.parameters())
    assert e["pl"][0].dtype == ember.float64 and type(e["pd"]["k"]) is ember.nn.Parameter
