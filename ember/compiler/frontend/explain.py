"""``ember.compiler.explain(fn)(*args)``: what compiling ``fn`` does on these arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ember.compiler.frontend import api, backends


@dataclass
class BreakReason:
    """One graph break: what needed values, and the user's frames (outermost first)."""

    reason: str
    user_stack: list

    def __str__(self) -> str:
        lines = [f"  Reason: {self.reason}", "  User Stack:"]
        for fs in self.user_stack:
            lines.append(f"    File \"{fs.filename}\", line {fs.lineno}, in {fs.name}")
            if fs.line:
                lines.append(f"      {fs.line.strip()}")
        return "\n".join(lines)


@dataclass
class ExplainOutput:
    """Graphs, breaks (with reasons and user stacks), ops, recompiles, compile times, and the
    ops the C backend would run as eager externs: ``extern_count``, ``externs`` (``(op,
    reason)`` over all graphs) and ``externs_per_graph``."""

    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: list = field(default_factory=list)
    recompile_reasons: list = field(default_factory=list)
    compile_times: str = ""
    extern_count: int = 0
    externs: list = field(default_factory=list)
    externs_per_graph: list = field(default_factory=list)

    def __str__(self) -> str:
        out = [f"Graph Count: {self.graph_count}",
               f"Graph Break Count: {self.graph_break_count}",
               f"Op Count: {self.op_count}"]
        if self.break_reasons:
            out.append("Break Reasons:")
            for i, b in enumerate(self.break_reasons, 1):
                out.append(f"  Break Reason {i}:")
                out.append("  " + str(b).replace("\n", "\n  "))
        if self.ops_per_graph:
            out.append("Ops per Graph:")
            for i, ops in enumerate(self.ops_per_graph, 1):
                out.append(f"  Ops {i}:")
                out.extend(f"    {o}" for o in ops)
        if self.recompile_reasons:
            out.append("Recompile Reasons:")
            out.extend(f"  {r}" for r in self.recompile_reasons)
        out.append(f"Extern Count: {self.extern_count}")
        if self.externs:
            out.append("Externs (eager fallbacks in the C backend):")
            counts: dict = {}
            for e in self.externs:
                counts[e] = counts.get(e, 0) + 1
            out.extend(f"  {op} x{n}: {why}" for (op, why), n in counts.items())
        out.append(f"Compile Times: {self.compile_times}")
        return "\n".join(out) + "\n"


def explain(fn: Callable, *extra_args: Any, **extra_kwargs: Any) -> Callable:
    """``explain(fn)(*args, **kwargs) -> ExplainOutput``: resets the compile caches, runs
    ``fn`` compiled once with the eager backend, and reports what happened (each graph is also
    lowered for the C backend, without building it, to list the ops it would run as externs).

    >>> out = ember.compiler.explain(f)(x)                           # doctest: +SKIP
    >>> out.extern_count, out.externs
    (1, [('index_put', 'index op (no C lowering yet)')])
    """
    def inner(*args: Any, **kwargs: Any) -> ExplainOutput:
        api.reset()
        ev = api._Events()
        api._EVENTS.append(ev)
        try:
            cf = fn if isinstance(fn, api.CompiledFunction) else \
                api.compile(fn, backend="eager")
            cf(*extra_args, *args, **extra_kwargs, **kwargs)
        finally:
            api._EVENTS.remove(ev)
        ops = [g.ops() for g in ev.graphs]
        times = ", ".join(f"{t * 1e3:.2f} ms" for t in ev.compile_times)
        ext = [backends.fallback_report(g) or [] for g in ev.graphs]
        return ExplainOutput(
            extern_count=sum(len(e) for e in ext), externs=[e for x in ext for e in x],
            externs_per_graph=ext,
            graphs=list(ev.graphs), graph_count=len(ev.graphs),
            graph_break_count=len(ev.breaks),
            break_reasons=[BreakReason(r, s) for r, s in ev.breaks],
            op_count=sum(len(o) for o in ops), ops_per_graph=ops,
            recompile_reasons=list(ev.recompile_reasons),
            compile_times=f"graph compile times: [{times}]")
    return inner


__all__ = ["BreakReason", "ExplainOutput", "explain"]
