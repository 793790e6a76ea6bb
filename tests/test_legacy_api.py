"""Legacy API (issue 13): ``ember.FloatTensor`` and friends, ``Tensor.type()``, backend flags
on tensors, ``flip(dims=)``, and the error messages fixed with that issue; compared with
torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_TYPES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
          "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


def _same(e, t):
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


@pytest.mark.parametrize("name", _TYPES)
def test_legacy_constructors_like_torch(name):
    E, T = getattr(ember, name), getattr(torch, name)
    for args in [(2, 3), (), (ember.Size([2, 3]),), ([1, 0, 1],), ((1, 1),)]:
        targs = tuple(torch.Size(a) if isinstance(a, ember.Size) else a for a in args)
        e, t = E(*args), T(*targs)
        _same(e, t)
        if args and not isinstance(args[0], (int, ember.Size)):
            np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())
    assert isinstance(E([1]), E) and isinstance(T([1]), T)
    others = [n for n in _TYPES if n != name]
    assert not isinstance(E([1]), getattr(ember, others[0]))
    assert issubclass(E, ember.Tensor) == issubclass(T, torch.Tensor)
    assert E.__name__ == name


def test_legacy_constructor_errors_like_torch():
    with pytest.raises(TypeError, match=r"\[FloatTensor\] new\(\): data must be a sequence"):
        ember.FloatTensor(2.5)
    with pytest.raises(TypeError):
        torch.FloatTensor(2.5)
    with pytest.raises(TypeError, match="expected a tensor of dtype"):
        ember.FloatTensor(ember.ones(2, dtype=ember.float64))
    src = ember.ones(2)
    alias = ember.FloatTensor(src)
    alias[0] = 5.0  # PyTorch's legacy constructor shares the storage
    assert float(src[0]) == 5.0
    with pytest.raises(AssertionError):
        ember.FloatTensor(2, device="cuda")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64",
                                   "int32", "int16", "int8", "uint8", "bool"])
def test_tensor_type_string_like_torch(dtype):
    e = ember.zeros(2, dtype=getattr(ember, dtype))
    t = torch.zeros(2, dtype=getattr(torch, dtype))
    assert e.type() == t.type()
    assert ember.typename(e) == torch.typename(t)


def test_tensor_type_conversions_like_torch():
    e, t = ember.tensor([1.5, -2.5]), torch.tensor([1.5, -2.5])
    for spec_e, spec_t in [(ember.LongTensor, torch.LongTensor),
                           ("torch.LongTensor", "torch.LongTensor"),
                           (ember.float64, torch.float64), ("torch.IntTensor", "torch.IntTensor")]:
        a, b = e.type(spec_e), t.type(spec_t)
        _same(a, b)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert e.type(ember.FloatTensor) is e and t.type(torch.FloatTensor) is t
    for bad in ("foo", "torch.float64"):
        with pytest.raises(ValueError):
            t.type(bad)
        with pytest.raises(ValueError, match=r"\[type\] invalid type"):
            e.type(bad)
    m = ember.nn.Linear(2, 2).type(ember.DoubleTensor)
    assert m.weight.dtype is ember.float64
    assert torch.nn.Linear(2, 2).type(torch.DoubleTensor).weight.dtype is torch.float64


@pytest.mark.parametrize("flag", ["is_cuda", "is_xpu", "is_mps", "is_meta", "is_sparse",
                                  "is_quantized", "is_mkldnn", "is_nested", "is_cpu"])
def test_tensor_backend_flags_like_torch(flag):
    assert getattr(ember.ones(2), flag) is getattr(torch.ones(2), flag)


def test_flip_dims_keyword_like_torch():
    a = np.arange(6.0).reshape(2, 3)
    e, t = ember.tensor(a), torch.tensor(a)
    for call in ["x.flip(dims=(0,))", "x.flip(dims=[0, 1])", "x.flip(1)", "x.flip(0, 1)",
                 "M.flip(x, dims=[1])", "M.flip(x, [0])"]:
        got = eval(call, {"x": e, "M": ember}).numpy()
        want = eval(call, {"x": t, "M": torch}).numpy()
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError):
        e.flip(0, dims=(1,))


# ---------------------------------------------------------------------------------- messages
@pytest.mark.parametrize("data", [[[1, 2], [3]], [[[1, 2], [3, 4]], [[1, 2], [3]]],
                                  [[1, 2], 3], [1, [2, 3]]])
def test_ragged_nested_list_raises_torchs_type_and_message(data):
    with pytest.raises(Exception) as ti:
        torch.tensor(data)
    with pytest.raises(ti.type) as ei:
        ember.tensor(data)
    msg = str(ei.value)
    assert msg.startswith("[tensor] ") and "inhomogeneous" not in msg
    if ti.type is ValueError:  # PyTorch's own wording for a length mismatch
        assert str(ti.value) in msg


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_target_out_of_bounds_names_the_op(op):
    x, t = ember.zeros(2, 3), ember.tensor([7, 0])
    with pytest.raises(IndexError) as ti:
        getattr(torch.nn.functional, op)(torch.zeros(2, 3), torch.tensor([7, 0]))
    with pytest.raises(IndexError, match=rf"^\[{op}\] ") as ei:
        getattr(ember.nn.functional, op)(x, t)
    assert str(ti.value) in str(ei.value)


def test_reshape_errors_are_labelled_reshape():
    with pytest.raises(RuntimeError, match=r"^\[reshape\] shape '\[3\]' is invalid for input of "
                                           r"size 2$"):
        ember.ones(2).reshape(3)
    with pytest.raises(RuntimeError, match=r"^\[reshape\]"):
        ember.reshape(ember.ones(2, 3), (4, 2))
    with pytest.raises(RuntimeError, match=r"^\[view\]"):
        ember.ones(2, 3).view(7)
    with pytest.raises(RuntimeError, match="is invalid for input of size 2"):
        torch.ones(2).reshape(3)


def test_load_state_dict_raises_a_typed_error():
    m = ember.nn.Linear(2, 2)
    with pytest.raises(ember.EmberRuntimeError, match=r"^\[load_state_dict\] Error\(s\) in "
                                                      r"loading state_dict for Linear") as info:
        m.load_state_dict({"weight": ember.ones(3, 3)})
    assert isinstance(info.value, RuntimeError)
    assert 'Missing key(s) in state_dict: "bias"' in str(info.value)


def test_pinned_memory_like_torch():
    assert ember.ones(2).is_pinned() is torch.ones(2).is_pinned() is False
    with pytest.raises(RuntimeError):
        torch.ones(2).pin_memory()
    with pytest.raises(RuntimeError, match=r"\[pin_memory\]"):
        ember.ones(2).pin_memory()


@pytest.mark.filterwarnings("ignore:torch.set_default_tensor_type")
def test_set_default_tensor_type_like_torch():
    with pytest.warns(UserWarning, match="set_default_tensor_type.*deprecated"):
        ember.set_default_tensor_type(ember.FloatTensor)
    try:
        for mod in (ember, torch):
            mod.set_default_tensor_type(mod.DoubleTensor)
            assert str(mod.get_default_dtype()).endswith("float64")
            assert str(mod.ones(1).dtype).endswith("float64")
            mod.set_default_tensor_type("torch.FloatTensor")
            assert str(mod.get_default_dtype()).endswith("float32")
            for bad in (mod.LongTensor, "torch.cuda.FloatTensor", mod.cuda.FloatTensor):
                with pytest.raises(TypeError):
                    mod.set_default_tensor_type(bad)
    finally:
        ember.set_default_dtype(ember.float32)
        torch.set_default_dtype(torch.float32)


# ------------------------------------------------------------------ keyword names (as torch's)
_KEYWORD_CALLS = [
    'x.sum(dim=0, keepdim=True)',
    'x.mean(dim=1)',
    'x.std(dim=0, unbiased=False)',
    'x.var(dim=0, correction=0)',
    'x.max(dim=1)',
    'x.min(dim=0, keepdim=True)',
    'x.argmax(dim=1, keepdim=False)',
    'x.softmax(dim=-1)',
    'x.log_softmax(dim=-1)',
    'x.permute(dims=(1, 0))',
    'x.transpose(dim0=0, dim1=1)',
    'x.flatten(start_dim=0, end_dim=-1)',
    'x.unsqueeze(dim=0)',
    'x.squeeze(dim=0)',
    'x.split(split_size=2, dim=1)',
    'x.chunk(chunks=2, dim=1)',
    'x.narrow(dim=1, start=0, length=2)',
    'x.roll(shifts=1, dims=0)',
    'x.expand(size=(2, 3, 4))',
    'x.view(size=(4, 3))',
    'x.reshape(shape=(4, 3))',
    'x.clamp(min=0.0, max=5.0)',
    'x.norm(p=2, dim=1)',
    'x.topk(k=2, dim=1, largest=True, sorted=True)',
    'x.sort(dim=1, descending=True)',
    'x.argsort(dim=1, descending=True)',
    'x.cumsum(dim=0)',
    'x.masked_fill(mask=x > 3, value=0.0)',
    'x.index_select(dim=0, index=I)',
    'x.gather(dim=1, index=I2)',
    'x.to(dtype=M.float64)',
    'x.new_zeros(size=(2,))',
    'x.new_full(size=(2,), fill_value=3.0)',
    'x.type_as(other=x)',
    'x.diagonal(offset=0, dim1=0, dim2=1)',
    'x.tril(diagonal=0)',
    'x.matmul(other=x.t())',
    'x.add(other=x, alpha=2)',
    'x.sub(other=x, alpha=2)',
    'x.div(other=x + 1, rounding_mode="floor")',
    'x.pow(exponent=2)',
    'x.all(dim=0)',
    'x.any(dim=1)',
    'x.logsumexp(dim=1, keepdim=False)',
    'x.prod(dim=0)',
    'x.amax(dim=1)',
    'x.nan_to_num(nan=0.0)',
    'x.lerp(end=x, weight=0.5)',
    'x.where(condition=x > 2, other=x * 0)',
    'x.unflatten(dim=1, sizes=(2, 2))',
    'x.movedim(source=0, destination=1)',
    'x.unbind(dim=0)',
    'M.cat(tensors=[x, x], dim=0)',
    'M.stack(tensors=[x, x], dim=1)',
    'M.where(condition=x > 2, input=x, other=x * 0)',
    'M.flatten(input=x, start_dim=1)',
    'M.transpose(input=x, dim0=0, dim1=1)',
    'M.clamp(input=x, min=1.0)',
    'M.sum(input=x, dim=1)',
    'M.max(input=x, dim=1)',
    'M.zeros(size=(2, 3))',
    'M.full(size=(2,), fill_value=1.0)',
    'M.arange(start=0, end=5, step=2)',
    'M.linspace(start=0, end=1, steps=5)',
    'M.einsum("ij->ji", x)',
    'M.matmul(input=x, other=x.t())',
    'M.softmax(input=x, dim=1)',
    'M.argmax(input=x, dim=1)',
    'M.topk(input=x, k=2)',
    'M.split(tensor=x, split_size_or_sections=2, dim=1)',
    'M.chunk(input=x, chunks=2)',
    'M.gather(input=x, dim=1, index=I2)',
    'M.roll(input=x, shifts=1, dims=0)',
    'M.flip(input=x, dims=(0,))',
    'M.cumsum(input=x, dim=0)',
    'M.tensor(data=[1, 2])',
    'M.nn.functional.cross_entropy(input=x, target=I, reduction="sum")',
    'M.nn.functional.dropout(input=x, p=0.0, training=True)',
    'M.nn.functional.softmax(input=x, dim=1)',
    'M.nn.functional.pad(input=x, pad=(1, 1), mode="constant", value=0.0)',
    'M.nn.functional.linear(input=x, weight=x, bias=None)',
    'M.nn.functional.layer_norm(input=x, normalized_shape=(4,))',
    'M.nn.functional.gelu(input=x, approximate="tanh")',
    'M.nn.functional.relu(input=x, inplace=False)',
    'M.nn.functional.normalize(input=x, p=2.0, dim=1)',
    'M.nn.functional.embedding(input=I, weight=x)',
    'M.nn.functional.mse_loss(input=x, target=x, reduction="mean")',
]


def _outcome(mod, call):
    a = np.arange(12.0).reshape(3, 4).astype(np.float32)
    env = {"x": mod.tensor(a), "M": mod, "I": mod.tensor([0, 2, 1]),
           "I2": mod.tensor([[0], [1], [2]])}
    out = eval(call, env)
    items = out if isinstance(out, (tuple, list)) else [out]
    return [np.asarray(o.tolist()) if hasattr(o, "tolist") else o for o in items]


@pytest.mark.parametrize("call", _KEYWORD_CALLS)
def test_keyword_names_like_torch(call):
    want = _outcome(torch, call)
    got = _outcome(ember, call)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_size_given_twice_raises():
    with pytest.raises(TypeError, match=r"\[reshape\] got 'shape' both"):
        ember.ones(4).reshape(2, 2, shape=(4,))
    with pytest.raises(TypeError):
        torch.ones(4).reshape(2, 2, shape=(4,))
