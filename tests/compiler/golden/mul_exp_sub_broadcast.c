/* mul exp sub */
static void kernel0(float *restrict buf0, const float *restrict in1, const float *restrict in0, const int64_t *restrict ints, const double *restrict floats) {
  (void)ints; (void)floats;
  for (int64_t i0 = 0; i0 < 3; i0++) {
    for (int64_t i1 = 0; i1 < 4; i1++) {
      const float t0 = (float)(in1[4 * i0 + i1]);
      const float t1 = (float)(in0[i1]);
      const float t2 = (float)((t0 * t1));
      const float t3 = (float)(ember_exp(t2));
      const float t4 = (float)((t3 - t0));
      buf0[4 * i0 + i1] = t4;
    }
  }
}

EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {
  kernel0((float *)bufs[2], (const float *)bufs[0], (const float *)bufs[1], ints, floats);
  return 0;
}
