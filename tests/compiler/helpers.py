"""Shared test helpers for the compiler tests."""

from __future__ import annotations

import ember.nn.functional as F


class Counting:
    """A custom backend that records the graphs it compiles (and their example inputs) and
    counts how often compiled graphs run."""

    def __init__(self):
        self.graphs = []
        self.examples = []
        self.runs = 0

    def __call__(self, graph, example_inputs):
        self.graphs.append(graph)
        self.examples.append(example_inputs)

        def run(*args):
            self.runs += 1
            return graph.forward(*args)
        return run

    @property
    def count(self):
        return len(self.graphs)


def lm_step(m, opt, x, y):
    """One training step of a model giving logits (MLP or char GPT): cross_entropy over all
    positions, backward, optimizer step, zero_grad; returns the loss."""
    out = m(x)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def run_c(fn, *args, dynamic=None):
    """``fn`` compiled whole with the C backend and run: (compiled result, eager result, the
    CompiledGraph it built)."""
    import ember
    from ember.compiler.c import backend as cbackend

    got = ember.compile(fn, backend="c", fullgraph=True, dynamic=dynamic)(*args)
    cg = cbackend.last_compiled()
    return got, fn(*args), cg
