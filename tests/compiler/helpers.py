"""Shared test helpers for the compiler tests."""

from __future__ import annotations


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
