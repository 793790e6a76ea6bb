"""Loop IR -> C source: one translation unit per graph (``unit.py``), with emitters per kernel
kind and the C templates under ``csrc/`` (read once, at import, with ``csrc``)."""

from __future__ import annotations

from pathlib import Path

CSRC = Path(__file__).with_name("csrc")


def csrc(name: str) -> str:
    """The text of the C file or template ``csrc/<name>``.

    >>> "ember_pack_a" in csrc("gemm_pack_a.h.in")
    True
    """
    return (CSRC / name).read_text()
