/* Eager GELU (erf form), last-dim softmax and float16/bfloat16 arithmetic in one pass
   (ember/ops/_act_c.py).  Built after the C backend's prelude (ember_prelude.h: ember_expf,
   ember_normal_cdff, the float16/bfloat16 scalar conversions), half_block.h (block
   conversions in vector registers) and row_exp.h (softmax's exp pass), so eager and compiled
   code run the same float math:
   - gelu: x * Phi(x) with the prelude's Phi (the compiled template's expression), float32 in
     and out, or float16/bfloat16 loaded in blocks of EMBER_HB, computed in float and rounded
     once (PyTorch's CPU kernels compute reduced floats in float32 and round once);
   - softmax over rows of C: max, exp(x - m) and its sum (row_exp.h), e * (1 / sum), as the
     compiled row kernel (codegen/unit.py _row_kernel); half rows are converted once into a
     float row, rounded once at the end;
   - half add/sub/mul/div: both operands loaded in blocks, the float32 operation, one rounding
     per element (PyTorch's per-op rounding); a Python scalar operand is a float.
   Everything is branch-free in its inner loops, so gcc vectorizes it for the host's ISA
   (-march=native: AVX-512 or AVX2/F16C; tests build it for x86-64-v3 and x86-64-v4). */


static inline float ember_gelu1(float x) { return ember_gelu_erff(x); }

/* GELU's inputs are prefetched one page ahead, per block of 64 values (a prefetch inside the
   vector loop would stop it vectorizing): at 2^24 values from memory the loop otherwise ran at
   1.0-2.3 ns a value depending on the input's and output's offsets within a 4 KiB page (the
   hardware's stream prefetcher stops at page boundaries), and at 0.7 with it (the compiled
   kernels do the same: codegen/prefetch.py stream_prefetch) */
#define EMBER_GELU_PF_BYTES 4096
void ember_eager_gelu_f32(float *restrict y, const float *restrict x, int64_t n) {
    for (int64_t b = 0; b < n; b += 64) {
        const int64_t e = n - b < 64 ? n - b : 64;
        for (int l = 0; l < 64; l += 16)
            __builtin_prefetch(x + b + EMBER_GELU_PF_BYTES / 4 + l, 0, 3);
        for (int64_t j = b; j < b + e; j++) y[j] = ember_gelu1(x[j]);
    }
}

#define EMBER_HALF_GELU(sfx)                                                              \
void ember_eager_gelu_##sfx(uint16_t *restrict y, const uint16_t *restrict x, int64_t n) { \
    float b[EMBER_HB];                                                                    \
    for (int64_t i = 0; i < n; i += EMBER_HB) {                                           \
        const int64_t nb = n - i < EMBER_HB ? n - i : EMBER_HB;                           \
        for (int l = 0; l < EMBER_HB; l += 32)                                            \
            __builtin_prefetch(x + i + EMBER_GELU_PF_BYTES / 2 + l, 0, 3);                \
        ember_##sfx##_load_n(b, x + i, nb);                                               \
        for (int64_t j = 0; j < nb; j++) b[j] = ember_gelu1(b[j]);                        \
        ember_##sfx##_store_n(y + i, b, nb);                                              \
    }                                                                                     \
}
EMBER_HALF_GELU(f16)
EMBER_HALF_GELU(bf16)

/* softmax of one float row x into y (y may be x), the compiled row kernel's helpers
   (row_exp.h): the max, exp(x - m) and its sum, the multiplication by 1 / sum */
static void ember_softmax_row(float *y, const float *x, int64_t C, const char *pf) {
    const float m = ember_row_max(x, C);
    ember_row_scale(y, ember_row_expsum(y, x, m, C, pf, 4), C);
}

/* w: a float scratch of C values (the caller's, per thread); stream != 0 (a large output, as
   the compiled row kernels decide): each row is built in w and written with non-temporal
   stores (no read for ownership of the output); each row's exp pass prefetches the next */
void ember_eager_softmax_f32(float *restrict y, const float *restrict x, int64_t rows,
                             int64_t C, float *restrict w, int stream) {
    for (int64_t r = 0; r < rows; r++) {
        const char *pf = r + 1 < rows ? (const char *)(x + (r + 1) * C) : NULL;
        ember_softmax_row(stream ? w : y + r * C, x + r * C, C, pf);
        if (stream) ember_stream_store(y + r * C, w, (size_t)C * sizeof(float));
    }
    if (stream) ember_stream_fence();
}

/* half rows: w is a float scratch of 2 C values (the caller's, per thread): the row as floats,
   exp in place, scaled and rounded once in one pass (streamed: into w + C, then copied) */
#define EMBER_HALF_SOFTMAX(sfx)                                                           \
void ember_eager_softmax_##sfx(uint16_t *restrict y, const uint16_t *restrict x,          \
                               int64_t rows, int64_t C, float *restrict w, int stream) {  \
    uint16_t *o = (uint16_t *)(w + C);                                                    \
    for (int64_t r = 0; r < rows; r++) {                                                  \
        const char *pf = r + 1 < rows ? (const char *)(x + (r + 1) * C) : NULL;           \
        ember_##sfx##_load_n(w, x + r * C, C);                                            \
        const float m = ember_row_max(w, C);                                              \
        const float s = ember_row_expsum(w, w, m, C, pf, 2);                              \
        ember_row_scale_##sfx(stream ? o : y + r * C, w, s, C);                           \
        if (stream) ember_stream_store(y + r * C, o, (size_t)C * 2);                      \
    }                                                                                     \
    if (stream) ember_stream_fence();                                                     \
}
EMBER_HALF_SOFTMAX(f16)
EMBER_HALF_SOFTMAX(bf16)

/* log_softmax over rows of C: (x - m) - log(sum exp(x - m)) with the compiled row kernel's
   helpers and order (row_exp.h, the prelude's logf); half rows (w: the caller's float scratch
   of C values) keep the sum and its log in the dtype, as PyTorch's last-dim CPU kernel and the
   compiled half row kernel do, and round each output once */
void ember_eager_log_softmax_f32(float *restrict y, const float *restrict x, int64_t rows,
                                 int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        const float m = ember_row_max(xr, C);
        const float ls = ember_logf(ember_row_expsum(NULL, xr, m, C, NULL, 4));
        for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - m) - ls;
    }
}

#define EMBER_HALF_LOG_SOFTMAX(sfx)                                                       \
void ember_eager_log_softmax_##sfx(uint16_t *restrict y, const uint16_t *restrict x,      \
                                   int64_t rows, int64_t C, float *restrict w) {          \
    for (int64_t r = 0; r < rows; r++) {                                                  \
        ember_##sfx##_load_n(w, x + r * C, C);                                            \
        const float m = ember_row_max(w, C);                                              \
        const float s = ember_round_##sfx(ember_row_expsum(NULL, w, m, C, NULL, 4));      \
        const float ls = ember_round_##sfx(ember_logf(s));                                \
        for (int64_t c = 0; c < C; c++) w[c] = (w[c] - m) - ls;                           \
        ember_##sfx##_store_n(y + r * C, w, C);                                           \
    }                                                                                     \
}
EMBER_HALF_LOG_SOFTMAX(f16)
EMBER_HALF_LOG_SOFTMAX(bf16)

/* y = a op b for float16/bfloat16 a, b (either may be NULL: then the float scalar as_ / bs
   in every lane), op 0 add, 1 subtract, 2 multiply, 3 divide */
static inline void ember_binary_block(float *restrict o, const float *restrict u,
                                      const float *restrict v, int64_t nb, int op) {
    switch (op) {
    case 0: for (int64_t j = 0; j < nb; j++) o[j] = u[j] + v[j]; break;
    case 1: for (int64_t j = 0; j < nb; j++) o[j] = u[j] - v[j]; break;
    case 2: for (int64_t j = 0; j < nb; j++) o[j] = u[j] * v[j]; break;
    default: for (int64_t j = 0; j < nb; j++) o[j] = u[j] / v[j]; break;
    }
}

#define EMBER_HALF_BINARY(sfx)                                                            \
void ember_eager_binary_##sfx(uint16_t *restrict y, const uint16_t *restrict a,           \
                              const uint16_t *restrict b, float as_, float bs, int64_t n, \
                              int op) {                                                   \
    float fa[EMBER_HB], fb[EMBER_HB], o[EMBER_HB];                                        \
    for (int j = 0; j < EMBER_HB; j++) { fa[j] = as_; fb[j] = bs; }                       \
    for (int64_t i = 0; i < n; i += EMBER_HB) {                                           \
        const int64_t nb = n - i < EMBER_HB ? n - i : EMBER_HB;                           \
        if (a) ember_##sfx##_load_n(fa, a + i, nb);                                       \
        if (b && b != a) ember_##sfx##_load_n(fb, b + i, nb);                                     \
        ember_binary_block(o, fa, a == b ? fa : fb, nb, op);                              \
        ember_##sfx##_store_n(y + i, o, nb);                                              \
    }                                                                                     \
}
EMBER_HALF_BINARY(f16)
EMBER_HALF_BINARY(bf16)
