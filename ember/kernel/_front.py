"""The kernel compiler: a ``@jit`` function's AST -> typed values -> C (one pass).

``compile_kernel(jf, bound)`` parses the function's source, walks its statements with the
launch's types (tensor dtypes, scalar kinds, constexpr values), type-checks every operation
(errors name the kernel line: ``[ember.kernel] softmax line 7: ...``) and emits C:

* ``ek_<h>_program(pid0, pid1, pid2, g0, g1, g2, <params>)``: one program; blocks are local
  arrays, each named value one loop over its block (``#pragma GCC ivdep``; gcc vectorizes it),
  index arithmetic inlined so that ``ptr + row * stride + arange(0, B)`` is a contiguous access;
* ``ek_<h>_grid(g0, g1, g2, <params>)``: the grid as one OpenMP loop over the programs;
* ``ek_launch(bufs, ints, floats)``: the C backend's entry ABI (``ints`` = grid, then the int
  arguments; ``floats`` the float arguments), for eager launches.

The compile integration (``ember/compiler/c/lower/kernel_op.py``) places the same program and
grid functions inside a graph's translation unit.  Statements: assignments (``=``, ``+=``, ...),
``for ... in range(...)``/``static_range``, ``if`` (a constexpr condition compiles one branch),
``store``/``device_assert`` calls, ``pass``, ``return``.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import math
import textwrap
from dataclasses import dataclass
from typing import Any

from ember.compiler.c.codegen.omp import OMP_MIN_ITERATIONS
from ember.compiler.c.codegen.prelude import store_expr
from ember.errors import EmberTypeError
from ember.kernel._values import (
    CTYPES,
    TENSOR_DTYPES,
    Val,
    cast_expr,
    compute_dtype,
    flat_index,
    literal,
)


class KernelTypeError(EmberTypeError):
    """A kernel that does not type-check; the message names the kernel line."""


@dataclass
class CompiledKernel:
    """A compiled specialization: the C text, its symbols, and the built library."""

    name: str
    source: str           # program + grid functions (guarded: may appear twice in a unit)
    grid_fn: str          # C name of the grid function
    params: list          # (name, kind, ctype) of the C parameters after the grid
    stored: frozenset
    unit: Any = None      # the loaded runtime Library (eager launches)

    def call(self, bound: list, grid: tuple, arrays: list) -> None:
        from ember.kernel import _build
        _build.call(self, bound, grid, arrays)


def _source_of(fn: Any) -> tuple[ast.FunctionDef, int, list[str]]:
    src = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(src)
    fdef = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return fdef, fn.__code__.co_firstlineno, src.splitlines()


class Gen:
    """The code generator of one specialization (see the module docstring)."""

    def __init__(self, jf: Any, bound: list, fusion: dict | None = None,
                 ints: dict | None = None) -> None:
        self.jf, self.bound = jf, bound
        # int parameter -> its value, written into the C as a literal (a launch inside a
        # compiled graph: the C compiler then folds masks and strides); typing is unchanged
        self.ints = ints or {}
        # param name -> a hook of the C backend's fusion pass (``c/kernel_fusion.py``): its
        # loads/stores become the producer's/consumer's pointwise code
        self.fusion = fusion or {}
        self.fdef, self.first, self.lines_src = _source_of(jf.fn)
        # the decorator lines come first in the source: line numbers count from the ``def``
        self.def_line = self.first + self.fdef.lineno - 1 - (
            self.fdef.decorator_list[0].lineno - 1 if self.fdef.decorator_list else 0)
        self.globals = scope_of(jf.fn)
        self.out: list[str] = []
        self.ind = "  "
        self.n = 0
        self.env: dict[str, Val] = {}
        self.scopes: list[set] = [set()]
        self.stored: set = set()
        self.loaded: set = set()
        # C conditions under which a mask ``offset + arange(s, B) < n`` met is all true
        # (``n >= B``, ``pid0 * 64 + 64 <= n``); ``assume``: those that hold in this body
        self.versions: dict = {}
        self.assume: set = set()
        self.params: list = []
        self.node: Any = self.fdef
        self.rest: list = []     # the statements after the current one in its list
        self.prefused: dict = {}  # id(reduction call) -> its value, computed already
        self.work = 1            # elements of the largest block loop: a program's size
        self.uses: dict = {}     # name -> loads of it in the kernel's source
        self.defs: dict = {}     # name -> assignments to it
        for n in ast.walk(self.fdef):
            if isinstance(n, ast.Name):
                d = self.uses if isinstance(n.ctx, ast.Load) else self.defs
                d[n.id] = d.get(n.id, 0) + 1

    # -- errors and emission -------------------------------------------------------------------
    def lineno(self, node: Any) -> int:
        return self.first + getattr(node, "lineno", self.fdef.lineno) - 1 - (
            self.fdef.decorator_list[0].lineno - 1 if self.fdef.decorator_list else 0)

    def error(self, msg: str, node: Any = None) -> KernelTypeError:
        node = node if node is not None else self.node
        line = getattr(node, "lineno", self.fdef.lineno)
        text = self.lines_src[line - 1].strip() if 0 < line <= len(self.lines_src) else ""
        return KernelTypeError(f"[ember.kernel] {self.jf.__name__} line {self.lineno(node)}: "
                               f"{msg}\n    {text}")

    def emit(self, line: str) -> None:
        self.out.append(self.ind + line)

    def tmp(self, prefix: str = "t") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def loops(self, shape: tuple, body: Any) -> None:
        """Emit loops over ``shape`` (innermost last) around ``body(idx)`` (C lines)."""
        self.work = max(self.work, math.prod(shape))
        idx = []
        for d, n in enumerate(shape):
            v = self.tmp("i")
            if d == len(shape) - 1:
                self.emit("#pragma GCC ivdep")
            self.emit(f"for (int64_t {v} = 0; {v} < {n}; {v}++) {{")
            self.ind += "  "
            idx.append(v)
        for line in body(idx):
            self.emit(line)
        for _ in shape:
            self.ind = self.ind[:-2]
            self.emit("}")

    def declare_array(self, ctype: str, var: str, n: int) -> None:
        """A local block array.  One of a page or more starts half a page into a page-aligned
        region: the C backend's outputs are page-aligned, so a loop that reads a block and
        stores a row of an output would otherwise read and write at the same offset modulo
        4 KiB, and the CPU stalls the loads behind the stores (4K aliasing; the softmax
        kernel ran 2x slower in a compiled graph)."""
        size = {"bool": 1, "uint8_t": 1, "int8_t": 1, "int16_t": 2, "int32_t": 4,
                "float": 4}.get(ctype, 8)
        if n * size < 1024:
            self.emit(f"{ctype} {var}[{n}];")
            return
        skew = 2048 // size
        self.emit(f"{ctype} {var}_s[{n + skew}] __attribute__((aligned(4096)));")
        self.emit(f"{ctype} *restrict {var} = {var}_s + {skew};")

    def materialize(self, v: Val, name: str = "t") -> Val:
        """``v`` computed into a fresh local (scalar variable or block array)."""
        if v.ptr is not None:
            off = Val("int64", v.shape, v.fn)
            m = self.materialize(off, name)
            return Val(v.dtype, v.shape, m.fn, ptr=v.ptr, cheap=False, storage=m.storage,
                       extra={k: x for k, x in v.extra.items() if k == "storage_dtype"})
        var = self.tmp(f"{name}_")
        dt = "float32" if v.weak and v.dtype == "float32" else v.dtype
        if not v.shape:
            self.emit(f"{CTYPES[dt]} {var} = {cast_expr(v, dt, [])};")
            return Val(dt, (), lambda i, var=var: var, cheap=False, storage=var)
        shape = v.shape
        self.declare_array(CTYPES[dt], var, v.numel)
        self.loops(shape, lambda idx: [f"{var}[{flat_index(idx, shape)}] = "
                                       f"{cast_expr(v, dt, idx)};"])
        return Val(dt, shape, lambda i, var=var, shape=shape: f"{var}[{flat_index(i, shape)}]",
                   cheap=False, storage=var)

    def assign_into(self, target: Val, v: Val, name: str, node: Any) -> None:
        """Write ``v`` into the storage of ``target`` (a loop-carried or branch-assigned name):
        the types must agree (a literal converts)."""
        if v.ptr != target.ptr or v.shape != target.shape or (
                v.dtype != target.dtype and not v.weak):
            raise self.error(f"{name} has type {target.type_str()} before this loop/branch but is "
                             f"re-assigned a {v.type_str()}; the types must agree", node)
        if not target.shape:
            self.emit(f"{target.storage} = {cast_expr(v, target.dtype, [])};")
            return
        src = self.materialize(v, "n") if v.storage is None or not v.cheap else v
        dt = "int64" if target.ptr else target.dtype
        self.loops(target.shape, lambda idx: [f"{target.storage}[{flat_index(idx, target.shape)}]"
                                              f" = {cast_expr(_plain(src, dt), dt, idx)};"])

    # -- driver --------------------------------------------------------------------------------
    def run(self) -> tuple[str, list]:
        from ember.kernel import _stmts
        for a in self.bound:
            self._bind_param(a)
        _stmts.block(self, self.fdef.body)
        return "\n".join(self.out), self.params

    def _bind_param(self, a: Any) -> None:
        self.scopes[0].add(a.name)
        if a.kind == "constexpr":
            v = a.value
            if isinstance(v, (bool, int, float)):
                val = literal(v)
                val.weak = False if isinstance(v, float) else val.weak
                self.env[a.name] = val
            else:
                self.env[a.name] = Val("int64", (), lambda i: "0", const=v)
            return
        if a.kind == "tensor":
            dt = a.dtype_name
            if dt not in TENSOR_DTYPES:
                raise self.error(f"tensor argument {a.name} has dtype {dt}; kernels take "
                                 f"{', '.join(sorted(TENSOR_DTYPES))}")
            hook = self.fusion.get(a.name)
            if hook is None:
                self.params.append((a.name, "tensor", dt))
            else:  # the fused pointwise code reads/writes these buffers instead
                self.params.extend((n, "tensor", d) for n, d in hook.params)
            self.env[a.name] = Val(compute_dtype(dt), (), lambda i: "0", ptr=a.name,
                                   extra={"storage_dtype": dt})
            return
        dt = "int64" if a.kind == "int" else "float32"
        self.params.append((a.name, a.kind, dt))
        if a.kind == "int" and a.name in self.ints:
            text = f"((int64_t){int(self.ints[a.name])}LL)"
            self.env[a.name] = Val(dt, (), lambda i, t=text: t,
                                   extra={"int_value": int(self.ints[a.name])})
            return
        self.env[a.name] = Val(dt, (), lambda i, n=a.name: f"a_{n}",
                               extra={"param": a.name} if a.kind == "int" else {})


def scope_of(fn: Any) -> dict:
    """The names a kernel's body sees: its module's globals and its closure's variables."""
    scope = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell
                pass
    return scope


def _plain(v: Val, dt: str) -> Val:
    """A pointer value seen as its int64 offsets (to copy into carried storage)."""
    if v.ptr is None:
        return v
    return Val("int64", v.shape, v.fn)


def stored_params(jf: Any) -> frozenset:
    """Names of the parameters the kernel may store through: the first argument of every
    ``store`` call, following assignments (``p = out_ptr + offs``) back to parameters."""
    from ember.kernel import language as tl
    fdef, _, _ = _source_of(jf.fn)
    params = set(jf.arg_names) - set(jf.constexprs)
    deps: dict = {p: {p} for p in params}
    changed = True
    while changed:
        changed = False
        for node in ast.walk(fdef):
            targets: list = []
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                targets, value = [node.target], node.value
            for t in targets:
                if isinstance(t, ast.Name):
                    got = set().union(*[deps.get(n.id, set()) for n in ast.walk(value)
                                        if isinstance(n, ast.Name)]) & params
                    if isinstance(node, ast.AugAssign):
                        got |= deps.get(t.id, set())
                    if not got <= deps.get(t.id, set()):
                        deps[t.id] = deps.get(t.id, set()) | got
                        changed = True
    out: set = set()
    for node in ast.walk(fdef):
        if isinstance(node, ast.Call) and node.args and _is_store(node.func, jf.fn, tl.store):
            for n in ast.walk(node.args[0]):
                if isinstance(n, ast.Name):
                    out |= deps.get(n.id, set())
    return frozenset(out & params)


def _is_store(func: Any, fn: Any, store: Any) -> bool:
    obj: Any = None
    scope = scope_of(fn)
    try:
        if isinstance(func, ast.Name):
            obj = scope.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            obj = getattr(scope.get(func.value.id), func.attr, None)
    except Exception:  # noqa: BLE001 - anything unresolvable is not ``store``
        return False
    return obj is store


def access(jf: Any, bound: list) -> tuple[frozenset, frozenset]:
    """(parameters the specialization loads through, parameters it stores through)."""
    key = jf.specialization(bound)
    got = jf._access.get(key)
    if got is None:
        gen = Gen(jf, bound)
        gen.run()
        got = jf._access[key] = (frozenset(gen.loaded), frozenset(gen.stored))
    return got


def kernel_c(jf: Any, bound: list, fusion: dict | None = None,
             ints: dict | None = None) -> tuple[str, str, list, str]:
    """(C source of the program and grid functions, grid function name, params, hash).
    ``fusion``: param name -> a hook (``load(offset)``/``store(offset, value)`` C text and
    the ``params`` it needs in place of the tensor), from the C backend's fusion pass;
    ``ints``: int parameters whose values are known (written as C literals)."""
    gen = Gen(jf, bound, fusion, ints)
    body, params = gen.run()
    full, cond = None, ""
    if gen.versions:
        # a second body for when every ``arange(.., B) < n`` mask is all true (n >= B):
        # unmasked loads and stores, chosen per program at run time
        ver = Gen(jf, bound, fusion, ints)
        ver.assume = set(gen.versions)
        full, _ = ver.run()
        cond = " && ".join(f"({c})" for c in sorted(gen.versions))
    key = repr((jf.__name__, jf.specialization(bound), body, full))
    h = hashlib.sha256(key.encode()).hexdigest()[:12]
    base = f"ek_{jf.__name__}_{h}"
    cparams = []
    for name, kind, dt in params:
        if kind == "tensor":
            st = "uint16_t" if dt in ("float16", "bfloat16") else CTYPES[dt]
            cparams.append(f"{st} *restrict a_{name}")
        else:
            cparams.append(f"const {CTYPES[dt]} a_{name}")
    plist = ", ".join(cparams)
    pcall = ", ".join(f"a_{n}" for n, _, _ in params)
    grid_sig = "int64_t g0, int64_t g1, int64_t g2" + (f", {plist}" if plist else "")
    head = (f"(int64_t pid0, int64_t pid1, int64_t pid2, {grid_sig}) {{\n"
            "  (void)pid0; (void)pid1; (void)pid2; (void)g0; (void)g1; (void)g2;")
    versioned = [] if full is None else [
        f"__attribute__((noinline)) static void {base}_full{head}", full, "}"]
    call = f"(pid0, pid1, pid2, g0, g1, g2{', ' + pcall if pcall else ''});"
    run = ("    const int64_t pid0 = p_ % g0, pid1 = (p_ / g0) % g1, pid2 = p_ / (g0 * g1);\n" +
           (f"    {base}_program{call}" if full is None else
            f"    if ({cond}) {base}_full{call} else {base}_program{call}"))
    src = "\n".join([
        f"#ifndef EK_DEFINED_{base}", f"#define EK_DEFINED_{base}",
        f"/* ember.kernel {jf.__name__} ({jf.fn.__code__.co_filename}) */",
        f"__attribute__((noinline)) static void {base}_program{head}",
        body, "}", *versioned,
        f"static void {base}_grid({grid_sig}) {{",
        "  const int64_t total_ = g0 * g1 * g2;",
        "#ifdef _OPENMP",
        # small grids stay on one thread (a fork/join costs microseconds, far more on a
        # loaded machine): the C backend's threshold on elements, a program counted as its
        # largest block; tested before the parallel region, so that a serial grid does not
        # enter OpenMP's runtime at all (an ``if`` clause still does)
        f"  if (ember_num_threads > 1 && total_ > 1 && total_ * {gen.work} >= "
        f"{OMP_MIN_ITERATIONS}) {{",
        "    #pragma omp parallel for num_threads(ember_num_threads)",
        "    for (int64_t p_ = 0; p_ < total_; p_++) {",
        "\n".join("  " + line for line in run.split("\n")),
        "    }",
        "    return;",
        "  }",
        "#endif",
        "  for (int64_t p_ = 0; p_ < total_; p_++) {",
        run,
        "  }", "}", "#endif", ""])
    return src, f"{base}_grid", params, h


def compile_kernel(jf: Any, bound: list) -> CompiledKernel:
    """Compile one specialization of ``jf`` (type-check, generate C)."""
    src, grid_fn, params, _ = kernel_c(jf, bound)
    return CompiledKernel(jf.__name__, src, grid_fn, params, jf.stored_params())


def store_value(dt: str, value: str) -> str:
    """C converting a computed value to the tensor's storage dtype ``dt``."""
    return store_expr(dt, value)


__all__ = ["CompiledKernel", "Gen", "KernelTypeError", "access", "compile_kernel", "kernel_c",
           "stored_params"]
