"""The C prelude of the C backend: ``csrc/ember_prelude.h`` as text, the helpers it defines,
how dtypes map to C, and how an OpDef's ``c_expr`` template is rendered.

Generated translation units start with ``PRELUDE`` (or ``#include "ember_prelude.h"`` with
``include_dir()`` on the include path).  ``build_test_lib`` is a small test-only compiler
driver; the cached toolchain lives in ``ember/compiler/c/build/toolchain.py``.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["PRELUDE", "C_TYPES", "COMPUTE_TYPES", "helpers", "include_dir", "render_c_expr",
           "c_literal", "load_expr", "store_expr", "lowp_variants", "build_test_lib", "CFLAGS"]

_PATH = Path(__file__).with_name("csrc") / "ember_prelude.h"
PRELUDE: str = _PATH.read_text()

# gcc flags of the C backend (docs/compiler_prelude.md): never -ffast-math
CFLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=off")

# storage type of each dtype in C, and the type its values are computed in
C_TYPES = {"bool": "bool", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t",
           "int32": "int32_t", "int64": "int64_t", "float16": "uint16_t",
           "bfloat16": "uint16_t", "float32": "float", "float64": "double"}
COMPUTE_TYPES = {**C_TYPES, "float16": "float", "bfloat16": "float"}


def include_dir() -> str:
    """The directory holding ``ember_prelude.h`` (for ``-I``)."""
    return str(_PATH.parent)


def pasted_helpers(text: str) -> set[str]:
    """The float16/bfloat16 helpers ``text`` writes once in a macro and pastes per dtype
    (``ember_logit_##H`` with ``EMBER__LOWP_HELPERS(f16)`` defines ``ember_logit_f16``)."""
    bases = re.findall(r"EMBER_INLINE\s+[\w ]+?\s\**(ember_\w+)##H\s*\(", text)
    return {b + h for h in re.findall(r"^EMBER__LOWP_HELPERS\((\w+)\)", text, re.M)
            for b in bases}


def helpers() -> list[str]:
    """Names the prelude defines (functions and function-like macros), sorted."""
    names = set(re.findall(r"EMBER_INLINE\s+[\w ]+?\s\**(ember_\w+)\s*\(", PRELUDE))
    names |= set(re.findall(r"#define\s+(ember_\w+)\(", PRELUDE))
    names |= pasted_helpers(PRELUDE)
    return sorted(n for n in names if not n.startswith("ember__"))


def load_expr(dtype_name: str, ref: str) -> str:
    """C expression reading the value at ``ref`` (an lvalue) in its compute type."""
    if dtype_name == "float16":
        return f"ember_f16_to_f32({ref})"
    if dtype_name == "bfloat16":
        return f"ember_bf16_to_f32({ref})"
    return ref


def store_expr(dtype_name: str, value: str) -> str:
    """C expression converting ``value`` (any arithmetic C type) to ``dtype``'s storage, with
    one rounding as NumPy's casts (float64 -> float16 rounds directly, not via float)."""
    if dtype_name == "float16":
        return f"ember_to_f16({value})"
    if dtype_name == "bfloat16":
        return f"ember_to_bf16({value})"
    return f"(({C_TYPES[dtype_name]})({value}))"


def c_literal(value: Any) -> str:
    """A Python scalar as a C literal: floats are exact double literals (``0x1.8p+1``)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        if value == -(2 ** 63):
            return "(-9223372036854775807LL - 1)"
        return f"{value}LL" if -(2 ** 63) < value < 2 ** 63 else f"{value}ULL"
    v = float(value)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    return f"({v.hex()})" if v < 0 else v.hex()


def _none_param(op_name: str, key: str, dtype_name: str) -> str:
    # nan_to_num: None means the output dtype's largest / lowest finite value
    if op_name == "nan_to_num" and key in ("posinf", "neginf"):
        from ember import dtypes as dt
        d = getattr(dt, dtype_name)
        if not d.is_floating_point:          # integers pass through unchanged
            return "0.0"
        info = dt.finfo(d)
        return c_literal(float(info.max if key == "posinf" else info.min))
    # logit: eps=None is NaN (the prelude's ember_logit clamps only for a number)
    return "NAN"


def render_c_expr(op: Any, args: list[str], params: dict | None = None,
                  dtype_name: str = "float32") -> str:
    """The ``c_expr`` of OpDef ``op`` with ``{i}`` replaced by the C expressions ``args``
    (values in their compute type) and ``{name}`` by params: numbers as exact double
    literals, a dtype as its C storage type, None as the op's documented default."""
    params = params or {}
    template = op.c_template(params)
    if template is None:
        raise ValueError(f"[render_c_expr] op {op.name} has no c_expr for params {params}")
    params = {k: v for k, v in params.items() if k != op.c_selector}

    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key.isdigit():
            return f"({args[int(key)]})"
        v = params[key]
        if v is None:
            return _none_param(op.name, key, dtype_name)
        if hasattr(v, "np") and hasattr(v, "name"):           # an ember dtype
            # a cast to float16/bfloat16 is done by the store (one rounding from any source
            # type); double holds every source value the store needs exactly
            return "double" if v.name in ("float16", "bfloat16") else C_TYPES[v.name]
        return c_literal(v)

    return lowp_variants(re.sub(r"\{(\w+)\}", sub, template), dtype_name)


def lowp_variants(text: str, dtype_name: str) -> str:
    """``text`` with the helpers that have a float16/bfloat16 variant renamed to it
    (``ember_div_trunc`` -> ``ember_div_trunc_f16``) when ``dtype_name`` is one of those."""
    if dtype_name not in ("float16", "bfloat16"):
        return text
    suffix = "f16" if dtype_name == "float16" else "bf16"
    return re.sub(rf"\b({'|'.join(_LOWP_VARIANTS)})\(", rf"\1_{suffix}(", text)


# helpers with a float16/bfloat16 variant (``ember_div_trunc_f16``): the eager kernel rounds an
# intermediate to the low-precision dtype
_LOWP_VARIANTS = ("ember_div_trunc", "ember_logit", "ember_dtype_round", "ember_np_sign",
                  "ember_digamma", "ember_trigamma")


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "gcc"))


def build_test_lib(c_source: str, extra_flags: tuple = (), opt_info: bool = False,
                   target: tuple[str, ...] | None = None, load: bool = True) -> Any:
    """Test-only: compile ``c_source`` (the prelude is on the include path) with the backend's
    flags (``CFLAGS`` and ``toolchain.machine_flags()``) into a fresh temporary directory and
    load it.  ``target`` (e.g. ``("-march=x86-64-v3",)``) replaces ``-march=native`` and the
    machine flags, to build for an ISA other than the host's.  Returns the ``ctypes.CDLL`` (the
    library's path with ``load=False``: code for an ISA the host lacks must not run); with
    ``opt_info`` returns ``(lib, gcc_stderr)`` (``-fopt-info-vec-optimized`` output)."""
    cc = _compiler()
    if cc is None:
        raise RuntimeError("[build_test_lib] no C compiler (gcc) on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="ember_prelude_"))
    src = tmp / "k.c"
    src.write_text(c_source)
    out = tmp / "k.so"
    if target is None:
        from ember.compiler.c.build.toolchain import machine_flags
        flags = [*CFLAGS, *machine_flags()]
    else:
        flags = [f for f in CFLAGS if f != "-march=native"] + list(target)
    cmd = [cc, *flags, *extra_flags, "-I", include_dir(), str(src), "-o", str(out), "-lm"]
    if opt_info:
        cmd.insert(1, "-fopt-info-vec-optimized")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"[build_test_lib] gcc failed on {src}:\n{proc.stderr[-4000:]}")
    lib = ctypes.CDLL(str(out)) if load else str(out)
    return (lib, proc.stderr) if opt_info else lib
