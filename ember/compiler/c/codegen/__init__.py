"""Loop IR -> C source: one translation unit per graph (``unit.py``), with emitters per kernel
kind and the C templates under ``csrc/``."""
