"""Which registry ops still run as eager externs inside C graphs (docs/compiler.md, known gaps).

Runs every sample of the OpInfo table (forward in every dtype of an entry, gradients in its float
dtypes, and everything again with ``dynamic=True`` in float32) through ``ember.compile`` with a
backend that lowers each graph exactly as the ``"c"`` backend does (``lower.lower``: the same
``LowerStats`` counters, ``stats.fallbacks``) and then runs it eagerly, so no C compiler runs.
Prints, per graph op that stayed an extern, the reasons and the (kind, dtype) cases it was seen
in, and counts the extern-only cases (every graph of every sample all externs: the C conformance
compares eager with eager there and labels them ``extern``).  Cases and samples come from
``tests/opinfo/harness.py``, as in the C conformance.  Usage::

    python benchmarks/extern_census.py [--kinds fwd,grad,dyn] [--ops sum,cumsum] [--json out]
                                       [--markdown] [--write]

``--write`` rewrites ``tests/opinfo/extern_only.txt`` (the expected lowering table).

``--markdown`` prints the list grouped by reason, in the form of docs/compiler.md's known gaps.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(str(Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember  # noqa: E402
from ember.compiler.c import backend as cbackend  # noqa: E402
from tests.opinfo import harness  # noqa: E402
from tests.opinfo.core import to_ember  # noqa: E402


def census(kinds: tuple, only: set | None) -> tuple[dict, dict, set]:
    """({graph op: {reason: set of "kind/dtype"}}, totals {kernels, externs, graphs, cases},
    the extern-only cases {(kind, op name, dtype)}: those whose every compiled sample lowered
    to no C kernel, the cases the C conformance labels ``extern``)."""
    seen: dict = defaultdict(lambda: defaultdict(set))
    totals = {"graphs": 0, "kernels": 0, "externs": 0, "cases": 0}
    kernels = [0]
    case = [""]

    def backend(graph, example_inputs):
        st = cbackend.lower_and_schedule(graph).stats
        totals["graphs"] += 1
        totals["kernels"] += st.kernels
        totals["externs"] += st.externs
        kernels[0] += st.kernels
        for f in st.fallbacks:
            op, reason = f.split(": ", 1)
            seen[op][reason].add(case[0])
        return cbackend._eager_runner(graph)

    extern_only = set()
    for kind in kinds:
        for op, dtype in harness.cases(harness.C_KINDS[kind]):
            if only and op.name not in only:
                continue
            case[0] = f"{kind}/{dtype}"
            kernels[0] = 0
            ran = _run_case(kind, op, dtype, backend)
            totals["cases"] += 1
            if ran and kernels[0] == 0:
                extern_only.add((kind, op.name, dtype))
    return seen, totals, extern_only


def _run_case(kind: str, op, dtype: str, backend) -> int:
    """Compile every sample of the case with ``backend``; the number that ran."""
    ran = 0
    for sample, pos in harness.samples(harness.C_KINDS[kind], op, dtype):
        args = [to_ember(a, i in pos) for i, a in enumerate(sample.args)]
        if kind == "grad":
            def fn(*xs, _op=op, _s=sample, _p=pos):
                return harness.grads(_op, _s, list(xs), _p)
        else:
            def fn(*xs, _op=op, _s=sample):
                return harness.call(_op, _s, xs)
        ember.compiler.reset()
        try:
            ember.compile(fn, backend=backend, dynamic=True if kind == "dyn" else None)(*args)
        except Exception:  # noqa: BLE001, S112 - error samples are other tests' business
            continue
        ran += 1
    return ran


def write_extern_only(extern_only: set, totals: dict) -> None:
    lines = ["# C conformance cases (kind op dtype) whose every graph runs as eager externs:",
             "# they compare eager with eager.  Written by benchmarks/extern_census.py --write",
             f"# ({len(extern_only)} of {totals['cases']} cases)."]
    lines += [" ".join(c) for c in sorted(extern_only)]
    harness.EXTERN_ONLY_FILE.write_text("\n".join(lines) + "\n")


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
    ap.add_argument("--write", action="store_true",
                    help="write tests/opinfo/extern_only.txt (the C conformance's labels)")
    ap.add_argument("--markdown", action="store_true",
                    help="print the list grouped by reason, as in docs/compiler.md")
    a = ap.parse_args()
    seen, totals, extern_only = census(tuple(a.kinds.split(",")),
                                       set(filter(None, a.ops.split(","))))
    print(f"graphs {totals['graphs']}, C kernels {totals['kernels']}, "
          f"externs {totals['externs']}; cases {totals['cases']}, extern-only "
          f"{len(extern_only)}")
    if a.write:
        assert a.kinds == "fwd,grad,dyn" and not a.ops, "--write needs the whole table"
        write_extern_only(extern_only, totals)
    if a.markdown:
        print(markdown(seen))
    for op in sorted(seen) if not a.markdown else ():
        print(op)
        for reason, cases in sorted(seen[op].items()):
            print(f"    {reason}: {', '.join(sorted(cases))}")
    if a.json:
        externs = {op: {r: sorted(c) for r, c in rs.items()} for op, rs in seen.items()}
        Path(a.json).write_text(json.dumps(
            {"totals": totals, "extern_only": sorted(extern_only), "externs": externs}, indent=1))


if __name__ == "__main__":
    main()
