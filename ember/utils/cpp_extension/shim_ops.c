/* ------------------------------------------------------------------ stable ops in C */
/* visit every element of `a` (and the matching element of `b`, broadcast when b has stride 0):
 * fn(ptr_a, ptr_b, ctx) */
typedef void (*ElemFn)(char* a, const char* b, void* ctx);

static void for_each(EmberTensorHandle a, const int64_t* b_strides, const char* b_data,
                     int64_t b_elsize, ElemFn fn, void* ctx) {
  int64_t ndim = NDIM(a), idx[64] = {0};
  int64_t n = numel_of(ndim, SIZES(a));
  char* pa = (char*)a->dl.data + a->dl.byte_offset;
  const char* pb = b_data;
  int64_t ea = ELSIZE(a);
  for (int64_t k = 0; k < n; k++) {
    fn(pa, pb, ctx);
    for (int64_t d = ndim - 1; d >= 0; d--) {
      pa += STRIDES(a)[d] * ea;
      if (pb) pb += b_strides[d] * b_elsize;
      if (++idx[d] < SIZES(a)[d]) break;
      pa -= STRIDES(a)[d] * ea * SIZES(a)[d];
      if (pb) pb -= b_strides[d] * b_elsize * SIZES(a)[d];
      idx[d] = 0;
    }
  }
}

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static double read_f64(const char* p, EmberScalarType d) {
  switch (d) {
    case EMBER_STABLE_UINT8: return *(const uint8_t*)p;
    case EMBER_STABLE_INT8: return *(const int8_t*)p;
    case EMBER_STABLE_INT16: return *(const int16_t*)p;
    case EMBER_STABLE_INT32: return *(const int32_t*)p;
    case EMBER_STABLE_INT64: return (double)*(const int64_t*)p;
    case EMBER_STABLE_FLOAT16: return (double)*(const _Float16*)p;
    case EMBER_STABLE_FLOAT32: return *(const float*)p;
    case EMBER_STABLE_FLOAT64: return *(const double*)p;
    case EMBER_STABLE_BOOL: return *(const uint8_t*)p != 0;
    case EMBER_STABLE_BFLOAT16: return bf16_to_f32(*(const uint16_t*)p);
    default: return 0;
  }
}
static void write_f64(char* p, EmberScalarType d, double v) {
  switch (d) {
    case EMBER_STABLE_UINT8: *(uint8_t*)p = (uint8_t)(int64_t)v; break;
    case EMBER_STABLE_INT8: *(int8_t*)p = (int8_t)(int64_t)v; break;
    case EMBER_STABLE_INT16: *(int16_t*)p = (int16_t)(int64_t)v; break;
    case EMBER_STABLE_INT32: *(int32_t*)p = (int32_t)(int64_t)v; break;
    case EMBER_STABLE_INT64: *(int64_t*)p = (int64_t)v; break;
    case EMBER_STABLE_FLOAT16: *(_Float16*)p = (_Float16)v; break;
    case EMBER_STABLE_FLOAT32: *(float*)p = (float)v; break;
    case EMBER_STABLE_FLOAT64: *(double*)p = v; break;
    case EMBER_STABLE_BOOL: *(uint8_t*)p = v != 0; break;
    case EMBER_STABLE_BFLOAT16: *(uint16_t*)p = f32_to_bf16((float)v); break;
    default: break;
  }
}
static int is_complex(EmberScalarType d) {
  return d == EMBER_STABLE_COMPLEX64 || d == EMBER_STABLE_COMPLEX128;
}

typedef struct { int64_t elsize; char value[16]; } FillCtx;
static void fill_one(char* a, const char* b, void* ctx) {
  (void)b;
  FillCtx* c = ctx;
  memcpy(a, c->value, (size_t)c->elsize);
}

EmberStableError ember_stable_fill_(EmberTensorHandle self, double value) {
  CHECK_HANDLE(self);
  FillCtx c = {ELSIZE(self), {0}};
  if (is_complex(self->scalar_type)) {
    if (self->scalar_type == EMBER_STABLE_COMPLEX64) {
      float re = (float)value;
      memcpy(c.value, &re, 4);
    } else {
      memcpy(c.value, &value, 8);
    }
  } else {
    write_f64(c.value, self->scalar_type, value);
  }
  for_each(self, NULL, NULL, 0, fill_one, &c);
  return 0;
}

EmberStableError ember_stable_zero_(EmberTensorHandle self) {
  CHECK_HANDLE(self);
  FillCtx c = {ELSIZE(self), {0}};
  for_each(self, NULL, NULL, 0, fill_one, &c);
  return 0;
}

typedef struct { int64_t elsize; EmberScalarType to, from; } CopyCtx;
static void copy_same(char* a, const char* b, void* ctx) {
  memcpy(a, b, (size_t)((CopyCtx*)ctx)->elsize);
}
static void copy_convert(char* a, const char* b, void* ctx) {
  CopyCtx* c = ctx;
  if (c->from == EMBER_STABLE_INT64 && c->to != EMBER_STABLE_FLOAT16 &&
      c->to != EMBER_STABLE_BFLOAT16 && c->to != EMBER_STABLE_FLOAT32 &&
      c->to != EMBER_STABLE_FLOAT64) {
    int64_t v = *(const int64_t*)b;  /* integer to integer: no trip through double */
    switch (c->to) {
      case EMBER_STABLE_UINT8: *(uint8_t*)a = (uint8_t)v; break;
      case EMBER_STABLE_INT8: *(int8_t*)a = (int8_t)v; break;
      case EMBER_STABLE_INT16: *(int16_t*)a = (int16_t)v; break;
      case EMBER_STABLE_INT32: *(int32_t*)a = (int32_t)v; break;
      default: *(uint8_t*)a = v != 0; break;
    }
    return;
  }
  write_f64(a, c->to, read_f64(b, c->from));
}

EmberStableError ember_stable_copy_(EmberTensorHandle self, EmberTensorHandle src,
                                    int32_t non_blocking) {
  (void)non_blocking;
  CHECK_HANDLE(self);
  CHECK_HANDLE(src);
  int64_t nd = NDIM(self), ns = NDIM(src), bstrides[64];
  if (ns > nd)
    return fail(EMBER_STABLE_FAILURE, "copy_: the source of %lld dims cannot be broadcast to "
                "%lld dims", (long long)ns, (long long)nd);
  for (int64_t i = 0; i < nd; i++) {  /* src broadcast to self's shape, as PyTorch's copy_ */
    int64_t j = i - (nd - ns);
    int64_t sz = j >= 0 ? SIZES(src)[j] : 1;
    if (sz != SIZES(self)[i] && sz != 1)
      return fail(EMBER_STABLE_FAILURE, "copy_: The size of tensor a (%lld) must match the "
                  "size of tensor b (%lld) at non-singleton dimension %lld",
                  (long long)SIZES(self)[i], (long long)sz, (long long)i);
    bstrides[i] = (j >= 0 && sz != 1) ? STRIDES(src)[j] : 0;
  }
  if (is_complex(self->scalar_type) != is_complex(src->scalar_type) ||
      (is_complex(self->scalar_type) && self->scalar_type != src->scalar_type))
    return fail(EMBER_STABLE_NOT_IMPLEMENTED, "copy_: from %s to %s is not supported",
                DTYPES[src->scalar_type].name, DTYPES[self->scalar_type].name);
  CopyCtx c = {ELSIZE(self), self->scalar_type, src->scalar_type};
  const char* data = (const char*)src->dl.data + src->dl.byte_offset;
  for_each(self, bstrides, data, ELSIZE(src),
           self->scalar_type == src->scalar_type ? copy_same : copy_convert, &c);
  return 0;
}

EmberStableError ember_stable_empty_like(EmberTensorHandle self, EmberTensorHandle* out) {
  CHECK_HANDLE(self);
  return new_tensor(SIZES(self), NDIM(self), self->scalar_type, 0, out);
}

EmberStableError ember_stable_clone(EmberTensorHandle self, EmberTensorHandle* out) {
  EmberStableError e = ember_stable_empty_like(self, out);
  if (e) return e;
  e = ember_stable_copy_(*out, self, 0);
  if (e) {
    ember_stable_tensor_release(*out);
    *out = NULL;
  }
  return e;
}

EmberStableError ember_stable_new_empty(EmberTensorHandle self, const int64_t* sizes,
                                        int64_t ndim, const EmberScalarType* dtype,
                                        EmberTensorHandle* out) {
  CHECK_HANDLE(self);
  return new_tensor(sizes, ndim, dtype ? *dtype : self->scalar_type, 0, out);
}

EmberStableError ember_stable_new_zeros(EmberTensorHandle self, const int64_t* sizes,
                                        int64_t ndim, const EmberScalarType* dtype,
                                        EmberTensorHandle* out) {
  CHECK_HANDLE(self);
  return new_tensor(sizes, ndim, dtype ? *dtype : self->scalar_type, 1, out);
}

EmberStableError ember_stable_empty(const int64_t* sizes, int64_t ndim, EmberScalarType dtype,
                                    EmberTensorHandle* out) {
  return new_tensor(sizes, ndim, dtype, 0, out);
}

EmberStableError ember_stable_narrow(EmberTensorHandle self, int64_t dim, int64_t start,
                                     int64_t length, EmberTensorHandle* out) {
  CHECK_HANDLE(self);
  if (NDIM(self) == 0)
    return fail(EMBER_STABLE_FAILURE, "narrow() cannot be applied to a 0-dim tensor.");
  EmberStableError e = wrap_dim("narrow", dim, NDIM(self), &dim);
  if (e) return e;
  int64_t size = SIZES(self)[dim];
  if (start < -size || start > size)
    return fail(EMBER_STABLE_INDEX_ERROR, "narrow: start out of range (expected to be in "
                "range of [%lld, %lld], but got %lld)", (long long)-size, (long long)size,
                (long long)start);
  if (start < 0) start += size;
  if (length < 0 || start + length > size)
    return fail(EMBER_STABLE_FAILURE, "narrow: start (%lld) + length (%lld) exceeds dimension "
                "size (%lld).", (long long)start, (long long)length, (long long)size);
  *out = make_handle(self->storage, NDIM(self), SIZES(self), STRIDES(self),
                     self->scalar_type, OFFSET(self) + start * STRIDES(self)[dim]);
  if (!*out) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  (*out)->dims[dim] = length;
  return 0;
}

EmberStableError ember_stable_transpose(EmberTensorHandle self, int64_t dim0, int64_t dim1,
                                        EmberTensorHandle* out) {
  CHECK_HANDLE(self);
  EmberStableError e = wrap_dim("transpose", dim0, NDIM(self), &dim0);
  if (!e) e = wrap_dim("transpose", dim1, NDIM(self), &dim1);
  if (e) return e;
  *out = make_handle(self->storage, NDIM(self), SIZES(self), STRIDES(self),
                     self->scalar_type, OFFSET(self));
  if (!*out) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  if (NDIM(self) == 0) return 0;
  int64_t* s = (*out)->dims;
  int64_t* st = s + NDIM(self);
  int64_t t = s[dim0]; s[dim0] = s[dim1]; s[dim1] = t;
  t = st[dim0]; st[dim0] = st[dim1]; st[dim1] = t;
  return 0;
}

EmberStableError ember_stable_reshape(EmberTensorHandle self, const int64_t* sizes,
                                      int64_t ndim, EmberTensorHandle* out) {
  CHECK_HANDLE(self);
  int64_t shape[64], known = 1, infer = -1, n = numel_of(NDIM(self), SIZES(self));
  if (ndim > 64) return fail(EMBER_STABLE_INVALID_ARGUMENT, "reshape: at most 64 dims");
  for (int64_t i = 0; i < ndim; i++) {
    shape[i] = sizes[i];
    if (sizes[i] == -1) {
      if (infer >= 0) return fail(EMBER_STABLE_FAILURE, "only one dimension can be inferred");
      infer = i;
    } else {
      known *= sizes[i];
    }
  }
  if (infer >= 0 && known != 0 && n % known == 0) shape[infer] = n / known;
  if (numel_of(ndim, shape) != n || (infer >= 0 && known == 0))
    return fail(EMBER_STABLE_FAILURE, "shape '[...]' is invalid for input of size %lld",
                (long long)n);
  int32_t contiguous;
  ember_stable_is_contiguous(self, &contiguous);
  if (contiguous) {
    int64_t strides[64];
    contiguous_strides(ndim, shape, strides);
    *out = make_handle(self->storage, ndim, shape, strides, self->scalar_type, OFFSET(self));
    return *out ? 0 : fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  }
  EmberTensorHandle copy;
  EmberStableError e = ember_stable_clone(self, &copy);
  if (e) return e;
  e = ember_stable_reshape(copy, sizes, ndim, out);
  ember_stable_tensor_release(copy);
  return e;
}

/* ------------------------------------------------------------------ version 3: tensor lists */
EmberStableError ember_stable_tensor_list_new(uint64_t count, StableIValue** out) {
  if (!out) return fail(EMBER_STABLE_INVALID_ARGUMENT, "tensor_list_new: NULL out");
  if (count > ((uint64_t)1 << 32))
    return fail(EMBER_STABLE_INVALID_ARGUMENT, "tensor_list_new: %llu tensors is too many",
                (unsigned long long)count);
  *out = calloc((size_t)count + 1, sizeof(StableIValue));
  if (!*out) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  (*out)[0] = count;
  return 0;
}

EmberStableError ember_stable_tensor_list_release(StableIValue* list) {
  if (!list) return 0;
  for (uint64_t i = 0; i < list[0]; i++) {
    ember_stable_tensor_release((EmberTensorHandle)list[1 + i]);
  }
  free(list);
  return 0;
}
