/* float16 <-> float conversions of n contiguous values in vector registers (codegen/half.py).
   gcc 12 does not vectorize a per-element float16 conversion, F16C or not (it emits one scalar
   vcvtph2ps per value, or ~20 vector bit operations a value for the portable helpers), so
   pointwise and row kernels that touch float16 buffers convert blocks of EMBER_HB values with
   these and run their float body on the block:
   - AVX-512F: 16 values an instruction (vcvtph2ps zmm / vcvtps2ph zmm);
   - F16C (x86-64-v3): 8 values an instruction (ymm);
   - otherwise the prelude's portable helpers (bit for bit NumPy's casts).
   vcvtps2ph with immediate 0 rounds to nearest even (the MXCSR rounding mode is not used), as
   NumPy's cast and torch's CPU kernels do; the only values where the hardware and NumPy differ
   are signalling NaNs (the hardware quiets them; a quiet NaN keeps its payload in both).
   The tails (n not a multiple of the vector length) use the scalar F16C instructions, so one
   kernel never mixes two conversions. */
#ifndef EMBER_HALF_BLOCK_H
#define EMBER_HALF_BLOCK_H
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#define EMBER_HALF_HW 1
#endif
#define EMBER_HB 128

static inline void ember_f16_load_n(float *restrict d, const uint16_t *restrict s, int64_t n) {
    int64_t j = 0;
#if defined(__AVX512F__)
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(d + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + j))));
#endif
#if defined(__F16C__)
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + j))));
    for (; j < n; j++) d[j] = _cvtsh_ss(s[j]);
#else
    for (; j < n; j++) d[j] = ember_f16_to_f32(s[j]);
#endif
}

static inline void ember_f16_store_n(uint16_t *restrict d, const float *restrict s, int64_t n) {
    int64_t j = 0;
#if defined(__AVX512F__)
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i *)(d + j),
                            _mm512_cvtps_ph(_mm512_loadu_ps(s + j), _MM_FROUND_TO_NEAREST_INT));
#endif
#if defined(__F16C__)
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(d + j),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < n; j++) d[j] = _cvtss_sh(s[j], _MM_FROUND_TO_NEAREST_INT);
#else
    for (; j < n; j++) d[j] = ember_f32_to_f16(s[j]);
#endif
}

/* bfloat16: a 16-bit shift each way (with the round-to-nearest-even carry and the quiet NaN of
   ember_f32_to_bf16); plain loops that gcc vectorizes (vpmovzxwd + vpslld, vpmovdw) */
static inline void ember_bf16_load_n(float *restrict d, const uint16_t *restrict s, int64_t n) {
    #pragma omp simd
    for (int64_t j = 0; j < n; j++) d[j] = ember_bf16_to_f32(s[j]);
}

static inline void ember_bf16_store_n(uint16_t *restrict d, const float *restrict s, int64_t n) {
    #pragma omp simd
    for (int64_t j = 0; j < n; j++) d[j] = ember_f32_to_bf16(s[j]);
}
#endif /* EMBER_HALF_BLOCK_H */
