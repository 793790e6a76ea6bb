"""``ember.compiler.explain(fn)(*args)``: what compiling ``fn`` does on these arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ember.compiler.frontend import api


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
    """Graphs, breaks (with reasons and user stacks), ops, recompiles and compile times."""

    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: list = field(default_factory=list)
    recompile_reasons: list = field(default_factory=list)
    compile_times: str = ""

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
        out.append(f"Compile Times: {self.compile_times}")
        return "\n".join(out) + "\n"


def explain(fn: Callable, *extra_args: Any, **extra_kwargs: Any) -> Callable:
    """``explain(fn)(*args, **kwargs) -> ExplainOutput``: resets the compile caches, runs
    ``fn`` compiled once with the eager backend, and reports what happened."""
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
        return ExplainOutput(
            graphs=list(ev.graphs), graph_count=len(ev.graphs),
            graph_break_count=len(ev.breaks),
            break_reasons=[BreakReason(r, s) for r, s in ev.breaks],
            op_count=sum(len(o) for o in ops), ops_per_graph=ops,
            recompile_reasons=list(ev.recompile_reasons),
            compile_times=f"graph compile times: [{times}]")
    return inner


__all__ = ["BreakReason", "ExplainOutput", "explain"]
