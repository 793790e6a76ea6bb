/* bfloat16 <-> float32 one value at a time (round to nearest even, NaN kept quiet), for the
 * eager kernels that reduce bfloat16 in float32: the distributed collectives (symm_mem.c,
 * shm_all_reduce.c).  Prepended to their source text by the Python that builds them. */
#include <stdint.h>
#include <string.h>

static inline float bf16_to_f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest even */
    return (uint16_t)(u >> 16);
}

