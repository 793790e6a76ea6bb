"""C for ``UserKernel`` (an ``ember.kernel`` launch inside a compiled graph): the kernel's own
program and grid functions (``ember/kernel/_front.py``; guarded, so two launches of one
specialization share them) and a wrapper with the C backend's kernel signature that copies
each stored tensor's input value into its output buffer (when needed) and runs the grid."""

from __future__ import annotations

from ember.compiler.c.ir.kernels import UserKernel
from ember.compiler.c.ir.loop_ir import numel


def kernel_source(k: UserKernel, ints_marker: str = "") -> str:
    """The wrapper's C (after the kernel's own); ``ints_marker``: a line where the entry's
    runtime sizes that it reads (``s<k>``: a symbolic grid, int argument, offset or buffer
    size) are declared."""
    loads, stores = k.buffers()
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    lines = [k.source,
             f"/* {' '.join(k.ops)} */",
             f"static void {k.name}({', '.join(params)}) {{",
             "  (void)ints; (void)floats;"] + ([ints_marker] if ints_marker else [])
    for out, src, off in k.copies:
        at = src.name if off == 0 else f"{src.name} + ({off})"
        lines.append(f"  memcpy({out.name}, {at}, sizeof({out.ctype}) * "
                     f"(size_t)({numel(out.shape)}));")
    args = [str(x) for x in k.grid]
    for a in k.args:
        if a[0] == "lit":
            args.append(a[1])
        else:
            buf, off = a[1], a[2]
            ptr = buf.name if off == 0 else f"{buf.name} + ({off})"
            args.append(ptr if buf in stores else f"({buf.ctype} *)({ptr})")
    lines.append(f"  {k.grid_fn}({', '.join(args)});")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["kernel_source"]
