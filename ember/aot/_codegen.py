"""The C of an AOT model library: the C backend's translation unit for an exported program plus
a wrapper that implements the model interface (``ember/include/ember/aot/model.h``).

``model_source(ep)`` maps the program onto the compiler's graph (``export._compile``), makes
every output a fresh C-contiguous buffer (a ``clone``), lowers and schedules it with the C
backend *without BLAS* (a package must run without NumPy's OpenBLAS: products use the generated
loops) and appends, in C:

- ``bind_sizes``: the export's input guards (static sizes, symbol ranges, relations) checked
  on the argument shapes, and the lifted sizes computed from them;
- ``output_shape``: each output's sizes from those ints;
- ``run``: allocates the intermediate buffers and calls the unit's entries in order.

A graph with an op that the C backend runs as a Python (eager NumPy) extern cannot be packaged:
``ModelSourceError`` names the ops; custom ops (``ember.library.custom_op``) are the exception:
``run`` calls them back through the Python loader (``_externs.py``).  A buffer the program
mutates (BatchNorm's running stats in train mode, a step counter) is an ``ARG_MUTABLE``
argument: ``run`` computes its new value into a temporary and copies it over the argument's
memory after every kernel has run (the loaders hand it a private writable copy of the weight
blob).  Mutations of inputs or parameters are
refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ember.aot._externs import CALLBACK_C, EXTERN_CODE
from ember.config import config
from ember.errors import EmberNotImplementedError

INCLUDE_DIR = Path(__file__).resolve().parents[1] / "include"
MODEL_H = INCLUDE_DIR / "ember" / "aot" / "model.h"
ENOMEM = 1_000_000  # run()'s code for a failed allocation (guard codes are 1..n)


class ModelSourceError(EmberNotImplementedError):
    """The exported program cannot become a Python-free model library."""


# DLPack (code, bits) per ember dtype name
_DL = {"float32": (2, 32), "float64": (2, 64), "float16": (2, 16), "bfloat16": (4, 16),
       "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64), "uint8": (1, 8),
       "bool": (6, 8), "complex64": (5, 64), "complex128": (5, 128)}


def dl_type(dtype: Any) -> tuple[int, int]:
    """DLPack's (type code, bits) of an ember dtype."""
    try:
        return _DL[dtype.name]
    except KeyError:
        raise ModelSourceError(f"[aoti_compile_and_package] dtype {dtype.name} has no DLPack "
                               f"code; AOT packages support {sorted(_DL)}") from None


# argument kinds (model.h): a user input, a constant, a buffer the model updates in place
ARG_USER, ARG_CONSTANT, ARG_MUTABLE = 0, 1, 2


@dataclass
class Arg:
    """One argument of the model interface (an input of the program's signature)."""

    name: str
    kind: int                    # ARG_USER, ARG_CONSTANT or ARG_MUTABLE
    dtype: Any
    shape: tuple                 # sympy exprs (user) or ints (constants)
    weight_file: str | None = None
    target: str | None = None    # the FQN of a constant


@dataclass
class ModelSource:
    """The generated C and what loaders need to know about it."""

    source: str
    args: list
    outputs: list                # [(dtype, ndim)]
    n_ints: int
    guard_texts: list = field(default_factory=list)
    mutated: list = field(default_factory=list)   # FQNs of the buffers run() updates
    externs: dict = field(default_factory=dict)   # metadata of its Python custom ops


@contextlib.contextmanager
def no_blas() -> Iterator[None]:
    """Generate code as if the process had no BLAS (products become generated loops)."""
    from ember.compiler.c.build import runtime
    had = "blas" in runtime._BLAS
    old = runtime._BLAS.get("blas")
    runtime._BLAS["blas"] = None
    try:
        yield
    finally:
        if had:
            runtime._BLAS["blas"] = old
        else:
            runtime._BLAS.pop("blas", None)


# ---------------------------------------------------------------------------- C expressions
def cexpr(e: Any, names: dict) -> str:
    """A sympy size expression or relation as C over int64 variables ``names``."""
    from ember import sym
    sym._sympy()
    sp = sym._sp
    t = type(e).__name__
    if t in sym._REL_OPS:
        return f"({cexpr(e.lhs, names)} {sym._REL_OPS[t]} {cexpr(e.rhs, names)})"
    if t in ("And", "Or"):
        op = " && " if t == "And" else " || "
        return "(" + op.join(cexpr(a, names) for a in e.args) + ")"
    if t == "Not":
        return f"(!{cexpr(e.args[0], names)})"
    if t in ("BooleanTrue", "true"):
        return "1"
    if t in ("BooleanFalse", "false"):
        return "0"
    if e.is_Integer:
        return f"INT64_C({int(e)})"
    if e.is_Symbol:
        if e not in names:
            raise ModelSourceError(f"[aoti_compile_and_package] size {e} is not an input "
                                   f"dimension; AOT packages need every symbol to be a size "
                                   f"of some input")
        return names[e]
    if e.is_Add:
        return "(" + " + ".join(cexpr(a, names) for a in e.args) + ")"
    if e.is_Mul:
        return "(" + " * ".join(cexpr(a, names) for a in e.args) + ")"
    if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
        return "(" + " * ".join([cexpr(e.base, names)] * int(e.exp)) + ")"
    if isinstance(e, sp.Mod):
        return f"ember_aot_mod({cexpr(e.args[0], names)}, {cexpr(e.args[1], names)})"
    if sym._FloorDiv is not None and isinstance(e, sym._FloorDiv):
        return f"ember_aot_floordiv({cexpr(e.args[0], names)}, {cexpr(e.args[1], names)})"
    if isinstance(e, (sp.Max, sp.Min)):
        fn = "ember_aot_max" if isinstance(e, sp.Max) else "ember_aot_min"
        out = cexpr(e.args[0], names)
        for a in e.args[1:]:
            out = f"{fn}({out}, {cexpr(a, names)})"
        return out
    raise ModelSourceError(f"[aoti_compile_and_package] cannot write the size expression "
                           f"{e} in C")


def _c_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.append("?")
    return '"' + "".join(out) + '"'


# ---------------------------------------------------------------------------- the graph
def _compiler_graph(ep: Any) -> tuple:
    """The program as the compiler's graph with every output cloned (fresh, C-contiguous)."""
    from ember.compiler.frontend.graph import Node as CNode
    from ember.export._compile import to_compiler_graph
    from ember.export.graph_signature import OutputKind
    from ember.ops.registry import REGISTRY
    bad = [s for s in ep.graph_signature.output_specs
           if s.kind not in (OutputKind.USER_OUTPUT, OutputKind.BUFFER_MUTATION)]
    if bad:
        raise ModelSourceError(
            f"[aoti_compile_and_package] the program mutates {[s.target for s in bad]} "
            f"({bad[0].kind.name}); AOT packages update buffers in place but not inputs or "
            f"parameters: clone the input inside the model, or make the state a buffer")
    try:
        graph, exprs, examples = to_compiler_graph(ep)
    except EmberNotImplementedError as e:
        raise ModelSourceError(str(e).replace("[compile_program]",
                                              "[aoti_compile_and_package]")) from None
    from ember.aot import _externs
    from ember.aot._rewrite import channel_norms
    from ember.compiler.c.decompose import decompose
    ext_shapes = _externs.output_shapes(ep, graph, exprs)
    graph = decompose(_externs.contiguous_inputs(channel_norms(ep, graph, exprs)))
    clone = REGISTRY["clone"]
    outs = []
    for r in graph.outputs:
        if r[0] == "i":
            spec = (tuple(examples[r[1]].shape), graph.inputs[r[1]][1])
        else:
            spec = graph.nodes[r[1]].specs[r[2]]
        graph.nodes.append(CNode(clone, (r,), {"contiguous": True}, (spec,)))
        outs.append(("n", len(graph.nodes) - 1, 0))
    graph.outputs = outs
    # each custom op's result sizes by node index (custom ops keep their order through the
    # rewrites); the library allocates them before calling the op
    idx = [i for i, n in enumerate(graph.nodes) if _externs.is_python_op(n.op)]
    graph.extern_shapes = dict(zip(idx, ext_shapes))  # type: ignore[attr-defined]
    graph.num_scalars = len(exprs)
    graph.scalar_kinds = ("size",) * len(exprs)
    graph.lifted = list(range(len(exprs)))  # type: ignore[attr-defined]
    return graph, exprs


def lower_program(ep: Any, march: str = "native") -> tuple:
    """``(program, lifted exprs)``: the scheduled loop IR of ``ep`` built without BLAS (its
    products run the GEMM template tiled for ``march``)."""
    from ember.compiler.c.backend import lower_and_schedule, split_fallbacks
    graph, exprs = _compiler_graph(ep)
    with no_blas():
        program = lower_and_schedule(graph)
    use_gemm_templates(program, march)
    from ember.aot._externs import ExternPlan, is_python_op, qualname
    py = {qualname(st.node.op) for st in program.externs() if is_python_op(st.node.op)}
    externs = [(op, why) for op, why in split_fallbacks(program.stats.fallbacks)
               if op.removesuffix(".default").replace(".", "::", 1) not in py]
    if externs or any(not is_python_op(st.node.op) for st in program.externs()):
        ops = ", ".join(f"{op} ({why})" for op, why in externs) or "?"
        raise ModelSourceError(
            f"[aoti_compile_and_package] the graph runs these ops as Python (eager NumPy) "
            f"fallbacks: {ops}; an AOT package runs without Python, so every op needs a C "
            f"lowering (only custom ops, ember.library.custom_op, may run Python, from a "
            f"package loaded in Python). Remove or replace them, or run the model with "
            f"ember.compile instead")
    plan = ExternPlan(program, program.sources, graph.extern_shapes, len(exprs))
    extra = [n for n in program.int_names[len(exprs):] if n not in plan.extra]
    if extra or program.int_names[:len(exprs)] != [f"s{k}" for k in range(len(exprs))]:
        raise ModelSourceError(f"[aoti_compile_and_package] the program has runtime sizes "
                               f"{program.int_names} that are not input sizes ({exprs})")
    program.extern_plan = plan  # type: ignore[attr-defined]
    return program, exprs, graph


def use_gemm_templates(program: Any, march: str = "native") -> None:
    """Float products run the generated GEMM template (packed panels, a register-blocked
    micro-kernel tiled for ``march``'s vector registers) instead of BLAS, which a package
    cannot count on; without this they would take the reference triple loop."""
    from ember.compiler.c.codegen.gemm import templates_for
    from ember.compiler.c.ir.kernels import GemmKernel
    tiles = templates_for(march)
    for k in program.kernels():
        if isinstance(k, GemmKernel) and k.half:   # half operands: the half template
            k.impl = "h" + tiles["float32"][0]
        elif isinstance(k, GemmKernel) and k.dtype.np.name in tiles:
            k.impl = tiles[k.dtype.np.name][0]


def prepack_constant_operands(program: Any, constant_inputs: list) -> None:
    """Give every template product whose B operand is a package constant (the same memory for
    every batch entry) a slot: its packed panels are made once and reused by every run
    (codegen/csrc/gemm_prepack.h.in) once a loader switches that on (``ember_aot_prepack_v1``;
    loaders call it again after ``load_constants``, which drops the packed copies)."""
    from ember.compiler.c.ir.kernels import GemmKernel
    const = {id(program.inputs[k]) for k in constant_inputs}
    slot = 0
    for k in program.kernels():
        if (isinstance(k, GemmKernel) and k.impl.startswith("tmpl_") and id(k.b.buf) in const
                and not any(k.b.batch_strides)):
            k.prepack, slot = slot, slot + 1


def model_source(ep: Any, model_name: str = "model", march: str = "native") -> ModelSource:
    """The model library's C (unit + interface) and its argument table."""
    from ember.compiler.c.codegen.unit import generate
    from ember.export.graph_signature import InputKind
    program, exprs, graph = lower_program(ep, march)
    from ember.export.graph_signature import OutputKind
    sig = ep.graph_signature
    mutated = [s.target for s in sig.output_specs if s.kind == OutputKind.BUFFER_MUTATION]
    prepack_constant_operands(program, [k for k, s in enumerate(sig.input_specs)
                                        if s.kind != InputKind.USER_INPUT
                                        and s.target not in mutated])
    with no_blas():
        unit = generate(program, openmp=config.c_openmp)
    args, k_user = [], 0
    for k, s in enumerate(sig.input_specs):
        shape, dt = graph.inputs[k]
        if s.kind == InputKind.USER_INPUT:
            args.append(Arg(s.arg.name, ARG_USER, dt, tuple(ep._guards.dims[k_user][1])))
            k_user += 1
        else:
            value = ep._lifted_value(s)
            kind = ARG_MUTABLE if s.target in mutated else ARG_CONSTANT
            args.append(Arg(s.target, kind, dt, tuple(int(n) for n in value.shape),
                            f"weight_{k}", s.target))
    for a in args:
        dl_type(a.dtype)
    bufs = [program.sources[r][1] for r in graph.outputs]
    for r, b in zip(graph.outputs, bufs):
        if program.sources[r][0] != "buf" or b.strides is not None:
            raise ModelSourceError(f"[aoti_compile_and_package] output {r} is not a fresh "
                                   f"C-contiguous buffer ({program.sources[r][0]}); please "
                                   f"report this graph")
    outs, writes = [], []  # user outputs; (new value, argument) of each mutated buffer
    for s, b in zip(sig.output_specs, bufs):
        if s.kind == OutputKind.BUFFER_MUTATION:
            writes.append((b, next(i for i, a in enumerate(args) if a.target == s.target)))
        else:
            outs.append(b)
    wrapper = _Wrapper(program, exprs, ep, args, outs, model_name, writes)
    header_hash = hashlib.sha256(MODEL_H.read_bytes()).hexdigest()[:16]
    text = (f"/* ember AOT model {model_name!s}: model.h {header_hash} */\n"
            f"#include <ember/aot/model.h>\n#include <string.h>\n{unit}\n{wrapper.text()}")
    return ModelSource(text, args, [(b.dtype, len(b.shape)) for b in outs], len(exprs),
                       wrapper.guard_texts, mutated, program.extern_plan.metadata())


class _Wrapper:
    """Writes the interface functions (see the module docstring)."""

    def __init__(self, program: Any, exprs: list, ep: Any, args: list, outs: list,
                 model_name: str, writes: list = ()) -> None:
        self.program, self.exprs, self.ep, self.args, self.outs = program, exprs, ep, args, outs
        self.model_name, self.writes = model_name, list(writes)
        self.guard_texts: list = []

    def _guard(self, cond: str, text: str) -> str:
        self.guard_texts.append(text)
        return f"  if (!({cond})) return {len(self.guard_texts)};"

    def bind_sizes(self) -> list:
        lines = ["static int ember_aot_bind_sizes(const int64_t *const *shapes, int64_t *ints) {"]
        names: dict = {}
        first: list = []
        for i, a in enumerate(self.args):
            if a.kind != ARG_USER:
                for d, n in enumerate(a.shape):
                    lines.append(self._guard(f"shapes[{i}][{d}] == INT64_C({n})",
                                             f"constant {a.name} has the wrong shape: expected "
                                             f"{list(a.shape)}"))
                continue
            for d, e in enumerate(a.shape):
                if e.is_Symbol and e not in names:
                    names[e] = f"v{len(names)}"
                    first.append(f"  const int64_t {names[e]} = shapes[{i}][{d}];")
        lines += first
        lines += [f"  (void){v};" for v in names.values()]
        g = self.ep._guards
        for (src, dims), i in zip(g.dims, [i for i, a in enumerate(self.args) if a.kind == 0]):
            for d, e in enumerate(dims):
                if e.is_Symbol and names[e] == _first_name(first, i, d):
                    continue
                lines.append(self._guard(f"shapes[{i}][{d}] == {cexpr(e, names)}",
                                         f"Guard failed: {src}.size()[{d}] == {e}"))
        for e, vr in g.ranges.items():
            if e.free_symbols - names.keys():
                continue
            where = g.names.get(e, str(e))
            if vr.lower != -math.inf:
                lines.append(self._guard(f"{cexpr(e, names)} >= {int(vr.lower)}",
                                         f"Guard failed: {where} >= {int(vr.lower)}"))
            if vr.upper != math.inf:
                lines.append(self._guard(f"{cexpr(e, names)} <= {int(vr.upper)}",
                                         f"Guard failed: {where} <= {int(vr.upper)}"))
        for e in g.guards:
            if e.free_symbols <= names.keys():
                lines.append(self._guard(cexpr(e, names), f"Guard failed: {e}"))
        for k, e in enumerate(self.exprs):
            lines.append(f"  ints[{k}] = {cexpr(e, names)};")
        lines += ["  (void)ints;", "  return 0;", "}"]
        return lines

    def output_shape(self) -> list:
        lines = ["static void ember_aot_output_shape(int32_t k, const int64_t *ints_in, "
                 "int64_t *shape) {", *self._int_locals(), "  switch (k) {"]
        for k, b in enumerate(self.outs):
            lines.append(f"  case {k}:")
            lines += [f"    shape[{d}] = {_size(n)};" for d, n in enumerate(b.shape)]
            lines.append("    break;")
        lines += ["  default: break;", "  }", "  (void)shape;", "}"]
        return lines

    def _int_locals(self) -> list:
        """``ints`` (every runtime int of the program) from the bound ``ints_in``: the input
        sizes, then the sizes of custom ops' results (known from the input sizes)."""
        names = self.program.int_names
        plan = self.program.extern_plan
        lines = [f"  int64_t ints[{max(1, len(names))}];",
                 f"  for (int i = 0; i < {len(self.exprs)}; i++) ints[i] = ints_in[i];"]
        lines += [f"  ints[{k}] = {plan.extra[n]};" for k, n in enumerate(names)
                  if k >= len(self.exprs)]
        lines += [f"  const int64_t {n} = ints[{k}]; (void){n};" for k, n in enumerate(names)]
        return lines

    def run(self) -> list:
        p = self.program
        inputs = {id(b): k for k, b in enumerate(p.inputs)}
        outputs = {id(b): k for k, b in enumerate(self.outs)}
        temps: dict = {}
        body: list = []

        def ptr(b: Any) -> str:
            if id(b) in inputs:
                return f"args[{inputs[id(b)]}]"
            if id(b) in outputs:
                return f"outs[{outputs[id(b)]}]"
            if id(b) not in temps:
                j = temps[id(b)] = len(temps)
                nbytes = f"({_numel(b.shape)}) * {b.dtype.np.itemsize}"
                body.extend([f"  tmp[{j}] = ember_aot_alloc({nbytes});",
                             f"  if (tmp[{j}] == NULL) {{ rc = {ENOMEM}; goto done; }}"])
            return f"tmp[{temps[id(b)]}]"

        plan, n_ext = p.extern_plan, 0
        for st in p.steps:
            if hasattr(st, "kernels"):
                ptrs = [ptr(b) for b in st.buffers()]
                body += [f"  {{ void *b[] = {{{', '.join(ptrs) or 'NULL'}}};",
                         f"    rc = {st.entry}(b, ints, floats); if (rc) goto done; }}"]
                continue
            bufs = [self._buffer(r) for r in st.ins]
            body += plan.call(n_ext, [ptr(b) for b in bufs], [tuple(b.shape) for b in bufs],
                              [ptr(b) for b in st.outs])
            n_ext += 1
        for b, i in self.writes:  # mutated buffers take their new values, all reads done
            body.append(f"  memcpy(args[{i}], {ptr(b)}, "
                        f"(size_t)({_numel(b.shape)}) * {b.dtype.np.itemsize});")
        n_int = max(1, len(p.int_names))
        return ["static int ember_aot_run(void *const *args, void *const *outs, "
                "const int64_t *ints_in) {", *self._int_locals(),
                f"  double floats[{n_int}];",
                f"  for (int i = 0; i < {len(p.int_names)}; i++) floats[i] = (double)ints[i];",
                f"  void *tmp[{max(1, len(temps))}] = {{0}};", "  int rc = 0;",
                "  (void)args; (void)outs;", *body,
                "done:", f"  for (int i = 0; i < {len(temps)}; i++) free(tmp[i]);",
                "  return rc;", "}"]

    def _buffer(self, r: tuple) -> Any:
        """The buffer holding graph value ``r`` (an input, or a node's fresh buffer)."""
        src = self.program.sources[r]
        return self.program.inputs[src[1]] if src[0] == "in" else src[1]

    def tables(self) -> list:
        lines = []
        infos = []
        for i, a in enumerate(self.args):
            code, bits = dl_type(a.dtype)
            shape = "NULL"
            nbytes = -1
            if a.kind != ARG_USER:
                if a.shape:
                    lines.append(f"static const int64_t ember_aot_shape{i}[] = "
                                 f"{{{', '.join(str(n) for n in a.shape)}}};")
                    shape = f"ember_aot_shape{i}"
                nbytes = math.prod(a.shape) * a.dtype.np.itemsize
            wf = _c_string(a.weight_file) if a.weight_file else "NULL"
            infos.append(f"  {{{_c_string(a.name)}, {a.kind}, {code}, {bits}, {len(a.shape)}, "
                         f"{shape}, {nbytes}, {wf}}},")
        lines += ["static const ember_aot_arg_info ember_aot_args[] = {", *infos,
                  "  {NULL, 0, 0, 0, 0, NULL, 0, NULL}", "};"]
        outs = []
        for k, b in enumerate(self.outs):
            code, bits = dl_type(b.dtype)
            outs.append(f"  {{\"output{k}\", 0, {code}, {bits}, {len(b.shape)}, NULL, -1, "
                        f"NULL}},")
        lines += ["static const ember_aot_arg_info ember_aot_outputs[] = {", *outs,
                  "  {NULL, 0, 0, 0, 0, NULL, 0, NULL}", "};"]
        return lines

    def text(self) -> str:
        bind = self.bind_sizes()
        texts = ", ".join(_c_string(t) for t in self.guard_texts) or "NULL"
        parts = [_HELPERS, CALLBACK_C, *self.tables(), *bind, *self.output_shape(),
                 *self.run(),
                 f"static const char *const ember_aot_guard_texts[] = {{{texts}}};",
                 _MESSAGE.replace("@N@", str(len(self.guard_texts))).replace(
                     "@ENOMEM@", str(ENOMEM)).replace("@EXTERN@", str(EXTERN_CODE)),
                 "static const ember_aot_model_v1 ember_aot_model = {",
                 f"  EMBER_AOT_MODEL_ABI_VERSION, {len(self.args)}, {len(self.outs)}, "
                 f"{len(self.exprs)},",
                 "  ember_aot_args, ember_aot_outputs, ember_aot_bind_sizes, "
                 "ember_aot_output_shape,",
                 "  ember_aot_run, ember_set_num_threads, ember_aot_message};",
                 "EMBER_EXPORT const ember_aot_model_v1 *ember_aot_model_get_v1(void) "
                 "{ return &ember_aot_model; }",
                 _PREPACK_EXPORT]
        return "\n".join(parts) + "\n"


def _first_name(first: list, i: int, d: int) -> str | None:
    tag = f"= shapes[{i}][{d}];"
    for line in first:
        if line.endswith(tag):
            return line.split()[2]
    return None


def _size(n: Any) -> str:
    return f"(int64_t)({n})"


def _numel(shape: tuple) -> str:
    return " * ".join(f"(int64_t)({n})" for n in shape) or "1"


# packed constant B operands (codegen/csrc/gemm_prepack.h.in): on (1) or off (0), and drop
# every packed copy; the loaders call it after loading and after load_constants
_PREPACK_EXPORT = """#ifdef EMBER_PP_SLOTS
EMBER_EXPORT void ember_aot_prepack_v1(int on) { ember_pp_reset(on); }
#endif"""

_HELPERS = r"""
/* ---- ember AOT model interface (ember/aot/_codegen.py) ---- */
static inline int64_t ember_aot_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t ember_aot_mod(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t ember_aot_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ember_aot_min(int64_t a, int64_t b) { return a < b ? a : b; }
static void *ember_aot_alloc(int64_t nbytes) {
  void *p = NULL;
  size_t n = (size_t)(nbytes > 0 ? nbytes : 1);
  n = (n + 63) & ~(size_t)63;
  if (posix_memalign(&p, 64, n) != 0) return NULL;
  return p;
}
"""

_MESSAGE = r"""
static const char *ember_aot_message(int code) {
  if (code >= 1 && code <= @N@) return ember_aot_guard_texts[code - 1];
  if (code == @ENOMEM@) return "out of memory allocating an intermediate buffer";
  if (code == @EXTERN@) return "a Python custom op failed, or the library was loaded without "
                               "Python (only ember.aot.load_package runs custom ops)";
  if (code == 0) return "success";
  return "a kernel found invalid input (e.g. an index out of range)";
}
"""
