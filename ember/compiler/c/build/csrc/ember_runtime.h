/* ember C runtime prelude, ABI 1 (compiler/c/build/runtime.py), once per library */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

#define EMBER_ABI_VERSION 1
#define EMBER_EXPORT __attribute__((visibility("default")))

typedef int (*ember_entry_fn)(void **bufs, const int64_t *ints, const double *floats);

/* ember.set_num_threads() as seen by generated code: OpenMP regions are written
   `num_threads(ember_num_threads) if(ember_num_threads > 1 && ...)`.  The runtime sets it to 1
   in a fork()ed child (libgomp's pool does not survive fork; a one-thread region never uses it). */
static int ember_num_threads = 1;

EMBER_EXPORT int ember_abi_version(void) { return EMBER_ABI_VERSION; }

EMBER_EXPORT void ember_set_num_threads(int n) { ember_num_threads = n > 0 ? n : 1; }

EMBER_EXPORT int ember_get_num_threads(void) { return ember_num_threads; }

/* Where a NumPy array object keeps its type and data pointers; measured by the runtime. */
static const void *ember_array_type;
static int64_t ember_type_offset, ember_data_offset;

EMBER_EXPORT void ember_runtime_init(const void *array_type, int64_t type_offset,
                                     int64_t data_offset) {
  ember_array_type = array_type;
  ember_type_offset = type_offset;
  ember_data_offset = data_offset;
}

/* One entry's packed arguments (the runtime fills it once per argument count). */
typedef struct {
  ember_entry_fn fn;
  const int64_t *ints;
  const double *floats;
  int64_t n;
} ember_call;

/* Call `call->fn` with the data pointers of the n NumPy arrays `objs` (the item pointers of a
   Python tuple): the runtime passes the tuple instead of computing addresses in Python.  An
   object that is not a plain ndarray returns -1000000 - i and the runtime takes its slow path. */
EMBER_EXPORT int ember_call_arrays(const ember_call *call, void *const *objs) {
  const int64_t n = call->n;
  void *small[64];
  void **bufs = n <= 64 ? small : (void **)malloc((size_t)n * sizeof(void *));
  if (bufs == NULL) return -1;
  for (int64_t i = 0; i < n; i++) {
    const char *obj = (const char *)objs[i];
    if (ember_array_type == NULL
        || *(const void *const *)(obj + ember_type_offset) != ember_array_type) {
      if (bufs != small) free(bufs);
      return -1000000 - (int)i;
    }
    bufs[i] = *(void *const *)(obj + ember_data_offset);
  }
  int rc = call->fn(bufs, call->ints, call->floats);
  if (bufs != small) free(bufs);
  return rc;
}
