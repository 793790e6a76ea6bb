/* ember's side of the stable C ABI (ember/include/ember/stable/c/shim.h): built by the system
 * compiler on first use, cached, loaded with RTLD_GLOBAL so extensions resolve their
 * ember_stable_* symbols here.  Tensors are DLPack buffers: memory that Python lends for one
 * call (an argument) or memory this library allocates (results, released with the last handle).
 * amax and pad call back into ember through a table of function pointers that Python fills. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/stable/c/shim.h"

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------ errors */
static _Thread_local EmberStableError last_code = 0;
static _Thread_local char last_message[2048];

const char* ember_stable_get_last_error_message(void) { return last_message; }
EmberStableError ember_stable_get_last_error_code(void) { return last_code; }
void ember_stable_clear_error(void) { last_code = 0; last_message[0] = 0; }
void ember_stable_set_error(EmberStableError code, const char* message) {
  last_code = code ? code : EMBER_STABLE_FAILURE;
  snprintf(last_message, sizeof last_message, "%s", message ? message : "");
}
static EmberStableError fail(EmberStableError code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static EmberStableError fail(EmberStableError code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  last_code = code;
  return code;
}
uint64_t ember_stable_abi_version(void) { return EMBER_STABLE_ABI_VERSION; }

/* ------------------------------------------------------------------ dtypes */
typedef struct { uint8_t code, bits; const char* name; } DTypeInfo;
static const DTypeInfo DTYPES[30] = {
    [EMBER_STABLE_UINT8] = {kDLUInt, 8, "uint8"},     [EMBER_STABLE_INT8] = {kDLInt, 8, "int8"},
    [EMBER_STABLE_INT16] = {kDLInt, 16, "int16"},     [EMBER_STABLE_INT32] = {kDLInt, 32, "int32"},
    [EMBER_STABLE_INT64] = {kDLInt, 64, "int64"},
    [EMBER_STABLE_FLOAT16] = {kDLFloat, 16, "float16"},
    [EMBER_STABLE_FLOAT32] = {kDLFloat, 32, "float32"},
    [EMBER_STABLE_FLOAT64] = {kDLFloat, 64, "float64"},
    [EMBER_STABLE_COMPLEX64] = {kDLComplex, 64, "complex64"},
    [EMBER_STABLE_COMPLEX128] = {kDLComplex, 128, "complex128"},
    [EMBER_STABLE_BOOL] = {kDLBool, 8, "bool"},
    [EMBER_STABLE_BFLOAT16] = {kDLBfloat, 16, "bfloat16"},
};
static int valid_dtype(EmberScalarType d) {
  return d >= 0 && d < 30 && DTYPES[d].bits != 0;
}

/* ------------------------------------------------------------------ storages and handles */
typedef struct {
  atomic_long refcount;  /* handles that point here */
  void* base;
  int64_t nbytes;
  int32_t lent;          /* memory lent by Python for one call (never freed here) */
  int32_t arg_index;     /* which argument lent it, -1 otherwise */
} Storage;

struct EmberTensorOpaque {
  DLTensor dl;
  Storage* storage;
  EmberScalarType scalar_type;
  int64_t dims[];        /* sizes then strides */
};

static EmberTensorHandle make_handle(Storage* s, int64_t ndim, const int64_t* sizes,
                                     const int64_t* strides, EmberScalarType dtype,
                                     int64_t offset) {
  EmberTensorHandle t = malloc(sizeof(*t) + 2 * (size_t)ndim * sizeof(int64_t) + 8);
  if (!t) return NULL;
  memcpy(t->dims, sizes, (size_t)ndim * sizeof(int64_t));
  memcpy(t->dims + ndim, strides, (size_t)ndim * sizeof(int64_t));
  t->dl.data = s->base;
  t->dl.device.device_type = kDLCPU;
  t->dl.device.device_id = 0;
  t->dl.ndim = (int32_t)ndim;
  t->dl.dtype.code = DTYPES[dtype].code;
  t->dl.dtype.bits = DTYPES[dtype].bits;
  t->dl.dtype.lanes = 1;
  t->dl.shape = t->dims;
  t->dl.strides = t->dims + ndim;
  t->dl.byte_offset = (uint64_t)(offset * (DTYPES[dtype].bits / 8));
  t->storage = s;
  t->scalar_type = dtype;
  atomic_fetch_add(&s->refcount, 1);
  return t;
}

static void storage_unref(Storage* s) {
  if (atomic_fetch_sub(&s->refcount, 1) == 1) {
    if (!s->lent) free(s->base);
    free(s);
  }
}

EmberStableError ember_stable_tensor_release(EmberTensorHandle t) {
  if (!t) return EMBER_STABLE_SUCCESS;
  storage_unref(t->storage);
  free(t);
  return EMBER_STABLE_SUCCESS;
}

#define CHECK_HANDLE(t) \
  if (!(t)) return fail(EMBER_STABLE_INVALID_ARGUMENT, "%s: the tensor handle is NULL", __func__)
#define NDIM(t) ((int64_t)(t)->dl.ndim)
#define SIZES(t) ((t)->dims)
#define STRIDES(t) ((t)->dims + NDIM(t))
#define ELSIZE(t) ((int64_t)DTYPES[(t)->scalar_type].bits / 8)
#define OFFSET(t) ((int64_t)(t)->dl.byte_offset / ELSIZE(t))

EmberStableError ember_stable_tensor_new_handle(EmberTensorHandle t, EmberTensorHandle* out) {
  CHECK_HANDLE(t);
  *out = make_handle(t->storage, NDIM(t), SIZES(t), STRIDES(t), t->scalar_type, OFFSET(t));
  return *out ? EMBER_STABLE_SUCCESS : fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
}

static int64_t numel_of(int64_t ndim, const int64_t* sizes) {
  int64_t n = 1;
  for (int64_t i = 0; i < ndim; i++) n *= sizes[i];
  return n;
}

static void contiguous_strides(int64_t ndim, const int64_t* sizes, int64_t* strides) {
  int64_t s = 1;
  for (int64_t i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
}

/* a new contiguous tensor whose memory this library owns */
static EmberStableError new_tensor(const int64_t* sizes, int64_t ndim, EmberScalarType dtype,
                                   int zero, EmberTensorHandle* out) {
  if (!valid_dtype(dtype)) return fail(EMBER_STABLE_DTYPE_ERROR, "unknown scalar type %d", dtype);
  if (ndim > 64) return fail(EMBER_STABLE_INVALID_ARGUMENT, "at most 64 dims, got %lld",
                             (long long)ndim);
  if (ndim < 0 || (ndim > 0 && !sizes))
    return fail(EMBER_STABLE_INVALID_ARGUMENT, "sizes must be given for %lld dims",
                (long long)ndim);
  for (int64_t i = 0; i < ndim; i++)
    if (sizes[i] < 0)
      return fail(EMBER_STABLE_INVALID_ARGUMENT,
                  "Trying to create tensor with negative dimension %lld",
                  (long long)sizes[i]);
  int64_t nbytes = numel_of(ndim, sizes) * (DTYPES[dtype].bits / 8);
  Storage* s = calloc(1, sizeof(Storage));
  size_t rounded = ((size_t)nbytes + 63) / 64 * 64;
  void* base = aligned_alloc(64, rounded ? rounded : 64);
  if (!s || !base) {
    free(s);
    free(base);
    return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory allocating %lld bytes",
                (long long)nbytes);
  }
  if (zero) memset(base, 0, (size_t)nbytes);
  s->base = base;
  s->nbytes = nbytes;
  s->arg_index = -1;
  int64_t strides[64];
  contiguous_strides(ndim, sizes, strides);
  *out = make_handle(s, ndim, sizes, strides, dtype, 0);
  if (!*out) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  return EMBER_STABLE_SUCCESS;
}

/* ------------------------------------------------------------------ accessors */
EmberStableError ember_stable_get_dlpack(EmberTensorHandle t, const DLTensor** out) {
  CHECK_HANDLE(t);
  *out = &t->dl;
  return 0;
}
EmberStableError ember_stable_get_data_ptr(EmberTensorHandle t, void** out) {
  CHECK_HANDLE(t);
  *out = (char*)t->dl.data + t->dl.byte_offset;
  return 0;
}
EmberStableError ember_stable_get_dim(EmberTensorHandle t, int64_t* out) {
  CHECK_HANDLE(t);
  *out = NDIM(t);
  return 0;
}
EmberStableError ember_stable_get_numel(EmberTensorHandle t, int64_t* out) {
  CHECK_HANDLE(t);
  *out = numel_of(NDIM(t), SIZES(t));
  return 0;
}
EmberStableError ember_stable_get_sizes(EmberTensorHandle t, const int64_t** out) {
  CHECK_HANDLE(t);
  *out = SIZES(t);
  return 0;
}
EmberStableError ember_stable_get_strides(EmberTensorHandle t, const int64_t** out) {
  CHECK_HANDLE(t);
  *out = STRIDES(t);
  return 0;
}
static EmberStableError wrap_dim(const char* op, int64_t dim, int64_t ndim, int64_t* out) {
  int64_t n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n)
    return fail(EMBER_STABLE_INDEX_ERROR,
                "%s: Dimension out of range (expected to be in range of [%lld, %lld], but got "
                "%lld)", op, (long long)-n, (long long)(n - 1), (long long)dim);
  *out = dim < 0 ? dim + n : dim;
  return 0;
}
EmberStableError ember_stable_get_size(EmberTensorHandle t, int64_t dim, int64_t* out) {
  CHECK_HANDLE(t);
  EmberStableError e = wrap_dim("size", dim, NDIM(t), &dim);
  if (e) return e;
  *out = NDIM(t) ? SIZES(t)[dim] : 1;
  return 0;
}
EmberStableError ember_stable_get_stride(EmberTensorHandle t, int64_t dim, int64_t* out) {
  CHECK_HANDLE(t);
  EmberStableError e = wrap_dim("stride", dim, NDIM(t), &dim);
  if (e) return e;
  *out = NDIM(t) ? STRIDES(t)[dim] : 1;
  return 0;
}
EmberStableError ember_stable_get_storage_offset(EmberTensorHandle t, int64_t* out) {
  CHECK_HANDLE(t);
  *out = OFFSET(t);
  return 0;
}
EmberStableError ember_stable_get_element_size(EmberTensorHandle t, int64_t* out) {
  CHECK_HANDLE(t);
  *out = ELSIZE(t);
  return 0;
}
EmberStableError ember_stable_get_scalar_type(EmberTensorHandle t, EmberScalarType* out) {
  CHECK_HANDLE(t);
  *out = t->scalar_type;
  return 0;
}
EmberStableError ember_stable_get_device_type(EmberTensorHandle t, int32_t* out) {
  CHECK_HANDLE(t);
  *out = t->dl.device.device_type;
  return 0;
}
EmberStableError ember_stable_get_device_index(EmberTensorHandle t, int32_t* out) {
  CHECK_HANDLE(t);
  *out = -1; /* PyTorch: a CPU tensor's device index is -1 */
  return 0;
}
EmberStableError ember_stable_is_cpu(EmberTensorHandle t, int32_t* out) {
  CHECK_HANDLE(t);
  *out = t->dl.device.device_type == kDLCPU;
  return 0;
}
EmberStableError ember_stable_is_contiguous(EmberTensorHandle t, int32_t* out) {
  CHECK_HANDLE(t);
  int64_t expected = 1;
  *out = 1;
  for (int64_t i = NDIM(t) - 1; i >= 0; i--) {
    if (SIZES(t)[i] == 1) continue;
    if (STRIDES(t)[i] != expected) {
      *out = 0;
      break;
    }
    expected *= SIZES(t)[i];
  }
  return 0;
}

