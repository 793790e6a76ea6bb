/* Eager fma (ember/ops/_fma_c.py): out = fma(a, b, c) rounded once.  One loop per operand
   layout (m: bit 0/1/2 set when a/b/c is an array, else the scalar sa/sb/sc, passed as a double
   that holds the dtype's value exactly), so the compiler vectorizes each loop with the fma
   instruction; out may be c (same index: read before written). */
#include <math.h>
#include <stddef.h>
#define LOOP(F, A, B, C) for (ptrdiff_t i = 0; i < n; i++) out[i] = F(A, B, C);
#define KERNEL(NAME, T, F) \
void NAME(int m, const T *restrict a, const T *restrict b, const T *restrict c, \
          T *restrict out, ptrdiff_t n, double sa, double sb, double sc) { \
    const T a0 = (T)sa, b0 = (T)sb, c0 = (T)sc; \
    switch (m) { \
    case 0: { T r = F(a0, b0, c0); for (ptrdiff_t i = 0; i < n; i++) out[i] = r; } break; \
    case 1: LOOP(F, a[i], b0, c0) break; \
    case 2: LOOP(F, a0, b[i], c0) break; \
    case 3: LOOP(F, a[i], b[i], c0) break; \
    case 4: LOOP(F, a0, b0, c[i]) break; \
    case 5: LOOP(F, a[i], b0, c[i]) break; \
    case 6: LOOP(F, a0, b[i], c[i]) break; \
    default: LOOP(F, a[i], b[i], c[i]) break; \
    } \
}
KERNEL(ember_eager_fma_f32, float, fmaf)
KERNEL(ember_eager_fma_f64, double, fma)
