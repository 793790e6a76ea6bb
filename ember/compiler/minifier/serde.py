"""A graph as Python source, and its inputs as safetensors bytes (what the minifier's
``minifier_launcher.py`` and ``repro.py`` hold, so they run without the user's program).

``graph_source(graph)`` writes a ``build_graph(...)`` call whose arguments are plain literals
plus four constructors (``dt`` a dtype by name, ``sym`` a lifted number, ``arr`` an array from
its bytes, ``inf``/``nan``); evaluating it after ``from ember.compiler.minifier.serde import *``
gives an equal ``Graph``.  Arrays travel as hex bytes, so every value (NaN payloads, bfloat16)
survives exactly.

>>> src = graph_source(g)                                   # doctest: +SKIP
>>> ns = {}; exec(PREAMBLE + "G = " + src, ns); ns["G"].ops() == g.ops()
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.frontend.graph import Graph, Node, Sym
from ember.dtypes import by_name
from ember.dtypes import dtype as DType
from ember.errors import EmberValueError
from ember.ops.registry import REGISTRY
from ember.serialization import _safetensors

inf = float("inf")
nan = float("nan")

PREAMBLE = "from ember.compiler.minifier.serde import arr, build_graph, dt, inf, nan, sym\n"
"""The import a file holding ``graph_source`` text needs."""


def dt(name: str) -> DType:
    """The ember dtype called ``name`` (``dt("float32")``)."""
    return by_name(name)


def sym(index: int, kind: str) -> Sym:
    """A lifted number of the graph (runtime scalar input ``index``)."""
    return Sym(index, kind)


def _np_dtype(name: str) -> np.dtype:
    try:
        return by_name(name).np
    except KeyError:
        return np.dtype(name)


def arr(data: str, dtype: str, shape: tuple) -> np.ndarray:
    """An array from the hex of its C-order bytes."""
    return np.frombuffer(bytes.fromhex(data), dtype=_np_dtype(dtype)).reshape(shape).copy()


def _dtype_name(d: np.dtype) -> str:
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        if d.name == name:
            return name
    return d.str if d.byteorder == ">" else d.name


def lit(v: Any) -> str:
    """Python source that evaluates (with ``PREAMBLE``) to ``v``; raises EmberValueError for
    a value it cannot write (a callable, an object of another type)."""
    t = type(v)
    if v is None or t in (bool, int, str, bytes):
        return repr(v)
    if t is float:
        return repr(v)  # inf, -inf and nan are names of PREAMBLE
    if t is complex:
        return f"complex({lit(v.real)}, {lit(v.imag)})"
    if t is tuple:
        items = [lit(x) for x in v]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if t is list:
        return "[" + ", ".join(lit(x) for x in v) + "]"
    if t is dict:
        return "{" + ", ".join(f"{lit(k)}: {lit(x)}" for k, x in v.items()) + "}"
    if t is slice:
        return f"slice({lit(v.start)}, {lit(v.stop)}, {lit(v.step)})"
    if v is Ellipsis:
        return "..."
    if isinstance(v, DType):
        return f"dt({v.name!r})"
    if t is Sym:
        return f"sym({v.index}, {v.kind!r})"
    if isinstance(v, np.ndarray):
        a = np.ascontiguousarray(v)
        return f"arr({a.tobytes().hex()!r}, {_dtype_name(a.dtype)!r}, {tuple(a.shape)!r})"
    if isinstance(v, np.generic):
        a = np.asarray(v)
        return f"arr({a.tobytes().hex()!r}, {_dtype_name(a.dtype)!r}, ())[()]"
    raise EmberValueError(f"[minifier] cannot write a graph value of type {t.__name__} "
                          f"({v!r:.80}) as source; expected numbers, strings, tuples, lists, "
                          f"dicts, dtypes, arrays")


def graph_source(graph: Graph, indent: str = "") -> str:
    """``graph`` as a ``build_graph(...)`` call (one node per line, its printed form after it)."""
    pad = indent + "    "
    lines = ["build_graph("]
    lines.append(f"{pad}inputs=[")
    for shape, d in graph.inputs:
        lines.append(f"{pad}    ({lit(tuple(shape))}, {lit(d)}),")
    lines.append(f"{pad}],")
    lines.append(f"{pad}nodes=[")
    for i, n in enumerate(graph.nodes):
        specs = tuple((tuple(s), d) for s, d in n.specs)
        lines.append(f"{pad}    ({n.op.name!r}, {lit(tuple(n.args))}, {lit(dict(n.params))}, "
                     f"{lit(specs)}),  # {i}")
    lines.append(f"{pad}],")
    lines.append(f"{pad}outputs={lit([tuple(o) for o in graph.outputs])},")
    lines.append(f"{pad}scalar_kinds={lit(tuple(graph.scalar_kinds))},")
    lines.append(f"{indent})")
    return "\n".join(lines)


def build_graph(inputs: list, nodes: list, outputs: list, scalar_kinds: tuple = ()) -> Graph:
    """The ``Graph`` that ``graph_source`` wrote; ops are looked up in the registry by name."""
    built = []
    for name, args, params, specs in nodes:
        op = REGISTRY.get(name)
        if op is None:
            raise EmberValueError(f"[minifier] op {name!r} is not registered in this process "
                                  f"(a custom op must be defined before the graph is built)")
        built.append(Node(op, tuple(args), dict(params), tuple(specs)))
    return Graph([(tuple(s), d) for s, d in inputs], built, [tuple(o) for o in outputs],
                 len(scalar_kinds), tuple(scalar_kinds))


def inputs_bytes(arrays: list) -> bytes:
    """The graph's input arrays as a safetensors file (``x0``, ``x1``, ...)."""
    return _safetensors.serialize({f"x{k}": np.asarray(a) for k, a in enumerate(arrays)})


def inputs_from_bytes(data: bytes, count: int) -> list:
    """The arrays ``inputs_bytes`` wrote, in order."""
    arrays, _ = _safetensors.deserialize(data)
    return [arrays[f"x{k}"] for k in range(count)]


__all__ = ["PREAMBLE", "arr", "build_graph", "dt", "graph_source", "inf", "inputs_bytes",
           "inputs_from_bytes", "lit", "nan", "sym"]
