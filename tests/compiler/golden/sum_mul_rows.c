/* mul sum (reduction) */
static int kernel0(float *restrict buf0, const float *restrict in1, const float *restrict in0, const int64_t *restrict ints, const double *restrict floats) {
  int err_ = 0;
  (void)ints; (void)floats;
  for (int64_t o0 = 0; o0 < 4; o0++) {
    const int pf_ = o0 + 1 < (4);
    double a0;
    {
    double a0_l[16];
    for (int j_ = 0; j_ < 16; j_++) a0_l[j_] = 0;
    int64_t r0_b = 0;
    for (; r0_b + 16 <= (40); r0_b += 16) {
      if (pf_) __builtin_prefetch(in1 + (40 * (o0 + 1) + r0_b) + 0, 0, 3);
      _Pragma("GCC unroll 1")
      for (int64_t j_ = 0; j_ < 16; j_++) {
        const int64_t r0 = r0_b + j_;
        const float t0 = (float)(in1[40 * o0 + r0]);
        const float t1 = (float)(in0[r0]);
        const float t2 = (float)((t0 * t1));
        a0_l[j_] = a0_l[j_] + ((double)(t2));
      }
    }
    for (int64_t r0 = r0_b; r0 < (40); r0++) {
      const float t0 = (float)(in1[40 * o0 + r0]);
      const float t1 = (float)(in0[r0]);
      const float t2 = (float)((t0 * t1));
      a0_l[0] = a0_l[0] + ((double)(t2));
    }
    a0 = a0_l[0];
    for (int j_ = 1; j_ < 16; j_++) a0 = a0 + a0_l[j_];
    }
    const float f1 = (float)(((float)(a0)));
    buf0[o0] = f1;
  }
  return err_;
}

EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {
  kernel0((float *)bufs[2], (const float *)bufs[0], (const float *)bufs[1], ints, floats);
  return 0;
}
