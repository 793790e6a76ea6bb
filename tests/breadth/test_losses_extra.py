"""ember.nn.functional's extra losses and distances against torch.nn.functional."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from tests.breadth.helpers import compare

torch = pytest.importorskip("torch")
TF = torch.nn.functional
R = np.random.default_rng(0)
A, B, C = (R.standard_normal((4, 5)) for _ in range(3))
SIGN = np.array([1.0, -1.0, 1.0, -1.0])
SIGN45 = np.where(R.standard_normal((4, 5)) > 0, 1.0, -1.0)
POS = R.uniform(0.1, 3.0, (4, 5))
LABELS = (R.uniform(size=(4, 5)) > 0.5).astype(np.float64)
COUNTS = R.integers(0, 5, (4, 5)).astype(np.float64)
TARGET = np.array([0, 4, 2, 1])

CASES = {
    "margin_ranking_loss": ((A[:, 0], B[:, 0], SIGN), {"margin": 0.3}, (0, 1)),
    "hinge_embedding_loss": ((A, SIGN45), {"margin": 0.5}, (0,)),
    "soft_margin_loss": ((A, SIGN45), {}, (0,)),
    "cosine_embedding_loss": ((A, B, SIGN), {"margin": 0.1}, (0, 1)),
    "multilabel_soft_margin_loss": ((A, LABELS), {}, (0,)),
    "gaussian_nll_loss": ((A, B, POS), {}, (0, 1, 2)),
    "poisson_nll_loss": ((A, COUNTS), {}, (0,)),
    "triplet_margin_loss": ((A, B, C), {"swap": True}, (0, 1, 2)),
    "triplet_margin_with_distance_loss": ((A, B, C), {}, (0, 1, 2)),
    "multi_margin_loss": ((A, TARGET), {}, (0,)),
    "pairwise_distance": ((A, B), {}, (0, 1)),
    "pdist": ((A,), {}, (0,)),
    "log_sigmoid": ((A,), {}, (0,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_grads(name):
    args, kw, grad = CASES[name]
    tname = "logsigmoid" if name == "log_sigmoid" else name
    compare(getattr(EF, name), getattr(TF, tname), args, kw, grad=grad)


@pytest.mark.parametrize("reduction", ["none", "sum"])
@pytest.mark.parametrize("name", ["margin_ranking_loss", "hinge_embedding_loss",
                                  "soft_margin_loss", "cosine_embedding_loss",
                                  "multilabel_soft_margin_loss", "gaussian_nll_loss",
                                  "poisson_nll_loss", "triplet_margin_loss", "multi_margin_loss"])
def test_reductions(name, reduction):
    args, kw, _ = CASES[name]
    compare(getattr(EF, name), getattr(TF, name), args, {**kw, "reduction": reduction},
            dtypes=("float64",))


@pytest.mark.parametrize("kw", [{"p": 2}, {"margin": 0.5, "weight": np.arange(1.0, 6.0)}])
def test_multi_margin_options(kw):
    w = kw.get("weight")
    kwe = {**kw, "weight": ember.tensor(w)} if w is not None else kw
    kwt = {**kw, "weight": torch.tensor(w)} if w is not None else kw
    compare(lambda a, t: EF.multi_margin_loss(a, t, **kwe),
            lambda a, t: TF.multi_margin_loss(a, t, **kwt), (A, TARGET), dtypes=("float64",),
            grad=(0,))


def test_poisson_full_and_linear_input():
    compare(EF.poisson_nll_loss, TF.poisson_nll_loss, (POS, COUNTS),
            {"log_input": False, "full": True}, grad=(0,))


def test_gaussian_homoscedastic_and_full():
    compare(EF.gaussian_nll_loss, TF.gaussian_nll_loss, (A, B, POS[:, 0]), {"full": True},
            grad=(0, 2))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, 0.0, float("inf")])
def test_pdist_pairwise_p(p):
    compare(lambda x: EF.pdist(x, p), lambda x: TF.pdist(x, p), (A,))
    compare(lambda x, y: EF.pairwise_distance(x, y, p, keepdim=True),
            lambda x, y: TF.pairwise_distance(x, y, p, keepdim=True), (A, B))


def test_errors():
    a, b = ember.tensor(A), ember.tensor(B)
    with pytest.raises(RuntimeError, match="same dimension"):
        EF.margin_ranking_loss(a, b[0], ember.tensor(SIGN))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        EF.triplet_margin_loss(a, b, a, margin=0.0)
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        EF.multi_margin_loss(a, ember.tensor(TARGET), p=3)
    with pytest.raises(ValueError, match="var has negative"):
        EF.gaussian_nll_loss(a, b, -ember.tensor(POS))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        EF.gaussian_nll_loss(a, b, ember.tensor(POS[:2]))
    with pytest.raises(RuntimeError, match="pdist only supports 2D"):
        EF.pdist(a[0])
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        EF.soft_margin_loss(a, b, reduction="avg")
