"""Which registry ops still run as eager externs inside C graphs (docs/compiler.md, known gaps).

Runs every sample of the OpInfo table (forward in every dtype of an entry, gradients in its float
dtypes, and everything again with ``dynamic=True`` in float32) through ``ember.compile`` with a
backend that lowers each graph exactly as the ``"c"`` backend does (``lower.lower``: the same
``LowerStats`` counters, ``stats.fallbacks``) and then runs it eagerly, so no C compiler runs.
Prints, per graph op that stayed an extern, the reasons and the (kind, dtype) cases it was seen
in.  Usage::

    python benchmarks/extern_census.py [--kinds fwd,grad,dyn] [--ops sum,cumsum] [--json out]
                                       [--markdown]

``--markdown`` prints the list grouped by reason, in the form of docs/compiler.md's known gaps.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember  # noqa: E402
from ember.compiler.c import backend as cbackend  # noqa: E402
from tests.compiler.test_conformance import _call, _float_positions, _grads  # noqa: E402
from tests.opinfo import ALL_OPINFOS  # noqa: E402
from tests.opinfo.core import FLOATS, to_ember  # noqa: E402


def census(kinds: tuple, only: set | None) -> tuple[dict, dict]:
    """({graph op: {reason: set of "kind/dtype"}}, totals {kernels, externs, graphs})."""
    seen: dict = defaultdict(lambda: defaultdict(set))
    totals = {"graphs": 0, "kernels": 0, "externs": 0}
    case = [""]

    def backend(graph, example_inputs):
        st = cbackend.lower_and_schedule(graph).stats
        totals["graphs"] += 1
        totals["kernels"] += st.kernels
        totals["externs"] += st.externs
        for f in st.fallbacks:
            op, reason = f.split(": ", 1)
            seen[op][reason].add(case[0])
        return cbackend._eager_runner(graph)

    for op in ALL_OPINFOS:
        if only and op.name not in only:
            continue
        plans = []
        if "fwd" in kinds:
            plans += [("fwd", d) for d in op.dtypes if d not in op.xfail]
        if "grad" in kinds and op.grad:
            plans += [("grad", d) for d in sorted(set(op.grad_dtypes) | (set(FLOATS) &
                                                                         set(op.dtypes)))
                      if d not in op.xfail]
        if "dyn" in kinds and "float32" in op.dtypes and "float32" not in op.xfail:
            plans.append(("dyn", "float32"))
        for kind, dtype in plans:
            case[0] = f"{kind}/{dtype}"
            for sample in op.samples(dtype, op.rng(dtype)):
                pos = _float_positions(sample) if kind == "grad" else []
                if kind == "grad" and not (sample.grad and pos):
                    continue
                args = [to_ember(a, i in pos) for i, a in enumerate(sample.args)]
                if kind == "grad":
                    def fn(*xs, _op=op, _s=sample, _p=pos):
                        return _grads(_op, _s, list(xs), _p)
                else:
                    def fn(*xs, _op=op, _s=sample):
                        return _call(_op, _s, xs)
                ember.compiler.reset()
                try:
                    ember.compile(fn, backend=backend,
                                  dynamic=True if kind == "dyn" else None)(*args)
                except Exception:  # noqa: BLE001, S112 - error samples are other tests' business
                    continue
    return seen, totals


_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
          "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
          "bool": "bool"}
_KINDS = ("fwd", "grad", "dyn")


def markdown(seen: dict) -> str:
    """One bullet per reason (most ops first): each op with its cases, e.g. ``(fwd f32/f64;
    grad f32)``, wrapped at 100 columns."""
    by_reason: dict = defaultdict(dict)
    for op, reasons in seen.items():
        for reason, cases in reasons.items():
            by_reason[reason][op] = cases
    order = list(_SHORT)
    lines = []
    for reason in sorted(by_reason, key=lambda r: (-len(by_reason[r]), r)):
        items = []
        for op in sorted(by_reason[reason]):
            kinds: dict = defaultdict(list)
            for case in by_reason[reason][op]:
                kind, dtype = case.split("/")
                kinds[kind].append(dtype)
            parts = [f"{k} " + "/".join(_SHORT.get(d, d) for d in sorted(
                kinds[k], key=lambda d: order.index(d) if d in order else len(order)))
                for k in _KINDS if k in kinds]
            items.append(f"`{op}` ({'; '.join(parts)})")
        lines.append(textwrap.fill(f"* *{reason}*: " + ", ".join(items), width=100,
                                   subsequent_indent="  ", break_on_hyphens=False))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="fwd,grad,dyn")
    ap.add_argument("--ops", default="", help="OpInfo names (comma-separated), default all")
    ap.add_argument("--json", default="", help="write the census to this file")
    ap.add_argument("--markdown", action="store_true",
                    help="print the list grouped by reason, as in docs/compiler.md")
    a = ap.parse_args()
    seen, totals = census(tuple(a.kinds.split(",")), set(filter(None, a.ops.split(","))))
    print(f"graphs {totals['graphs']}, C kernels {totals['kernels']}, "
          f"externs {totals['externs']}")
    if a.markdown:
        print(markdown(seen))
    for op in sorted(seen) if not a.markdown else ():
        print(op)
        for reason, cases in sorted(seen[op].items()):
            print(f"    {reason}: {', '.join(sorted(cases))}")
    if a.json:
        Path(a.json).write_text(json.dumps(
            {"totals": totals, "externs": {op: {r: sorted(c) for r, c in rs.items()}
                                           for op, rs in seen.items()}}, indent=1))


if __name__ == "__main__":
    main()
