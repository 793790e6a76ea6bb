/* non-temporal stores (ember/compiler/c/codegen/stream.py) */
#if defined(__AVX__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <string.h>
static inline void ember_stream_store(void *restrict dst, const void *restrict src, size_t n) {
  char *d = (char *)dst;
  const char *s = (const char *)src;
#if defined(__AVX512F__) || defined(__AVX__)
  size_t head = (size_t)(-(uintptr_t)d & 63);
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head; s += head; n -= head;
#if defined(__AVX512F__)
  for (; n >= 64; n -= 64, d += 64, s += 64)
    _mm512_stream_si512((__m512i *)d, _mm512_loadu_si512((const void *)s));
#else
  for (; n >= 32; n -= 32, d += 32, s += 32)
    _mm256_stream_si256((__m256i *)d, _mm256_loadu_si256((const __m256i *)s));
#endif
#endif
  memcpy(d, s, n);
}
static inline void ember_stream_fence(void) {
#if defined(__AVX512F__) || defined(__AVX__)
  _mm_sfence();
#endif
}
