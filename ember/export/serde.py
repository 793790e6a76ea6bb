"""``ember.export.save`` / ``load``: an exported program as a versioned zip archive.

Layout (docs/export.md): ``version`` (``"1.2"``: major.minor), ``model.json`` (the graph, its
signature, symbols, range constraints, guards and the input/output structure, as plain JSON),
``weights.safetensors`` (parameters, buffers and constants), ``example_inputs.safetensors``,
and ``extra_files/<name>``.  Loading parses JSON and safetensors only and looks ops up in the
registry by name: nothing in a file is executed.  A file with a newer *major* version is
refused; a newer minor version (additions only) loads.

Example::

    >>> ember.export.save(ep, "model.ep.zip", extra_files={"note.txt": "v2"})
    >>> extra = {"note.txt": ""}
    >>> ep2 = ember.export.load("model.ep.zip", extra_files=extra)
"""

from __future__ import annotations

import io
import json
import math
import operator
import os
import re
import zipfile
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.export._cond import SubGraph
from ember.export._functions import FUNCTIONS
from ember.export._inputs import leaves, unflatten
from ember.export._runtime import InputGuards
from ember.export._symfloat import SymFloat
from ember.export.exported_program import ExportedProgram
from ember.export.graph import Graph, Node
from ember.export.graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    ModuleCallEntry,
    ModuleCallSignature,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from ember.nn.parameter import Parameter
from ember.ops.registry import REGISTRY
from ember.serialization import _torch_writer as _tw
from ember.serialization import _zipcheck as _zc
from ember.serialization import safetensors as _st
from ember.serialization._errors import SerializationError
from ember.serialization._safetensors import unique_keys as _st_unique_keys
from ember.sym import FakeTensor, ShapeEnv, SymBool, SymInt, ValueRange, _sympy

FORMAT = "ember.export"
VERSION = (1, 2)  # 1.1: item/cond/assert nodes, nn_module_stack; 1.2: module_call_graph
_MEMBERS = ("version", "model.json", "weights.safetensors", "example_inputs.safetensors")


def _err(msg: str) -> SerializationError:
    return SerializationError(f"[export.load] {msg}")


# --------------------------------------------------------------------------- expressions
_REL = ("Equality", "Unequality", "StrictLessThan", "LessThan", "StrictGreaterThan",
        "GreaterThan")


def _enc_expr(e: Any) -> Any:
    sp = _sympy()
    from ember.sym import _FloorDiv
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        return {"sym": e.name}
    kind = type(e).__name__
    if e.is_Add:
        kind = "Add"
    elif e.is_Mul:
        kind = "Mul"
    elif e.is_Pow:
        kind = "Pow"
    elif isinstance(e, _FloorDiv):
        kind = "FloorDiv"
    elif not (isinstance(e, (sp.Mod, sp.Max, sp.Min)) or kind in _REL):
        raise SerializationError(f"[export.save] cannot serialize the expression {e}")
    return {"fn": kind, "args": [_enc_expr(a) for a in e.args]}


def _dec_expr(j: Any, syms: dict) -> Any:
    sp = _sympy()
    from ember.sym import _FloorDiv
    if type(j) is int:
        return sp.Integer(j)
    if not isinstance(j, dict):
        raise _err(f"malformed expression {j!r}")
    if "sym" in j:
        s = syms.get(j["sym"])
        if s is None:
            raise _err(f"expression uses the unknown symbol {j['sym']!r}")
        return s
    fns = {"Add": sp.Add, "Mul": sp.Mul, "Pow": sp.Pow, "FloorDiv": _FloorDiv, "Mod": sp.Mod,
           "Max": sp.Max, "Min": sp.Min, "Equality": sp.Eq, "Unequality": sp.Ne,
           "StrictLessThan": sp.Lt, "LessThan": sp.Le, "StrictGreaterThan": sp.Gt,
           "GreaterThan": sp.Ge}
    fn = fns.get(j.get("fn"))
    args = j.get("args")
    if fn is None or not isinstance(args, list):
        raise _err(f"malformed expression {j!r}")
    return fn(*[_dec_expr(a, syms) for a in args])


# --------------------------------------------------------------------------- values
def _enc(x: Any) -> Any:
    if x is None or type(x) in (bool, str, int):
        return x
    if type(x) is float:
        return x if math.isfinite(x) else {"float": repr(x)}
    if isinstance(x, Node):
        return {"node": x.name}
    if isinstance(x, SymInt):
        return {"symint": _enc_expr(x.expr)}
    if isinstance(x, SymBool):
        return {"symbool": _enc_expr(x.rel)}
    if isinstance(x, SubGraph):
        return {"subgraph": {"name": x.name, "inputs": list(x.inputs),
                             "nodes": _enc_nodes(x.graph)}}
    if isinstance(x, _dt.dtype):
        return {"dtype": x.name}
    if isinstance(x, tuple):
        return {"tuple": [_enc(v) for v in x]}
    if isinstance(x, list):
        return {"list": [_enc(v) for v in x]}
    if isinstance(x, dict):
        return {"dict": [[k, _enc(v)] for k, v in x.items()]}
    if isinstance(x, (np.integer, np.floating, np.bool_)):
        return {"np": str(x.dtype), "value": _enc(x.item())}
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
        return {"ndarray": str(x.dtype), "shape": list(x.shape), "data": x.ravel().tolist()}
    raise SerializationError(f"[export.save] cannot serialize a {type(x).__name__} ({x!r}) "
                             "in the graph")


def _dec(j: Any, ctx: dict) -> Any:
    if j is None or type(j) in (bool, str, int, float):
        return j
    if isinstance(j, dict) and len(j) >= 1:
        if "node" in j:
            n = ctx["nodes"].get(j["node"])
            if n is None:
                raise _err(f"a node uses {j['node']!r}, which is not an earlier node")
            return n
        if "symint" in j:
            e = _dec_expr(j["symint"], ctx["syms"])
            return int(e) if e.is_Integer else SymInt(e, ctx["env"])
        if "symbool" in j:
            return SymBool(_dec_expr(j["symbool"], ctx["syms"]), ctx["env"])
        if "subgraph" in j:
            return _dec_subgraph(j["subgraph"], ctx)
        if "float" in j and j["float"] in ("inf", "-inf", "nan"):
            return float(j["float"])
        if "dtype" in j:
            return _dtype(j["dtype"])
        for k, t in (("tuple", tuple), ("list", list)):
            if k in j and isinstance(j[k], list):
                return t(_dec(v, ctx) for v in j[k])
        if "dict" in j and isinstance(j["dict"], list):
            return {k: _dec(v, ctx) for k, v in j["dict"]}
        if "np" in j and j["np"] in _NP_OK:
            return np.dtype(j["np"]).type(_dec(j["value"], ctx))
        if "ndarray" in j and j["ndarray"] in _NP_OK:
            return np.asarray(j["data"], dtype=j["ndarray"]).reshape(j["shape"])
    raise _err(f"malformed value {j!r}")


_NP_OK = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"}


def _dtype(name: Any) -> Any:
    d = getattr(_dt, name, None) if isinstance(name, str) else None
    if not isinstance(d, _dt.dtype):
        raise _err(f"unknown dtype {name!r}")
    return d


def _enc_struct(s: Any) -> Any:
    if s == "T":
        return "T"
    kind, body = s
    if kind == "const":
        return {"const": _enc(body)}
    if kind == "dict":
        return {"dict": [[k, _enc_struct(v)] for k, v in body]}
    return {kind: [_enc_struct(v) for v in body]}


def _dec_struct(j: Any) -> Any:
    if j == "T":
        return "T"
    if isinstance(j, dict) and len(j) == 1:
        (kind, body), = j.items()
        if kind == "const":
            return ("const", _dec(body, {"nodes": {}, "syms": {}, "env": None}))
        if kind == "dict" and isinstance(body, list):
            return ("dict", tuple((k, _dec_struct(v)) for k, v in body))
        if kind in ("tuple", "list") and isinstance(body, list):
            return (kind, tuple(_dec_struct(v) for v in body))
    raise _err(f"malformed input/output structure {j!r}")


def _enc_val(v: Any) -> Any:
    if isinstance(v, FakeTensor):
        return {"shape": [_enc(s) for s in v.shape], "dtype": v.dtype.name}
    if isinstance(v, tuple):
        return {"tuple": [_enc_val(x) for x in v]}
    if isinstance(v, SymInt):  # an item node's unbacked value
        return {"symval": _enc(v)}
    if isinstance(v, SymFloat):  # a float only known at run time (zuf0, or arithmetic on it)
        return {"symfloat": None if v.expr is None else v.expr.name}
    return None


def _dec_val(j: Any, ctx: dict) -> Any:
    if j is None:
        return None
    if "tuple" in j:
        return tuple(_dec_val(x, ctx) for x in j["tuple"])
    if "symval" in j:
        return _dec(j["symval"], ctx)
    if "symfloat" in j:
        return j  # made a SymFloat of its node by _build_node
    return FakeTensor(tuple(_dec(s, ctx) for s in j["shape"]), _dtype(j["dtype"]))


# --------------------------------------------------------------------------- save
def _enc_nodes(graph: Graph) -> list:
    nodes = []
    for n in graph.nodes:
        target = "operator.getitem" if n.target is operator.getitem else \
            repr(n.target) if getattr(n.target, "kind", None) == "export_function" else \
            n.target.name if hasattr(n.target, "kind") else n.target
        j = {"op": n.op, "name": n.name, "target": target, "args": _enc(n.args),
             "kwargs": _enc(n.kwargs), "val": _enc_val(n.meta.get("val")),
             "stack_trace": n.meta.get("stack_trace")}
        if n.meta.get("nn_module_stack"):  # optional (1.1): for unflatten
            j["nn_module_stack"] = [list(e) for e in n.meta["nn_module_stack"]]
            j["module_call_ids"] = list(n.meta.get("module_call_ids", ()))
        nodes.append(j)
    return nodes


def _dec_subgraph(j: Any, ctx: dict) -> SubGraph:
    """A ``cond`` branch: its nodes are decoded into a graph of their own."""
    if not (isinstance(j, dict) and isinstance(j.get("name"), str)
            and isinstance(j.get("nodes"), list) and isinstance(j.get("inputs"), list)
            and all(x is None or isinstance(x, str) for x in j["inputs"])):
        raise _err("malformed cond subgraph")
    sub = {**ctx, "nodes": {}}
    graph = Graph()
    for nj in j["nodes"]:
        if not isinstance(nj, dict):
            raise _err("malformed cond subgraph node")
        node = _build_node(graph, nj, sub)
        sub["nodes"][node.name] = node
    graph.lint()
    return SubGraph(j["name"], graph, list(j["inputs"]))


def _model_json(ep: ExportedProgram) -> dict:
    env = ep.shape_env
    syms = set()
    for n in ep.graph.nodes:
        v = n.meta.get("val")
        for ft in (v if isinstance(v, tuple) else (v,)):
            if isinstance(ft, FakeTensor):
                for s in ft.shape:
                    if isinstance(s, SymInt):
                        syms |= s.expr.free_symbols
    for e in ep.range_constraints:
        syms |= e.free_symbols
    symbols = []
    for s in sorted(syms, key=lambda s: (s.name.rstrip("0123456789"),
                                         int(s.name.lstrip("sufz")))):
        vr = env.var_to_range.get(s, ValueRange(-math.inf, math.inf)) if env else \
            ValueRange(-math.inf, math.inf)
        symbols.append({"name": s.name, "hint": env.var_to_val.get(s) if env else None,
                        "lower": _enc(float(vr.lower)) if vr.lower == -math.inf
                        else int(vr.lower),
                        "upper": None if vr.upper == math.inf else int(vr.upper),
                        "source": env.var_to_source.get(s, s.name) if env else s.name})
    nodes = _enc_nodes(ep.graph)
    sig = ep.graph_signature
    g = ep._guards
    return {
        "format": FORMAT, "version": list(VERSION), "dialect": ep.dialect,
        "symbols": symbols, "nodes": nodes,
        "inputs": [{"kind": s.kind.name, "name": s.arg.name, "target": s.target,
                    "persistent": s.persistent} for s in sig.input_specs],
        "outputs": [{"kind": s.kind.name, "name": s.arg.name, "target": s.target}
                    for s in sig.output_specs],
        "range_constraints": [[_enc_expr(e), _enc(float(vr.lower)) if vr.lower == -math.inf
                               else int(vr.lower), None if vr.upper == math.inf
                               else int(vr.upper)] for e, vr in ep.range_constraints.items()],
        "guard_dims": [[src, [_enc_expr(e) for e in exprs]] for src, exprs in g.dims],
        "guards": [_enc_expr(e) for e in g.guards],
        "in_names": list(ep._in_spec[0]),
        "in_structs": [[k, _enc_struct(s)] for k, s in ep._in_spec[1].items()],
        "out_spec": _enc_struct(ep._out_spec),
        "params_requires_grad": {k: bool(v.requires_grad) for k, v in ep.state_dict.items()},
        "example_structs": _example_structs(ep),
        "module_call_graph": [[e.fqn, _enc_signature(e.signature)]
                              for e in ep.module_call_graph if e.fqn],
    }


def _enc_signature(sig: Any) -> Any:
    if sig is None:
        return None
    return {"inputs": [{"tensor": a.name} if isinstance(a, TensorArgument)
                       else {"const": _enc(a.value)} for a in sig.inputs],
            "outputs": [a.name for a in sig.outputs],
            "in_spec": _enc_struct(sig.in_spec), "out_spec": _enc_struct(sig.out_spec)}


def _dec_call_graph(model: dict, in_spec: tuple, out_spec: Any, ctx: dict) -> list:
    """``module_call_graph`` (optional, 1.2): the root entry rebuilt from the input structure,
    then each submodule's entry."""
    out = [ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec,
                                                   list(in_spec[0])))]
    for fqn, j in model.get("module_call_graph", []):
        sig = None
        if j is not None:
            try:
                ins = [TensorArgument(a["tensor"]) if "tensor" in a
                       else ConstantArgument("", _dec(a["const"], ctx)) for a in j["inputs"]]
                sig = ModuleCallSignature(ins, [TensorArgument(n) for n in j["outputs"]],
                                          _dec_struct(j["in_spec"]), _dec_struct(j["out_spec"]))
            except (KeyError, TypeError) as e:
                raise _err(f"malformed module_call_graph entry for {fqn!r}: {e}") from None
            for a in ins + sig.outputs:
                if isinstance(a, TensorArgument) and a.name not in ctx["nodes"]:
                    raise _err(f"module_call_graph entry {fqn!r} names node {a.name!r}, which "
                               "is not in the graph")
        out.append(ModuleCallEntry(str(fqn), sig))
    return out


def _example_structs(ep: ExportedProgram) -> Any:
    from ember.export._inputs import structure
    args, kwargs = ep.example_inputs
    return {"args": _enc_struct(structure(tuple(args))),
            "kwargs": _enc_struct(structure(dict(kwargs)))}


def save(ep: ExportedProgram, f: Any, *, extra_files: dict | None = None,
         opset_version: dict | None = None, pickle_protocol: int = 2) -> None:
    """Write ``ep`` to ``f`` (a path or a binary file object) as a versioned zip archive.

    Example::

        >>> buf = io.BytesIO(); ember.export.save(ep, buf); buf.seek(0)
        >>> ep2 = ember.export.load(buf)
    """
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"The 'ep' parameter must be an instance of 'ExportedProgram', got "
                        f"'{type(ep).__name__}' instead.")
    model = json.dumps(_model_json(ep), indent=1).encode()
    weights = {f"state/{k}": v.detach() for k, v in ep.state_dict.items()}
    weights.update({f"constants/{k}": v.detach() for k, v in ep.constants.items()})
    args, kwargs = ep.example_inputs
    ex = leaves(tuple(args)) + leaves(dict(kwargs))
    examples = {str(i): t.detach() for i, t in enumerate(ex)}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("version", f"{VERSION[0]}.{VERSION[1]}")
        zf.writestr("model.json", model)
        zf.writestr("weights.safetensors", _st.save(weights))
        zf.writestr("example_inputs.safetensors", _st.save(examples))
        for name, content in (extra_files or {}).items():
            data = content.encode() if isinstance(content, str) else bytes(content)
            zf.writestr(f"extra_files/{name}", data)
    if isinstance(f, (str, os.PathLike)):
        with _tw.atomic_open(f) as fh:
            fh.write(buf.getvalue())
    else:
        f.write(buf.getvalue())


# --------------------------------------------------------------------------- load
def _read_archive(f: Any) -> zipfile.ZipFile:
    try:
        if isinstance(f, (str, os.PathLike)):
            with open(f, "rb") as fh:
                data = fh.read()
        else:
            data = f.read()
    except OSError:
        raise
    if not isinstance(data, (bytes, bytearray)):
        raise _err(f"expected a path or a binary file object, got {type(f).__name__}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        _zc.check_archive(zf, "export.load")
        _check_sizes(zf)
        bad = zf.testzip()
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError) as e:
        raise _err(f"not an ember export archive, or truncated/corrupted ({e})") from None
    if bad is not None:
        raise _err(f"the archive member {bad!r} is corrupted (CRC mismatch)")

    names = set(zf.namelist())
    missing = [m for m in _MEMBERS if m not in names]
    if missing:
        raise _err(f"the archive lacks {missing}: not an ember export archive, or truncated")
    return zf


def _check_sizes(zf: zipfile.ZipFile) -> None:
    """``save`` stores members uncompressed: refuse a member that would expand far beyond its
    stored size (a zip bomb) before anything is decompressed."""
    for info in zf.infolist():
        if info.file_size > max(1 << 20, 100 * info.compress_size):
            raise _err(f"the archive member {info.filename!r} expands {info.compress_size} "
                       f"bytes into {info.file_size}: not written by ember.export.save")


def _check_version(zf: zipfile.ZipFile) -> None:
    text = _zc.read_entry(zf, "version", "export.load").decode("utf-8", "replace").strip()
    if not re.fullmatch(r"[0-9]{1,6}\.[0-9]{1,6}", text):
        raise _err(f"entry 'version': malformed or unknown format version {text[:40]!r} "
                   f"(this ember reads {VERSION[0]}.x)")
    major, minor = (int(p) for p in text.split("."))
    if major != VERSION[0]:
        raise _err(f"the archive has format version {text}; this ember reads version "
                   f"{VERSION[0]}.x (saved by {'a newer' if major > VERSION[0] else 'an older'} "
                   "ember)")


def load(f: Any, *, extra_files: dict | None = None,
         expected_opset_version: dict | None = None) -> ExportedProgram:
    """Read an ``ExportedProgram`` written by ``save``; ``extra_files`` (a dict whose keys name
    the files to read) receives their contents as strings.  Runs no code from the file."""
    zf = _read_archive(f)
    _check_version(zf)
    try:
        model = json.loads(_zc.read_entry(zf, "model.json", "export.load").decode("utf-8"),
                           object_pairs_hook=_st_unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _err(f"model.json is not valid JSON ({e})") from None
    if not isinstance(model, dict) or model.get("format") != FORMAT:
        raise _err("model.json is not an ember export model")
    weights = _st.load(_zc.read_entry(zf, "weights.safetensors", "export.load", False))
    examples = _st.load(_zc.read_entry(zf, "example_inputs.safetensors", "export.load", False))
    if extra_files is not None:
        for name in list(extra_files):
            member = f"extra_files/{name}"
            extra_files[name] = (_zc.read_entry(zf, member, "export.load").decode()
                                 if member in zf.NameToInfo else "")
    try:
        return _build(model, weights, examples)
    except SerializationError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError,
            AssertionError, OverflowError) as e:
        raise _err(f"model.json is malformed ({type(e).__name__}: {e})") from None


def _build(model: dict, weights: dict, examples: dict) -> ExportedProgram:
    env = ShapeEnv()
    syms: dict = {}
    for s in model["symbols"]:
        name = s["name"]
        if not (isinstance(name, str) and (name[:1] in "su" and name[1:].isdigit()
                                           or name[:3] == "zuf" and name[3:].isdigit())):
            raise _err(f"malformed symbol name {name!r}")
        lo = _dec(s["lower"], {})
        vr = ValueRange(lo, math.inf if s["upper"] is None else int(s["upper"]))
        if name.startswith("zuf"):  # an unbacked float (a float tensor's .item())
            syms[name] = _sympy().Symbol(name)
            env.var_to_range[syms[name]] = ValueRange(vr.lower, vr.upper, True)
            env.var_to_source[syms[name]] = name
            env._n_unbacked_float = max(env._n_unbacked_float, int(name[3:]) + 1)
            continue
        syms[name] = env.add_symbol(name, s["hint"], vr, s.get("source"))._expr
    ctx = {"nodes": {}, "syms": syms, "env": env}
    graph = Graph()
    for j in model["nodes"]:
        node = _build_node(graph, j, ctx)
        ctx["nodes"][node.name] = node
    graph.lint()
    sig = ExportGraphSignature(
        [InputSpec(InputKind[s["kind"]], TensorArgument(s["name"]), s["target"],
                   s["persistent"]) for s in model["inputs"]],
        [OutputSpec(OutputKind[s["kind"]], TensorArgument(s["name"]), s["target"])
         for s in model["outputs"]])
    state, constants = {}, {}
    rg = model.get("params_requires_grad", {})
    for key, t in weights.items():
        kind, _, name = key.partition("/")
        if kind == "state":
            is_param = name in sig.parameters
            state[name] = Parameter(t, requires_grad=rg.get(name, True)) if is_param else t
        elif kind == "constants":
            constants[name] = t
        else:
            raise _err(f"unexpected weights entry {key!r}")
    ranges = {}
    for e, lo, hi in model["range_constraints"]:
        x = _dec_expr(e, syms)
        ranges[x] = ValueRange(_dec(lo, {}), math.inf if hi is None else hi,
                               str(x).startswith("zuf"))
    guards = InputGuards([(src, [_dec_expr(e, syms) for e in exprs])
                          for src, exprs in model["guard_dims"]],
                         ranges, [_dec_expr(e, syms) for e in model["guards"]])
    in_spec = (list(model["in_names"]), {k: _dec_struct(s) for k, s in model["in_structs"]})
    it = iter(examples[str(i)] for i in range(len(examples)))
    ex = model["example_structs"]
    example_inputs = (unflatten(_dec_struct(ex["args"]), it),
                      unflatten(_dec_struct(ex["kwargs"]), it))
    out_spec = _dec_struct(model["out_spec"])
    ep = ExportedProgram(graph, sig, state, constants, ranges, example_inputs, in_spec,
                         out_spec, guards, dialect=model["dialect"], shape_env=env,
                         module_call_graph=_dec_call_graph(model, in_spec, out_spec, ctx))
    ep.validate()
    return ep


def _build_node(graph: Graph, j: dict, ctx: dict) -> Node:
    op, name, target = j["op"], j["name"], j["target"]
    if not isinstance(name, str) or not name.isidentifier() or name in ctx["nodes"]:
        raise _err(f"malformed or duplicate node name {name!r}")
    if op == "placeholder":
        node = graph.placeholder(name)
    elif op == "output":
        node = graph.output(_dec(j["args"], ctx)[0])
    elif op == "call_function":
        if target == "operator.getitem":
            fn: Any = operator.getitem
        elif isinstance(target, str) and target.startswith("ember.export."):
            fn = FUNCTIONS.get(target.removeprefix("ember.export."))
            if fn is None:
                raise _err(f"node {name!r} calls {target!r}, which is not an export function")
        else:
            fn = REGISTRY.get(target) if isinstance(target, str) else None
            if fn is None:
                raise _err(f"node {name!r} calls {target!r}, which is not an ember op")
        node = graph.create_node(op, fn, _dec(j["args"], ctx), _dec(j["kwargs"], ctx),
                                 name=name)
    else:
        raise _err(f"node {name!r} has the unknown kind {op!r}")
    if node.name != name:
        raise _err(f"duplicate node name {name!r}")
    node.meta["val"] = _dec_val(j.get("val"), ctx)
    if isinstance(node.meta["val"], dict):
        name = node.meta["val"]["symfloat"]
        if name is not None and name not in ctx["syms"]:
            raise _err(f"node {node.name!r} names an unknown symbol {name!r}")
        SymFloat(node, None if name is None else ctx["syms"][name])
    if j.get("stack_trace"):
        node.meta["stack_trace"] = str(j["stack_trace"])
    stack, ids = j.get("nn_module_stack"), j.get("module_call_ids")
    if stack is not None:
        if not (isinstance(stack, list) and isinstance(ids, list) and len(ids) == len(stack)
                and all(isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e)
                        for e in stack) and all(type(i) is int for i in ids)):
            raise _err(f"node {name!r} has a malformed nn_module_stack")
        node.meta["nn_module_stack"] = tuple(tuple(e) for e in stack)
        node.meta["module_call_ids"] = tuple(ids)
    return node


__all__ = ["FORMAT", "VERSION", "load", "save"]
