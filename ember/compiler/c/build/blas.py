"""BLAS for generated C: NumPy's bundled OpenBLAS, called by name from generated code.

``runtime.load_blas()`` finds the OpenBLAS NumPy already loaded (``numpy.libs/libscipy_openblas64_
-<hash>.so``; the hash changes with the NumPy build, so it is found at run time), re-opens it
with ``RTLD_GLOBAL`` and reports its CBLAS symbols (``scipy_cblas_sgemm64_``: ILP64, 64-bit
integer arguments).  ``c_declarations()`` gives generated code the matching prototypes and
``ember_sgemm``/``ember_dgemm`` macros, so a kernel writes::

    ember_sgemm(EMBER_CBLAS_ROW_MAJOR, EMBER_CBLAS_NO_TRANS, EMBER_CBLAS_NO_TRANS,
                m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);

The library must be loaded with ``runtime.load`` (which loads BLAS first when a library has
undefined symbols), never with a plain ``dlopen`` before ``load_blas()``.
"""

from __future__ import annotations

from ember.compiler.c.build.runtime import BlasLibrary, load_blas

__all__ = ["BlasLibrary", "c_declarations", "load_blas"]

# CBLAS enum values (cblas.h); enums are passed as C ints
ROW_MAJOR, COL_MAJOR, NO_TRANS, TRANS = 101, 102, 111, 112


def c_declarations(blas: BlasLibrary | None = None) -> str:
    """C prototypes of the BLAS gemm functions for generated code (empty when there is no
    BLAS; generated code must then use its own GEMM)."""
    blas = blas if blas is not None else load_blas()
    if blas is None:
        return ""
    int_type = "int64_t" if blas.int64 else "int"
    lines = [
        "/* BLAS (compiler/c/build/blas.py); resolved at load time from the global namespace */",
        "#include <stdint.h>",
        f"typedef {int_type} ember_blas_int;",
        f"#define EMBER_CBLAS_ROW_MAJOR {ROW_MAJOR}",
        f"#define EMBER_CBLAS_COL_MAJOR {COL_MAJOR}",
        f"#define EMBER_CBLAS_NO_TRANS {NO_TRANS}",
        f"#define EMBER_CBLAS_TRANS {TRANS}",
    ]
    for symbol, t, macro in ((blas.sgemm, "float", "ember_sgemm"),
                             (blas.dgemm, "double", "ember_dgemm")):
        if symbol is None:
            continue
        lines.append(
            f"extern void {symbol}(int order, int trans_a, int trans_b, ember_blas_int m, "
            f"ember_blas_int n, ember_blas_int k, {t} alpha, const {t} *a, ember_blas_int lda, "
            f"const {t} *b, ember_blas_int ldb, {t} beta, {t} *c, ember_blas_int ldc);")
        lines.append(f"#define {macro} {symbol}")
    return "\n".join(lines) + "\n"
