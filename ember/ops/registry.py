"""The op registry: one ``OpDef`` per operation (ARCHITECTURE.md §2).

An OpDef is a name with its rule table, registered next to its kernels:

* ``meta(*inputs, **params) -> (shape, dtype)`` (or a tuple of those for multi-output ops): the
  shape/dtype rule.  It reads only ``.shape``/``.dtype`` of tensor inputs, so it works on eager
  tensors, lazy tensors and symbolic sizes alike, and it validates and raises clear errors.
* ``eager(*arrays, **params) -> ndarray | tuple``: the NumPy kernel.  Tensor inputs arrive as
  NumPy arrays; Python scalar inputs arrive unchanged.
* ``vjp(ctx, *grads) -> tuple``: the gradient, one entry per input (``None`` where there is none),
  written with ember tensor methods so that it traces and compiles too.  ``ctx`` exposes the
  saved inputs/outputs (``save`` / ``save_output``), the input shapes/dtypes and the params.
* ``c_expr``/``lower``/``decomp``: how the compiler lowers the op (filled in by the compiler
  issues; a pointwise op carries its C expression here already where it is obvious).
  ``c_expr`` is a C template over the inputs ``{0}``, ``{1}``, ... and params ``{name}``
  (``"({0} + {1})"``), or, where a param picks the formula, a dict ``{param: {value:
  template}}`` (gelu: ``{"approximate": {"none": ..., "tanh": ...}}``); the selecting param is
  not substituted.  ``c_template(params)`` returns the template for a node's params (None when
  that value has none) and ``c_templates()`` every template (for conformance tests).
  Templates call the C prelude's type-generic ``ember_*`` helpers and write constants as
  ``ember_like({0}, c)`` so one template serves float32, float64 and float16/bfloat16 (computed
  in float32).
  ``decomp(*inputs, **params)``: the op written with ember tensor methods (and ``bind`` of
  other ops), computing what ``eager`` computes; the C backend expands an op that has no C rule
  into what it records (``ember/compiler/c/decompose.py``).  Only the forward's lowering
  changes: gradients still come from ``vjp``.  Leave it None where ``eager`` raises on values.

Primitives are strict: no broadcasting, no type promotion, no defaults.  Tensor inputs of a
pointwise primitive share one shape and one dtype; Python scalars may stand in for tensor inputs
(already of the right kind).  The frontend (``ember/_C``-free Python in ``ember/functional``)
broadcasts, promotes and fills defaults.

Passes ask an op's ``kind`` and ``tags``, never its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

KINDS = frozenset({
    "pointwise",   # elementwise over same-shaped inputs
    "reduction",   # reduces dims
    "scan",        # cumulative ops
    "view",        # output aliases input 0 (no copy)
    "movement",    # copies data into a new layout (cat, flip, roll, ...)
    "index",       # gather/scatter style
    "extern",      # library calls (matmul, conv, sort)
    "creation",    # makes tensors from params (arange, full, ...)
    "random",      # draws from the Philox stream
    "composite",   # fused kernel of a composite op (softmax, layer_norm, ...)
})

TAGS = frozenset({
    "nondifferentiable",   # has no gradient (comparisons, argmax, integer ops)
    "data_dependent",      # output shape depends on values (nonzero, masked_select, unique)
    "inplace",             # writes into input 0
    "lowp_upcast",         # float16/bfloat16 computed in float32 and rounded
    "multi_output",
    "random",
    "bijective",           # a view/movement whose output holds every input element exactly once
    "strided_reshape",     # a view by a new shape: valid only for some input strides (view)
    "scalar_passthrough",  # its float params never decide its output specs, and its decomp
                           # hands each to a primitive unchanged (no arithmetic on them): the
                           # compiler may lift them (optim_step.adam_step)
})


class _DtypeOnly:
    """A 0-d stand-in for a tensor input of a pointwise ``meta`` (``OpDef.check_dtypes``)."""

    __slots__ = ("dtype",)
    shape = ()
    ndim = 0

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype


@dataclass(frozen=True)
class OpDef:
    """One operation: its rules side by side."""

    name: str
    kind: str
    meta: Callable[..., Any]
    eager: Callable[..., Any]
    vjp: Callable[..., tuple] | None = None
    tags: frozenset[str] = frozenset()
    num_outputs: int = 1                # 0: a variable number (split, unbind), meta says
    save: tuple[int, ...] = ()          # indices of inputs the vjp reads
    # finer: input i's gradient reads inputs save_for[i] (only those inputs needing a gradient
    # cause saving, so ``x.mul_(2)`` does not save ``x``)
    save_for: dict[int, tuple[int, ...]] | None = field(default=None, compare=False)
    # whether the vjp reads the output(s): True for all, or the indices of those it reads (batch
    # norm reads its statistics, not its normalized output, so an in-place op may follow it)
    save_output: bool | tuple[int, ...] = False
    # C template of a pointwise op ("({0} + {1})"), or {param: {value: template}} (see above)
    c_expr: str | dict[str, dict[Any, str]] | None = None
    lower: Callable[..., Any] | None = None
    decomp: Callable[..., Any] | None = None
    doc: str = ""
    grad_name: str = field(default="", compare=False)
    # params whose numbers are structure, never lifted under dynamic=True (as PyTorch
    # specializes a convolution's stride or a pad's widths): another value is another graph
    static_params: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        assert self.kind in KINDS, (self.name, self.kind)
        assert self.tags <= TAGS, (self.name, self.tags - TAGS)
        if not self.grad_name:
            camel = "".join(p[:1].upper() + p[1:] for p in self.name.split("_"))
            object.__setattr__(self, "grad_name", f"{camel}Backward0")
        # the NumPy ufunc a ``lowp`` eager kernel wraps (the binder's fast path), else None
        object.__setattr__(self, "_ufunc", getattr(self.eager, "_ufunc", None))
        # the input dtype signatures the eager fast paths have seen ``meta`` accept (they skip
        # ``meta`` otherwise, so an unsupported dtype would run the kernel): dtype -> True,
        # (dtype, dtype or scalar type) -> True
        object.__setattr__(self, "_dtypes_ok", {})

    def check_dtypes(self, inputs: tuple, params: dict) -> None:
        """Raise ``meta``'s dtype error for these inputs, if any.  The eager pointwise fast
        paths skip ``meta`` (the output dtype is read off the kernel's result): the first call
        with a signature (the inputs' dtypes or scalar types, and the params) runs ``meta``,
        later ones look the signature up."""
        key = tuple(getattr(x, "_dtype", x.__class__) for x in inputs)
        if params:
            try:
                key += tuple(params.items())
                hash(key)
            except TypeError:  # a list-valued param: always checked
                self.meta(*inputs, **params)
                return
        ok = self._dtypes_ok
        if key not in ok:
            # shapes are the frontend's business (a 0-d operand reaches the primitive as it
            # is): meta sees 0-d stand-ins with the inputs' dtypes
            self.meta(*[_DtypeOnly(x._dtype) if hasattr(x, "_dtype") else x for x in inputs],
                      **params)
            ok[key] = True

    @property
    def c_selector(self) -> str | None:
        """The param whose value picks the ``c_expr`` template (None for a single template)."""
        return next(iter(self.c_expr)) if isinstance(self.c_expr, dict) else None

    def c_template(self, params: dict) -> str | None:
        """The ``c_expr`` template for a node with ``params`` (None if there is none)."""
        if isinstance(self.c_expr, dict):
            key = self.c_selector
            return self.c_expr[key].get(params.get(key))
        return self.c_expr

    def c_templates(self) -> list[tuple[dict, str]]:
        """Every ``(selecting params, template)`` pair of ``c_expr``."""
        if self.c_expr is None:
            return []
        if isinstance(self.c_expr, dict):
            key = self.c_selector
            return [({key: v}, t) for v, t in self.c_expr[key].items()]
        return [({}, self.c_expr)]

    @property
    def differentiable(self) -> bool:
        return self.vjp is not None

    def __repr__(self) -> str:
        return f"<OpDef {self.name} ({self.kind})>"


REGISTRY: dict[str, OpDef] = {}


class OpNamespace:
    """The registered OpDefs as attributes: ``OPS.softmax is REGISTRY["softmax"]``, so a rule
    table names OpDef objects (a misspelt op fails where it is named, at import).

    >>> OPS.relu.kind
    'pointwise'
    """

    def __getattr__(self, name: str) -> OpDef:
        try:
            return REGISTRY[name]
        except KeyError:
            raise AttributeError(f"[OPS] no op named {name!r}") from None

    def __dir__(self) -> list[str]:
        return sorted(REGISTRY)


OPS = OpNamespace()


def register(op: OpDef) -> OpDef:
    """Add ``op`` to the registry; names are unique."""
    assert op.name not in REGISTRY, f"op {op.name!r} registered twice"
    REGISTRY[op.name] = op
    return op


# ---------------------------------------------------------------------------------------------
# Binding.  The Tensor layer installs the real binder at import time (dependency injection keeps
# this layer free of upward imports).  Gradient formulas mostly use tensor methods; where they
# need a primitive directly they call ``bind``.

_binder: Callable[[OpDef, tuple, dict], Any] | None = None


def install_binder(fn: Callable[[OpDef, tuple, dict], Any]) -> None:
    global _binder
    _binder = fn


def bind(op: OpDef, *inputs: Any, **params: Any) -> Any:
    """Run ``op`` on ``inputs`` in the current mode (eager now; lazy under compile)."""
    return _binder(op, inputs, params)  # type: ignore[misc]  (installed by ember.tensor)
