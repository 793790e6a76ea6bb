/* float16/bfloat16 <-> float32 conversions of contiguous arrays for eager ops
   (ember/ops/_half_c.py): NumPy's float16 cast is a scalar loop (~4 ns a value) and
   ml_dtypes' bfloat16 cast a per-element call, so a half elementwise op spent most of its time
   converting.  Here: AVX-512F / F16C vcvtph2ps and vcvtps2ph (round to nearest even, the
   immediate's mode, whatever MXCSR says), bfloat16 by a 16-bit shift and an integer
   round-to-nearest-even; without F16C a portable branch-free conversion.  Bit for bit NumPy's
   and ml_dtypes' casts except signalling NaNs, which the float16 instructions quiet (as
   torch's vectorized conversions do). */
#include <stdint.h>
#include <string.h>
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

static inline uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

#if !defined(__F16C__)
static inline float h2f(uint16_t h) {
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13, ex = o & 0x0f800000u;
    o += (127u - 15u) << 23;
    if (ex == 0x0f800000u) o += (128u - 16u) << 23;
    else if (ex == 0) o = f2u(u2f(o + (1u << 23)) - u2f(113u << 23));
    return u2f(o | (((uint32_t)h & 0x8000u) << 16));
}
static inline uint16_t f2h(float x) {
    uint32_t f = f2u(x), sign = f & 0x80000000u, o;
    f ^= sign;
    if (f >= 0x47800000u) {
        uint32_t nan = 0x7c00u | ((f & 0x007fffffu) >> 13);
        o = f > 0x7f800000u ? (nan == 0x7c00u ? 0x7c01u : nan) : 0x7c00u;
    } else if (f < 0x38800000u) {
        o = f2u(u2f(f) + 0.5f) - 0x3f000000u;
    } else {
        o = (f + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((f >> 13) & 1u)) >> 13;
    }
    return (uint16_t)(o | (sign >> 16));
}
#endif

void ember_eager_f16_to_f32(float *restrict d, const uint16_t *restrict s, int64_t n) {
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
    for (; j < n; j++) d[j] = h2f(s[j]);
#endif
}

void ember_eager_f32_to_f16(uint16_t *restrict d, const float *restrict s, int64_t n) {
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
    for (; j < n; j++) d[j] = f2h(s[j]);
#endif
}

void ember_eager_bf16_to_f32(float *restrict d, const uint16_t *restrict s, int64_t n) {
    uint32_t *restrict o = (uint32_t *)d;
    for (int64_t j = 0; j < n; j++) o[j] = (uint32_t)s[j] << 16;
}

/* round to nearest even; NaN -> the quiet NaN 0x7fc0 with the sign (ml_dtypes) */
void ember_eager_f32_to_bf16(uint16_t *restrict d, const float *restrict s, int64_t n) {
    const uint32_t *restrict u = (const uint32_t *)s;
    for (int64_t j = 0; j < n; j++) {
        uint32_t v = u[j];
        uint32_t r = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16;
        uint32_t nan = ((v >> 16) & 0x8000u) | 0x7fc0u;
        d[j] = (uint16_t)((v & 0x7fffffffu) > 0x7f800000u ? nan : r);
    }
}
