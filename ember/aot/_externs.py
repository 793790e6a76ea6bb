"""Python custom ops in AOT packages (docs/aot.md, "Custom ops and kernel ops").

A custom op made with ``ember.library.custom_op`` runs Python: the C backend keeps it as an
*extern* step between two C entries.  A package may hold such a program: its model library's
``run`` calls each extern through a callback that the Python loader installs
(``ember_aot_set_extern_v1``, exported next to the model interface); the callback runs the op's
kernel, registered in the loading process under the same name, on the arguments' memory and
writes the results into buffers the library allocated.  The metadata records
``ember.python_ops`` (the ops' names: the C runner refuses such a package, and the Python
loader checks they are registered) and ``ember.externs`` (per extern: the op, its arguments
and parameters, the inputs' and outputs' dtypes and ranks).

Build side (this module): ``is_python_op``, ``output_shapes`` (each custom op's result sizes
as lifted runtime ints, so the library allocates its outputs before calling it),
``contiguous_inputs`` (every tensor argument a fresh C-contiguous buffer) and ``ExternPlan``
(the C of the calls, the metadata).  The run side is ``_pyops``.
"""

from __future__ import annotations

import json
import operator
from typing import Any

from ember.compiler.frontend.graph import Graph, Node, Sym
from ember.ops.registry import REGISTRY

EXTERN_CODE = 1_000_001  # run()'s code for a failed Python op (or no callback installed)

CALLBACK_C = r"""
/* ---- Python custom ops: the callback the Python loader installs (ember/aot/_externs.py) ---- */
typedef int (*ember_aot_extern_fn)(void *ctx, int32_t id, void *const *ins, void *const *outs,
                                   const int64_t *dims, const int64_t *ints);
static ember_aot_extern_fn ember_aot_extern_cb = NULL;
static void *ember_aot_extern_ctx = NULL;
EMBER_EXPORT void ember_aot_set_extern_v1(ember_aot_extern_fn fn, void *ctx) {
  ember_aot_extern_cb = fn;
  ember_aot_extern_ctx = ctx;
}
"""


def is_python_op(op: Any) -> bool:
    """True for the OpDef of a ``custom_op`` (a Python kernel)."""
    from ember.library._custom_op import CustomOpDef
    from ember.ops import PACKETS
    p = PACKETS.get(op.name.removesuffix(".default").replace(".", "::", 1))
    return isinstance(p, CustomOpDef) and p.opdef.name == op.name


def qualname(op: Any) -> str:
    """``ns::name`` of a custom op's OpDef name ``ns.name.default``."""
    return op.name.removesuffix(".default").replace(".", "::", 1)


def output_shapes(ep: Any, graph: Graph, exprs: list) -> list:
    """The result shapes of ``graph``'s custom-op nodes, in order, as ints and lifted
    ``Sym``s (``exprs`` grows with new size expressions); ``graph`` is
    ``to_compiler_graph(ep)``'s, one node per call of ``ep``'s graph."""
    from ember.aot._rewrite import _Lifter
    calls = [n for n in ep.graph.nodes
             if n.op == "call_function" and n.target is not operator.getitem]
    lift = _Lifter(exprs)
    out = []
    for c, n in zip(calls, graph.nodes):
        if is_python_op(n.op):
            vals = c.meta["val"]
            vals = vals if isinstance(vals, (tuple, list)) else (vals,)
            out.append([tuple(lift(d) for d in v.shape) for v in vals])
    return out


def contiguous_inputs(graph: Graph) -> Graph:
    """``graph`` with a ``clone(contiguous=True)`` in front of every tensor argument of a
    custom op that is a node's value (graph inputs are C-contiguous already)."""
    if not any(is_python_op(n.op) for n in graph.nodes):
        return graph
    nodes: list = []
    remap: dict = {}

    def ref_of(a: Any) -> Any:
        return remap.get(a, a) if type(a) is tuple and a and a[0] in ("i", "n") else a

    for i, n in enumerate(graph.nodes):
        args = tuple(ref_of(a) for a in n.args)
        if is_python_op(n.op):
            fixed = []
            for a, orig in zip(args, n.args):
                if type(a) is tuple and a and a[0] == "n":
                    spec = graph.nodes[orig[1]].specs[orig[2]]
                    nodes.append(Node(REGISTRY["clone"], (a,), {"contiguous": True}, (spec,)))
                    a = ("n", len(nodes) - 1, 0)
                fixed.append(a)
            args = tuple(fixed)
        for j in range(len(n.specs)):
            remap[("n", i, j)] = ("n", len(nodes), j)
        nodes.append(Node(n.op, args, n.params, n.specs))
    out = Graph(graph.inputs, nodes, [ref_of(o) for o in graph.outputs], graph.num_scalars,
                graph.scalar_kinds)
    if hasattr(graph, "lifted"):
        out.lifted = graph.lifted  # type: ignore[attr-defined]
    return out


# ------------------------------------------------------------------------ values in JSON
def encode(x: Any) -> Any:
    """A custom op's argument or parameter as JSON (runtime ints as ``{"sym": k}``)."""
    from ember.export.serde import _enc
    if type(x) is Sym:
        return {"sym": x.index}
    if isinstance(x, (tuple, list)):
        return {"tuple" if isinstance(x, tuple) else "list": [encode(v) for v in x]}
    if isinstance(x, dict):
        return {"dict": [[k, encode(v)] for k, v in x.items()]}
    return _enc(x)


class ExternPlan:
    """The externs of a lowered program: how ``run`` calls them and what the metadata says.
    ``shapes``: per extern node index, its outputs' shapes (ints / ``Sym``s)."""

    def __init__(self, program: Any, sources: dict, shapes: dict, n_exprs: int) -> None:
        self.program, self.sources = program, sources
        self.steps = program.externs()
        self.specs: list = []
        self.extra: dict = {}  # extern runtime size name -> C text over the bound ints
        for st in self.steps:
            self.specs.append(self._spec(st))
            outs = shapes[st.index]
            for j, b in enumerate(st.outs):
                for d, name in enumerate(b.shape):
                    if type(name) is str:
                        v = outs[j][d]
                        self.extra[name] = f"ints_in[{v.index}]" if type(v) is Sym else str(v)
        self.n_exprs = n_exprs

    def _buffer(self, r: tuple) -> Any:
        from ember.aot._codegen import ModelSourceError
        src = self.sources[r]
        if src[0] == "in":
            return self.program.inputs[src[1]]
        if src[0] != "buf" or src[1].strides is not None:
            raise ModelSourceError(f"[aoti_compile_and_package] a custom op's argument is not a "
                                   f"C-contiguous buffer ({src[0]}); please report this graph")
        return src[1]

    def _spec(self, st: Any) -> dict:
        """Extern step ``st``'s metadata; sets ``st.ins`` (its tensor arguments' refs)."""
        n = st.node
        ins, args = [], []
        for a in n.args:
            if type(a) is tuple and a and a[0] in ("i", "n"):
                args.append(["t", len(ins)])
                ins.append(a)
            else:
                args.append(["v", self._enc(n, a)])
        st.ins = ins
        bufs = [self._buffer(a) for a in ins]
        return {"op": n.op.name, "qualname": qualname(n.op), "args": args,
                "params": self._enc(n, dict(n.params)),
                "ins": [[b.dtype.name, len(b.shape)] for b in bufs],
                "outs": [[b.dtype.name, len(b.shape)] for b in st.outs]}

    @staticmethod
    def _enc(n: Any, v: Any) -> Any:
        from ember.aot._codegen import ModelSourceError
        try:
            return encode(v)
        except Exception as e:  # noqa: BLE001 - any unserializable value: name the op
            raise ModelSourceError(f"[aoti_compile_and_package] custom op {qualname(n.op)}: "
                                   f"cannot record its arguments ({e})") from None

    def python_ops(self) -> list:
        return sorted({s["qualname"] for s in self.specs})

    def metadata(self) -> dict:
        if not self.steps:
            return {}
        return {"ember.python_ops": json.dumps(self.python_ops()),
                "ember.externs": json.dumps(self.specs)}

    def call(self, k: int, in_ptrs: list, in_shapes: list, out_ptrs: list) -> list:
        """C lines calling extern ``k`` (inputs' and outputs' data pointers and shapes)."""
        st = self.steps[k]
        dims = [f"(int64_t)({d})" for shp in in_shapes for d in shp]
        dims += [f"(int64_t)({d})" for b in st.outs for d in b.shape]
        return [f"  {{ void *in_[] = {{{', '.join(in_ptrs) or 'NULL'}}};",
                f"    void *out_[] = {{{', '.join(out_ptrs) or 'NULL'}}};",
                f"    const int64_t dims_[] = {{{', '.join(dims) or '0'}}};",
                f"    if (ember_aot_extern_cb == NULL || ember_aot_extern_cb("
                f"ember_aot_extern_ctx, {k}, in_, out_, dims_, ints) != 0) "
                f"{{ rc = {EXTERN_CODE}; goto done; }} }}"]


__all__ = ["CALLBACK_C", "EXTERN_CODE", "ExternPlan", "contiguous_inputs", "encode",
           "is_python_op", "output_shapes", "qualname"]
