"""OpenMP pragmas of the generated loops: when a loop is split over the threads, and how."""

from __future__ import annotations

from typing import Any

# below this many iterations a kernel runs on one thread (an OpenMP fork/join costs ~µs)
OMP_MIN_ITERATIONS = 32768


def omp_for(iterations: str, simd: bool = False) -> str:
    """The pragma that splits the next loop over the runtime's thread count.  The ``if`` keeps
    small loops and one-thread runs (``ember.set_num_threads(1)``, a fork()ed child) off the
    thread pool: libgomp then runs the loop on the calling thread.  ``simd`` (a pointwise loop
    whose iterations touch only their own elements) also vectorizes it: see ``omp_loops``."""
    cond = f"ember_num_threads > 1 && {iterations} >= {OMP_MIN_ITERATIONS}"
    if simd:
        return (f"#pragma omp parallel for simd num_threads(ember_num_threads) "
                f"if(parallel: {cond})")
    return f"#pragma omp parallel for num_threads(ember_num_threads) if({cond})"


def few_iterations(sizes: Any) -> bool:
    """True when the loop ranges are all known and their product stays below the threshold at
    which ``omp_for``'s ``if`` would start threads: the loop then gets no parallel pragma at
    all (the same serial run, without gcc outlining a region that never runs in parallel,
    which costs about a third of the compile time of a small graph)."""
    total = 1
    for n in sizes:
        if type(n) is not int:
            return False
        total *= n
    return total < OMP_MIN_ITERATIONS


def omp_loops(loops: list, ind: str, openmp: bool, err: bool = False) -> tuple:
    """Lines opening the loops ``(variable, range)`` of a pointwise kernel or a GEMM epilogue
    (outermost first), and the indent inside them.  With OpenMP the outer loop is split over
    the threads and the innermost one is marked ``simd``: gcc moves a parallel loop into an
    outlined function that sees its buffers through a shared struct, without the ``restrict``
    of the kernel's parameters, and then vectorizes only after run-time alias checks, which it
    gives up on beyond ~10 pairs of buffers (AdamW's update reads 4 and writes 3: it ran scalar,
    ~3x slower).  Each iteration of these loops reads and writes only its own elements (what
    ``parallel for`` already relies on), so ``simd`` changes no result."""
    out = []
    total = " * ".join(f"(int64_t)({n})" for _, n in loops)
    red = " reduction(|:err_)" if err else ""  # ``err``: the body or-s its checks into err_
    threads = openmp and not few_iterations(n for _, n in loops)
    for d, (v, n) in enumerate(loops):
        if threads and d == 0:
            out.append(f"{ind}{omp_for(f'({total})', simd=len(loops) == 1)}{red}")
        elif openmp and d == len(loops) - 1:
            out.append(f"{ind}#pragma omp simd{red}")
        out.append(f"{ind}for (int64_t {v} = 0; {v} < {n}; {v}++) {{")
        ind += "  "
    return out, ind


__all__ = ["OMP_MIN_ITERATIONS", "few_iterations", "omp_for", "omp_loops"]
