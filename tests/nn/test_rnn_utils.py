"""ember.nn.utils.rnn against torch.nn.utils.rnn: PackedSequence, pack_padded_sequence,
pad_packed_sequence, pad_sequence, pack_sequence, unpad_sequence, unpack_sequence (values,
dtypes, gradients, errors)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.nn.utils import rnn as ernn
from tests.nn._layer_utils import to_np

torch = pytest.importorskip("torch")
trnn = torch.nn.utils.rnn


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def assert_packed_equal(e, t):
    assert isinstance(e, ernn.PackedSequence) and isinstance(e, tuple)
    np.testing.assert_array_equal(to_np(e.data), to_np(t.data))
    np.testing.assert_array_equal(to_np(e.batch_sizes), to_np(t.batch_sizes))
    assert e.batch_sizes.dtype == ember.int64
    for a, b in ((e.sorted_indices, t.sorted_indices), (e.unsorted_indices, t.unsorted_indices)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(to_np(a), to_np(b))


@pytest.mark.parametrize("trailing", [(), (2,), (2, 3)])
@pytest.mark.parametrize("lengths", [[5, 3, 3, 1], [2, 5, 1, 4], [4, 4, 4, 4]])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_pad_roundtrip(batch_first, lengths, trailing):
    b, steps = len(lengths), max(lengths) + 1
    x = rand(*((b, steps) if batch_first else (steps, b)), *trailing)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    sorted_ = lengths == sorted(lengths, reverse=True)
    for lens in (lengths, torch.tensor(lengths)):
        e_lens = ember.tensor(lengths) if isinstance(lens, torch.Tensor) else lens
        ep = ernn.pack_padded_sequence(ex, e_lens, batch_first, enforce_sorted=sorted_)
        tp = trnn.pack_padded_sequence(tx, lens, batch_first, enforce_sorted=sorted_)
        assert_packed_equal(ep, tp)
    for kwargs in ({}, {"padding_value": -2.5}, {"total_length": steps + 2}):
        e_pad, e_len = ernn.pad_packed_sequence(ep, batch_first, **kwargs)
        t_pad, t_len = trnn.pad_packed_sequence(tp, batch_first, **kwargs)
        np.testing.assert_array_equal(to_np(e_pad), to_np(t_pad))
        np.testing.assert_array_equal(to_np(e_len), to_np(t_len))
        assert e_len.dtype == ember.int64
    g = rand(*t_pad.shape, seed=1)
    (e_pad * ember.tensor(g)).sum().backward()
    (t_pad * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(to_np(ex.grad), to_np(tx.grad))


def test_docstring_example_and_enforce_sorted_false():
    seq = [[1, 2, 0], [3, 0, 0], [4, 5, 6]]
    ep = ernn.pack_padded_sequence(ember.tensor(seq), [2, 1, 3], batch_first=True,
                                   enforce_sorted=False)
    tp = trnn.pack_padded_sequence(torch.tensor(seq), [2, 1, 3], batch_first=True,
                                   enforce_sorted=False)
    assert_packed_equal(ep, tp)
    assert to_np(ep.data).tolist() == [4, 1, 3, 5, 2, 6]
    padded, lengths = ernn.pad_packed_sequence(ep, batch_first=True)
    assert to_np(padded).tolist() == seq and to_np(lengths).tolist() == [2, 1, 3]


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_value", [0.0, 7.0])
def test_pad_sequence(padding_side, batch_first, padding_value):
    arrays = [rand(n, 3, seed=n) for n in (2, 5, 1)]
    es = [ember.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    kw = dict(batch_first=batch_first, padding_value=padding_value, padding_side=padding_side)
    e, t = ernn.pad_sequence(es, **kw), trnn.pad_sequence(ts, **kw)
    np.testing.assert_array_equal(to_np(e), to_np(t))
    g = rand(*t.shape, seed=9)
    (e * ember.tensor(g)).sum().backward()
    (t * torch.tensor(g)).sum().backward()
    for a, b in zip(es, ts):
        np.testing.assert_array_equal(to_np(a.grad), to_np(b.grad))


def test_pad_sequence_dtypes_and_1d():
    e = ernn.pad_sequence([ember.tensor([1, 2]), ember.tensor([3.0])])
    t = trnn.pad_sequence([torch.tensor([1, 2]), torch.tensor([3.0])])
    assert e.dtype == ember.int64 and t.dtype == torch.int64
    np.testing.assert_array_equal(to_np(e), to_np(t))
    # a tensor is an iterable of its rows
    x = rand(3, 4)
    np.testing.assert_array_equal(to_np(ernn.pad_sequence(ember.tensor(x))),
                                  to_np(trnn.pad_sequence(torch.tensor(x))))


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_and_unpack_sequence(enforce_sorted):
    lens = (4, 2, 1) if enforce_sorted else (2, 4, 1)
    arrays = [rand(n, 2, seed=n) for n in lens]
    ep = ernn.pack_sequence([ember.tensor(a) for a in arrays], enforce_sorted=enforce_sorted)
    tp = trnn.pack_sequence([torch.tensor(a) for a in arrays], enforce_sorted=enforce_sorted)
    assert_packed_equal(ep, tp)
    for got, want in zip(ernn.unpack_sequence(ep), arrays):
        np.testing.assert_array_equal(to_np(got), want)
    assert len(ernn.unpack_sequence(ep)) == len(arrays)


@pytest.mark.parametrize("batch_first", [False, True])
def test_unpad_sequence(batch_first):
    arrays = [rand(n, 3, seed=n) for n in (3, 5, 2)]
    padded = rand(5, 3, 3) if not batch_first else rand(3, 5, 3)
    lengths = [3, 5, 2]
    e_p, t_p = ember.tensor(padded), torch.tensor(padded)
    e_out = ernn.unpad_sequence(e_p, ember.tensor(lengths), batch_first=batch_first)
    t_out = trnn.unpad_sequence(t_p, torch.tensor(lengths), batch_first=batch_first)
    assert len(e_out) == len(t_out) == 3
    for a, b in zip(e_out, t_out):
        np.testing.assert_array_equal(to_np(a), to_np(b))
    # PyTorch transposes a seq-first input in place; ember does too
    assert tuple(e_p.shape) == tuple(t_p.shape)
    seqs = [ember.tensor(a) for a in arrays]
    back = ernn.unpad_sequence(ernn.pad_sequence(seqs), ember.tensor([3, 5, 2]))
    for got, want in zip(back, arrays):
        np.testing.assert_array_equal(to_np(got), want)


def test_packed_sequence_methods():
    ep = ernn.pack_sequence([ember.tensor([1.0, 2.0]), ember.tensor([3.0])])
    d = ep.double()
    assert d.data.dtype == ember.float64 and isinstance(d, ernn.PackedSequence)
    assert ep.to(ember.float32) is ep
    assert ep.long().data.dtype == ember.int64
    assert ep.is_cuda is False
    data, batch_sizes, s, u = ep
    assert s is None and u is None and to_np(batch_sizes).tolist() == [2, 1]
    p2 = ernn.PackedSequence((data, batch_sizes))  # (data, batch_sizes) pair form
    np.testing.assert_array_equal(to_np(p2.data), to_np(data))
    perm = ember.tensor([2, 0, 1])
    assert to_np(ernn.invert_permutation(perm)).tolist() == [1, 2, 0]
    assert ernn.invert_permutation(None) is None


def outcome(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - comparing error types with torch's
        return exc
    return None


@pytest.mark.parametrize("case", [
    lambda lib, m: m.pack_padded_sequence(lib.ones(5, 3, 2), [5, 2, 3]),
    lambda lib, m: m.pack_padded_sequence(lib.ones(5, 3, 2), [5, 2]),
    lambda lib, m: m.pack_padded_sequence(lib.ones(5, 3, 2), [5, 2, 0]),
    lambda lib, m: m.pack_padded_sequence(lib.ones(5, 3, 2), [-1, 2, 1],
                                          enforce_sorted=False),
    lambda lib, m: m.pack_padded_sequence(lib.ones(5, 3, 2), lib.tensor([[5, 2, 1]])),
    lambda lib, m: m.pad_sequence([]),
    lambda lib, m: m.pad_sequence([lib.ones(2, 3), lib.ones(3, 4)]),
    lambda lib, m: m.pad_sequence([lib.ones(2, 3)], padding_side="top"),
    lambda lib, m: m.pad_sequence(3),
    lambda lib, m: m.pad_packed_sequence(m.pack_sequence([lib.ones(5), lib.ones(2)]),
                                         total_length=3),
])
def test_errors_match_torch(case):
    e_exc, t_exc = outcome(lambda: case(ember, ernn)), outcome(lambda: case(torch, trnn))
    assert t_exc is not None and e_exc is not None, (e_exc, t_exc)
    assert isinstance(e_exc, type(t_exc)), (e_exc, t_exc)
    assert isinstance(e_exc, ember.errors.EmberError)
    assert str(e_exc).startswith("[")
    if not str(t_exc).startswith("The size of tensor"):  # ember words the shape mismatch
        assert str(t_exc)[:45] in str(e_exc), (e_exc, t_exc)
