"""Graph convolutional network, in the style of Kipf's pygcn (``layers.py``, ``models.py``,
``train.py``) as used by pytorch/examples' ``gcn``.

Exercises: a ``GraphConvolution`` layer whose parameters are made with the legacy
``torch.FloatTensor(in, out)`` constructor and ``reset_parameters`` via ``.data.uniform_``,
a symmetric-normalized sparse adjacency built as ``torch.sparse.FloatTensor(indices, values,
shape)`` / ``torch.sparse_coo_tensor``, ``torch.spmm`` and ``torch.sparse.mm`` in forward and
backward, log_softmax + nll_loss on index subsets, Adam with ``weight_decay``, and the
``accuracy`` helper (``output.max(1)[1].type_as(labels)``). Dropout is 0 while training.
"""
# ruff: noqa: UP008, UP045  (written the way the public examples are)

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter

from tests.corpus._common import init_from_numpy


class GraphConvolution(nn.Module):
    """Simple GCN layer, similar to https://arxiv.org/abs/1609.02907"""

    def __init__(self, in_features, out_features, bias=True):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        if bias:
            self.bias = Parameter(torch.FloatTensor(out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        if self.bias is not None:
            return output + self.bias
        return output

    def __repr__(self):
        return (self.__class__.__name__ + " (" + str(self.in_features) + " -> "
                + str(self.out_features) + ")")


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super(GCN, self).__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def normalized_adjacency(n, seed):
    """D^-1/2 (A + I) D^-1/2 of a random undirected graph, as COO arrays."""
    rng = np.random.default_rng(seed)
    a = (rng.uniform(size=(n, n)) < 0.15).astype(np.float32)
    a = np.maximum(a, a.T)
    np.fill_diagonal(a, 1.0)
    d_inv_sqrt = 1.0 / np.sqrt(a.sum(1))
    a = a * d_inv_sqrt[:, None] * d_inv_sqrt[None, :]
    row, col = np.nonzero(a)
    return row, col, a[row, col].astype(np.float32)


def sparse_mx_to_torch_sparse_tensor(row, col, data, n):
    indices = torch.from_numpy(np.vstack((row, col)).astype(np.int64))
    values = torch.from_numpy(data)
    shape = torch.Size((n, n))
    return torch.sparse.FloatTensor(indices, values, shape)


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)


def run(torch, steps=8, compile=False):
    n, nfeat, nclass = 40, 12, 3
    rng = np.random.default_rng(11)
    features = torch.from_numpy(rng.standard_normal((n, nfeat)).astype(np.float32))
    labels = torch.LongTensor(rng.integers(0, nclass, size=n).tolist())
    adj = sparse_mx_to_torch_sparse_tensor(*normalized_adjacency(n, 11), n)
    adj2 = torch.sparse_coo_tensor(adj._indices(), adj._values(), (n, n)).coalesce()
    features = 0.5 * (features + torch.sparse.mm(adj2, features))  # one smoothing hop
    idx_train = torch.LongTensor(range(0, 24))
    idx_val = torch.LongTensor(range(24, 40))

    model = init_from_numpy(GCN(nfeat=nfeat, nhid=16, nclass=nclass, dropout=0.0), seed=11)
    step_model = torch.compile(model) if compile else model
    optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []
    for epoch in range(steps):
        model.train()
        optimizer.zero_grad()
        output = step_model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        losses += [loss_train.item(), acc_train.item()]
    model.eval()
    with torch.no_grad():
        output = model(features, adj)
        losses.append(F.nll_loss(output[idx_val], labels[idx_val]).item())
    return losses
