/* ------------------------------------------------------------------ ops ember computes */
typedef EmberStableError (*HostAmax)(EmberTensorHandle, const int64_t*, int64_t, int32_t,
                                     EmberTensorHandle*);
typedef EmberStableError (*HostPad)(EmberTensorHandle, const int64_t*, int64_t, const char*,
                                    double, EmberTensorHandle*);
static HostAmax host_amax;
static HostPad host_pad;

EXPORT void ember_stable_py_set_host(HostAmax amax, HostPad pad) {
  host_amax = amax;
  host_pad = pad;
}

EmberStableError ember_stable_amax(EmberTensorHandle self, const int64_t* dims, int64_t ndims,
                                   int32_t keepdim, EmberTensorHandle* out) {
  CHECK_HANDLE(self);
  if (!host_amax) return fail(EMBER_STABLE_NOT_IMPLEMENTED, "amax: ember is not attached");
  *out = NULL;
  return host_amax(self, dims, ndims, keepdim, out);
}

EmberStableError ember_stable_pad(EmberTensorHandle self, const int64_t* pad, int64_t npad,
                                  const char* mode, double value, EmberTensorHandle* out) {
  CHECK_HANDLE(self);
  if (!host_pad) return fail(EMBER_STABLE_NOT_IMPLEMENTED, "pad: ember is not attached");
  *out = NULL;
  return host_pad(self, pad, npad, mode ? mode : "constant", value, out);
}

/* ------------------------------------------------------------------ devices and streams */
struct EmberDeviceGuardOpaque { int32_t previous; };
struct EmberStreamOpaque { int32_t device_index; int64_t id; };
static _Thread_local int32_t current_device = 0;

static EmberStableError check_device(const char* what, int32_t index) {
  if (index == -1 || index == 0) return 0;
  return fail(EMBER_STABLE_INVALID_ARGUMENT, "%s: device index %d is not available; ember runs "
              "on the CPU (device index -1 or 0)", what, index);
}
EmberStableError ember_stable_device_guard_create(int32_t index, EmberDeviceGuardHandle* out) {
  EmberStableError e = check_device("DeviceGuard", index);
  if (e) return e;
  *out = malloc(sizeof(**out));
  if (!*out) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  (*out)->previous = current_device;
  current_device = index < 0 ? 0 : index;
  return 0;
}
EmberStableError ember_stable_device_guard_set_index(EmberDeviceGuardHandle g, int32_t index) {
  if (!g) return fail(EMBER_STABLE_INVALID_ARGUMENT, "DeviceGuard: NULL handle");
  EmberStableError e = check_device("DeviceGuard::set_index", index);
  if (e) return e;
  current_device = index < 0 ? 0 : index;
  return 0;
}
EmberStableError ember_stable_device_guard_delete(EmberDeviceGuardHandle g) {
  if (!g) return 0;
  current_device = g->previous;
  free(g);
  return 0;
}
EmberStableError ember_stable_get_current_device_index(int32_t* out) {
  *out = current_device;
  return 0;
}
EmberStableError ember_stable_get_current_stream(int32_t index, EmberStreamHandle* out) {
  EmberStableError e = check_device("getCurrentStream", index);
  if (e) return e;
  *out = malloc(sizeof(**out));
  if (!*out) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  (*out)->device_index = index < 0 ? current_device : index;
  (*out)->id = 0;  /* the default stream: CPU work is ordered by program order */
  return 0;
}
EmberStableError ember_stable_stream_id(EmberStreamHandle s, int64_t* out) {
  if (!s) return fail(EMBER_STABLE_INVALID_ARGUMENT, "Stream: NULL handle");
  *out = s->id;
  return 0;
}
EmberStableError ember_stable_stream_delete(EmberStreamHandle s) {
  free(s);
  return 0;
}

/* ------------------------------------------------------------------ registration */
typedef struct {
  uint64_t version;
  char ns[128], kind[16], key[64], file[512];
  uint32_t line;
  EmberLibraryInit init;
} Pending;
static Pending* pending;
static int npending, cap_pending;

struct EmberStableLibraryOpaque {
  char** defs;
  int ndefs;
  char** names;
  EmberBoxedKernel* kernels;
  EmberBoxedInvoker* invokers;
  int nimpls;
};

EmberStableError ember_stable_library_register(uint64_t target_version, const char* ns,
                                               const char* kind, const char* key,
                                               EmberLibraryInit init, const char* file,
                                               uint32_t line) {
  if (npending == cap_pending) {
    int cap = cap_pending ? 2 * cap_pending : 8;
    Pending* p = realloc(pending, (size_t)cap * sizeof(Pending));
    if (!p) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
    pending = p;
    cap_pending = cap;
  }
  Pending* p = &pending[npending++];
  p->version = target_version;
  snprintf(p->ns, sizeof p->ns, "%s", ns ? ns : "");
  snprintf(p->kind, sizeof p->kind, "%s", kind ? kind : "");
  snprintf(p->key, sizeof p->key, "%s", key ? key : "");
  snprintf(p->file, sizeof p->file, "%s", file ? file : "");
  p->line = line;
  p->init = init;
  return 0;
}

EmberStableError ember_stable_library_def(EmberStableLibraryHandle lib, const char* schema) {
  if (!lib || !schema) return fail(EMBER_STABLE_INVALID_ARGUMENT, "def: NULL argument");
  char** d = realloc(lib->defs, (size_t)(lib->ndefs + 1) * sizeof(char*));
  if (!d) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  lib->defs = d;
  lib->defs[lib->ndefs++] = strdup(schema);
  return 0;
}

EmberStableError ember_stable_library_impl(EmberStableLibraryHandle lib, const char* name,
                                           EmberBoxedKernel kernel, EmberBoxedInvoker invoker) {
  if (!lib || !name || !kernel)
    return fail(EMBER_STABLE_INVALID_ARGUMENT, "impl: NULL argument");
  int n = lib->nimpls + 1;
  char** names = realloc(lib->names, (size_t)n * sizeof(char*));
  if (names) lib->names = names;
  EmberBoxedKernel* k = realloc(lib->kernels, (size_t)n * sizeof(EmberBoxedKernel));
  if (k) lib->kernels = k;
  EmberBoxedInvoker* v = realloc(lib->invokers, (size_t)n * sizeof(EmberBoxedInvoker));
  if (v) lib->invokers = v;
  if (!names || !k || !v) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  lib->names[lib->nimpls] = strdup(name);
  lib->kernels[lib->nimpls] = kernel;
  lib->invokers[lib->nimpls] = invoker;
  lib->nimpls = n;
  return 0;
}

/* Python reads what dlopen's constructors registered, then runs each init function */
EXPORT int ember_stable_py_pending_count(void) { return npending; }
EXPORT void ember_stable_py_pending_get(int i, uint64_t* version, const char** ns,
                                        const char** kind, const char** key,
                                        const char** file, uint32_t* line) {
  *version = pending[i].version;
  *ns = pending[i].ns;
  *kind = pending[i].kind;
  *key = pending[i].key;
  *file = pending[i].file;
  *line = pending[i].line;
}
EXPORT EmberStableError ember_stable_py_pending_run(int i, EmberStableLibraryHandle* out) {
  *out = calloc(1, sizeof(**out));
  if (!*out) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
  ember_stable_clear_error();
  pending[i].init(*out);
  return last_code;
}
EXPORT void ember_stable_py_pending_clear(void) { npending = 0; }
EXPORT void ember_stable_py_lib_counts(EmberStableLibraryHandle lib, int* ndefs, int* nimpls) {
  *ndefs = lib->ndefs;
  *nimpls = lib->nimpls;
}
EXPORT const char* ember_stable_py_lib_def(EmberStableLibraryHandle lib, int k) {
  return lib->defs[k];
}
EXPORT void ember_stable_py_lib_impl(EmberStableLibraryHandle lib, int k, const char** name,
                                     void** kernel, void** invoker) {
  *name = lib->names[k];
  *kernel = (void*)lib->kernels[k];
  *invoker = (void*)lib->invokers[k];
}

/* ------------------------------------------------------------------ calls from Python */
/* [data, arg_index, dtype, ndim, storage base, storage bytes, sizes..., byte strides...] */
EXPORT int64_t ember_stable_py_describe(EmberTensorHandle t, int64_t* out) {
  int64_t nd = NDIM(t);
  out[0] = (int64_t)((char*)t->dl.data + t->dl.byte_offset);
  out[1] = t->storage->lent ? t->storage->arg_index : -1;
  out[2] = t->scalar_type;
  out[3] = nd;
  out[4] = (int64_t)t->storage->base;
  out[5] = t->storage->nbytes;
  memcpy(out + 6, SIZES(t), (size_t)nd * sizeof(int64_t));
  for (int64_t d = 0; d < nd; d++) out[6 + nd + d] = STRIDES(t)[d] * ELSIZE(t);
  return 6 + 2 * nd;
}

/* The few CPython functions a call needs (stable ABI; resolved in the running interpreter):
 * reading an argument array's memory through the buffer protocol and releasing the GIL around
 * the kernel.  Python calls ember_stable_py_call through ctypes.PyDLL (GIL held). */
typedef struct {
  void* buf; void* obj; ptrdiff_t len; ptrdiff_t itemsize; int readonly; int ndim;
  char* format; ptrdiff_t* shape; ptrdiff_t* strides; ptrdiff_t* suboffsets; void* internal;
} PyBufferABI;
extern int PyObject_GetBuffer(void* obj, PyBufferABI* view, int flags) __attribute__((weak));
extern void PyBuffer_Release(PyBufferABI* view) __attribute__((weak));
extern void* PyTuple_GetItem(void* tuple, ptrdiff_t i) __attribute__((weak));
extern ptrdiff_t PyTuple_Size(void* tuple) __attribute__((weak));
extern void PyErr_Clear(void) __attribute__((weak));
extern void* PyEval_SaveThread(void) __attribute__((weak));
extern void PyEval_RestoreThread(void* state) __attribute__((weak));
#define PYBUF_STRIDES 0x18

static EmberStableError lend(void* arrays, int64_t* meta, int64_t ntin, Storage** storages,
                             EmberTensorHandle* handles) {
  for (int64_t k = 0; k < ntin; k++) {
    PyBufferABI view;
    if (PyObject_GetBuffer(PyTuple_GetItem(arrays, k), &view, PYBUF_STRIDES) != 0) {
      PyErr_Clear();
      return fail(EMBER_STABLE_INVALID_ARGUMENT, "tensor argument %lld has no readable memory",
                  (long long)k);
    }
    int64_t sizes[64], strides[64], nd = view.ndim;
    for (int64_t d = 0; d < nd && d < 64; d++) {
      sizes[d] = view.shape[d];
      strides[d] = view.strides[d] / view.itemsize;
    }
    Storage* s = storages[k] = malloc(sizeof(Storage));
    if (s) {
      atomic_init(&s->refcount, 1);  /* this call's own reference */
      int64_t offset = meta[2 * k + 1] >> 8;
      s->base = (char*)view.buf - offset * view.itemsize;
      s->nbytes = 0;
      s->lent = 1;
      s->arg_index = (int32_t)k;
      handles[k] = make_handle(s, nd, sizes, strides,
                               (EmberScalarType)(meta[2 * k + 1] & 0xff), offset);
    }
    PyBuffer_Release(&view);  /* the caller keeps the array alive for the call */
    if (!s || !handles[k]) return fail(EMBER_STABLE_OUT_OF_MEMORY, "out of memory");
    *(StableIValue*)meta[2 * k] = (StableIValue)handles[k];
  }
  return 0;
}

/* One call of a boxed kernel.  head = [kernel, invoker, num_args, num_outputs, out_mask,
 * list_mask] (bit i of out_mask: result i is a tensor; of list_mask: a Tensor[] list).
 * `arrays` is a tuple of the tensor arguments' arrays; meta has two int64 per array: the
 * address to write its handle to, and (storage offset << 8 | scalar type).  On return meta[2k]
 * is how many handles the kernel kept to array k's memory (0 unless it stored one away: Python
 * then keeps the memory alive).  A tensor result is described into `out` as a
 * [handle, describe...] record, a list as [list, count] (Python describes its handles and frees
 * the list with ember_stable_py_list_free).  On an error every result is released. */
static EmberStableError check_list(StableIValue* list, int64_t* out_refs) {
  if (!list) return fail(EMBER_STABLE_FAILURE, "the kernel returned no Tensor[] list");
  for (uint64_t j = 0; j < list[0]; j++) {
    EmberTensorHandle h = (EmberTensorHandle)list[1 + j];
    if (!h) return fail(EMBER_STABLE_FAILURE, "the kernel returned an undefined tensor in "
                        "its Tensor[] result (element %llu)", (unsigned long long)j);
    if (h->storage->lent) out_refs[h->storage->arg_index]++;
  }
  return 0;
}

static void release_results(StableIValue* stack, uint64_t num_outputs, uint64_t out_mask,
                            uint64_t list_mask) {
  for (uint64_t i = 0; i < num_outputs && i < 64; i++) {
    if (out_mask >> i & 1) ember_stable_tensor_release((EmberTensorHandle)stack[i]);
    if (list_mask >> i & 1) ember_stable_tensor_list_release((StableIValue*)stack[i]);
  }
}

EXPORT void ember_stable_py_list_free(StableIValue* list) { free(list); }

EXPORT EmberStableError ember_stable_py_call(const int64_t* head, StableIValue* stack,
                                             void* arrays, int64_t* meta, int64_t* out) {
  EmberBoxedKernel kernel = (EmberBoxedKernel)head[0];
  EmberBoxedInvoker invoker = (EmberBoxedInvoker)head[1];
  uint64_t num_args = (uint64_t)head[2], num_outputs = (uint64_t)head[3];
  uint64_t out_mask = (uint64_t)head[4], list_mask = (uint64_t)head[5];
  int64_t ntin = PyTuple_Size(arrays);
  Storage* storages[64] = {0};
  EmberTensorHandle handles[64] = {0};
  int64_t out_refs[64] = {0};
  if (ntin > 64) return fail(EMBER_STABLE_INVALID_ARGUMENT, "at most 64 tensor arguments");
  EmberStableError err = lend(arrays, meta, ntin, storages, handles);
  int ran = 0;  /* the kernel ran and succeeded: its results are valid handles */
  if (!err) {
    void* gil = PyEval_SaveThread();
    ember_stable_clear_error();
    if (invoker) {
      err = invoker(kernel, stack, num_args, num_outputs);
    } else {
      kernel(stack, num_args, num_outputs);
      err = last_code;
    }
    PyEval_RestoreThread(gil);
    ran = !err;
  }
  for (int64_t k = 0; k < ntin; k++) ember_stable_tensor_release(handles[k]);
  for (uint64_t i = 0, pos = 0; !err && i < num_outputs && i < 64; i++) {
    if (list_mask >> i & 1) {
      StableIValue* list = (StableIValue*)stack[i];
      err = check_list(list, out_refs);
      if (err) break;
      out[pos] = (int64_t)list;
      out[pos + 1] = (int64_t)list[0];
      pos += 2;
      continue;
    }
    if (!(out_mask >> i & 1)) continue;
    EmberTensorHandle h = (EmberTensorHandle)stack[i];
    if (!h) {
      err = fail(EMBER_STABLE_FAILURE, "the kernel returned an undefined tensor");
      break;
    }
    out[pos] = (int64_t)h;
    pos += 1 + (uint64_t)ember_stable_py_describe(h, out + pos + 1);
    if (h->storage->lent) out_refs[h->storage->arg_index]++;
  }
  if (err && ran) {  /* a bad result: nothing reaches Python, release what the kernel gave */
    memset(out_refs, 0, sizeof out_refs);
    release_results(stack, num_outputs, out_mask, list_mask);
  }
  for (int64_t k = 0; k < ntin; k++) {
    if (!storages[k]) {  /* never lent (an earlier argument failed) */
      meta[2 * k] = 0;
      continue;
    }
    meta[2 * k] = atomic_load(&storages[k]->refcount) - 1 - out_refs[k];
    storage_unref(storages[k]);
  }
  return err;
}
