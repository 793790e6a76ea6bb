"""With dynamic sizes, the compiled exported program runs expand, split_with_sizes, basic
indexing, ``reshape_copy``, cat, embedding, attention (the char GPT whole), convolution and
max_pool as C kernels over
runtime sizes (no eager externs), and gives what the eager module gives at every size."""

import numpy as np
import pytest

import ember
import ember.demo
from ember.compiler.c import backend as cbackend
from ember.export import Dim, compile_program, export


class Expand(ember.nn.Module):
    def forward(self, x):
        return x[:, :1].expand(x.shape[0], 5) * 2 + x[1:, 1:].sum()


class Split(ember.nn.Module):
    def forward(self, x):
        a, b = x.split([2, 1], dim=1)
        c, d = x.split(x.shape[0] // 2, dim=0)
        return a * 2, b + 1, c - d


class ReshapeCopy(ember.nn.Module):
    def forward(self, x):
        return x.transpose(0, 1).reshape(-1) * 2


class Attention(ember.nn.Module):
    def forward(self, q, k, v):
        return ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) + 1


class QKV(ember.nn.Module):
    """A GPT block's attention shuffle: split of a fused projection, heads by view+transpose,
    attention, heads merged back with a reshape of the transposed result."""

    def __init__(self):
        super().__init__()
        self.qkv = ember.nn.Linear(8, 24)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(8, dim=2)
        q, k, v = (z.view(b, t, 2, 4).transpose(1, 2) for z in (q, k, v))
        y = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, t, c)


class Cat(ember.nn.Module):
    def forward(self, x, y):
        return ember.cat([x, y * 2], dim=0) + 1, ember.cat([x, x.unsqueeze(1).sum(1)], dim=1)


class Embed(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = ember.nn.Embedding(10, 6)

    def forward(self, idx):
        return self.emb(idx) * 2 + self.emb(idx.t()).sum()


class ConvPool(ember.nn.Module):
    """Strided, padded, grouped and dilated convolutions around a ceil-mode max_pool: every
    result size is a runtime expression of the input's."""

    def __init__(self):
        super().__init__()
        self.c1 = ember.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
        self.c2 = ember.nn.Conv2d(6, 4, (3, 2), dilation=(1, 2))

    def forward(self, x):
        h = ember.nn.functional.max_pool2d(self.c1(x), 3, stride=2, padding=1, ceil_mode=True)
        return self.c2(h.relu()) + 1


def _char_gpt():
    return ember.demo.CharGPT(65, block=64, d=96, layers=2, heads=4).eval()


CASES = {
    "expand": (Expand, lambda n: (ember.randn(n, 3),), {"x": {0: Dim.AUTO}}),
    "split": (Split, lambda n: (ember.randn(2 * n, 3),), {"x": {0: Dim.AUTO}}),
    "reshape_copy": (ReshapeCopy, lambda n: (ember.randn(n, 3),), {"x": {0: Dim.AUTO}}),
    "attention": (Attention, lambda n: tuple(ember.randn(2, 2, n, 8) for _ in range(3)),
                  {"q": {2: Dim.AUTO}, "k": {2: Dim.AUTO}, "v": {2: Dim.AUTO}}),
    "qkv": (QKV, lambda n: (ember.randn(2, n, 8),), {"x": {1: Dim.AUTO}}),
    "cat": (Cat, lambda n: (ember.randn(n, 3), ember.randn(n + 1, 3)),
            {"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}}),
    "embedding": (Embed, lambda n: (ember.randint(0, 10, (n, n + 2)),),
                  {"idx": {0: Dim.AUTO, 1: Dim.AUTO}}),
    "conv_pool": (ConvPool, lambda n: (ember.randn(n + 1, 4, n + 9, 2 * n + 8),),
                  {"x": {0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO}}),
    # the token lookup, the (T, T) causal mask broadcast over (B, heads) and the head views
    "char_gpt": (_char_gpt, lambda n: (ember.randint(0, 65, (n, n + 1)),),
                 {"idx": {0: Dim.AUTO, 1: Dim("t", max=64)}}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_dynamic_program_lowers_without_externs(name):
    cls, make, spec = CASES[name]
    ember.manual_seed(0)
    m = cls()
    ep = export(m, make(4), dynamic_shapes=spec)
    cp = compile_program(ep, backend="c")
    first = True
    with ember.no_grad():
        for n in (4, 7, 2, 13):
            args = make(n)
            got, want = cp(*args), m(*args)
            if first:
                assert cbackend.last_compiled().externs == []
                first = False
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    assert cp.graph.num_scalars >= 1  # one size-generic entry


def test_dynamic_embedding_index_out_of_range_raises_as_eager():
    """The gather's range check makes the entry fail and the graph rerun eagerly, which
    raises eager's error."""
    m = Embed()
    ep = export(m, (ember.randint(0, 10, (4, 6)),), dynamic_shapes=CASES["embedding"][2])
    cp = compile_program(ep, backend="c")
    bad = ember.randint(0, 10, (5, 7))
    bad[2, 3] = 10
    with ember.no_grad(), pytest.raises(IndexError):
        cp(bad)


def test_char_gpt_trains_through_the_exported_entry_without_externs(monkeypatch):
    """``ember.compile(ep.module())`` under autograd: forward and backward graphs (the token
    lookup's scatter-add, the position slice's backward at a runtime ``t``) lower to C at
    every size, and the gradients are eager's."""
    externs: list = []
    monkeypatch.setattr(cbackend, "warn_fallbacks", externs.extend)
    ember.manual_seed(0)
    m = ember.demo.CharGPT(65, block=64, d=32, layers=1, heads=2)
    ep = export(m, (ember.randint(0, 65, (4, 5)),), dynamic_shapes=CASES["char_gpt"][2])
    mod = ep.module()
    f = ember.compile(mod)
    for shape in ((3, 7), (6, 17)):
        x = ember.randint(0, 65, shape)
        mod.zero_grad()
        f(x).square().mean().backward()
        got = [p.grad.clone() for p in mod.parameters()]
        mod.zero_grad()
        mod(x).square().mean().backward()
        for g, p in zip(got, mod.parameters()):
            np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert externs == []
