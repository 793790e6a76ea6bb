/* ember stable C ABI: the functions an extension calls (docs/extensions.md, "Stable C ABI").
 *
 * Rules (as PyTorch's AOTI shim): C linkage; no exceptions cross this boundary; every function
 * returns an EmberStableError and writes results through out-pointers; only pointers, integers
 * and doubles cross it.  Tensors are opaque handles (EmberTensorHandle); a handle an API call
 * returns is owned by the caller, who frees it with ember_stable_tensor_release.  A function,
 * once released in a version, keeps its name, signature and meaning in every later version; a
 * changed signature is a new function with a _v2 suffix. */
#ifndef EMBER_STABLE_C_SHIM_H
#define EMBER_STABLE_C_SHIM_H

#include <stdint.h>
#include "ember/stable/version.h"
#include "ember/stable/c/dlpack.h"

#ifdef __cplusplus
#define EMBER_STABLE_EXTERN_C extern "C"
#else
#define EMBER_STABLE_EXTERN_C
#endif
#define EMBER_STABLE_API EMBER_STABLE_EXTERN_C __attribute__((visibility("default")))

typedef int32_t EmberStableError;
#define EMBER_STABLE_SUCCESS 0
#define EMBER_STABLE_FAILURE 1            /* RuntimeError */
#define EMBER_STABLE_INVALID_ARGUMENT 2   /* ValueError */
#define EMBER_STABLE_INDEX_ERROR 3        /* IndexError: a dim or position out of range */
#define EMBER_STABLE_DTYPE_ERROR 4        /* TypeError: an unsupported or mismatched dtype */
#define EMBER_STABLE_OUT_OF_MEMORY 5
#define EMBER_STABLE_NOT_IMPLEMENTED 6

/* scalar types: PyTorch's c10::ScalarType numbers, fixed forever */
typedef int32_t EmberScalarType;
#define EMBER_STABLE_UINT8 0
#define EMBER_STABLE_INT8 1
#define EMBER_STABLE_INT16 2
#define EMBER_STABLE_INT32 3
#define EMBER_STABLE_INT64 4
#define EMBER_STABLE_FLOAT16 5
#define EMBER_STABLE_FLOAT32 6
#define EMBER_STABLE_FLOAT64 7
#define EMBER_STABLE_COMPLEX64 9
#define EMBER_STABLE_COMPLEX128 10
#define EMBER_STABLE_BOOL 11
#define EMBER_STABLE_BFLOAT16 15

/* one slot of a boxed kernel's stack: a tensor handle's bits, an int64, a double's bits, a bool
 * (0/1), a scalar type, or a pointer (optional: to a StableIValue or NULL for None; int list:
 * to an int64 count followed by the values; float list: to an int64 count followed by the
 * doubles' bits; Tensor list: to an int64 count followed by that many borrowed tensor
 * handles; optional-Tensor list (Tensor?[], version 3): the same, with 0 for None; str: to a
 * NUL-terminated string).  A Tensor[] result (version 3) is a list from
 * ember_stable_tensor_list_new: a count followed by that many new handles, all owned by the
 * caller of the kernel, which frees the list. */
typedef uint64_t StableIValue;

typedef struct EmberTensorOpaque EmberTensorOpaque;
typedef EmberTensorOpaque* EmberTensorHandle;
typedef struct EmberDeviceGuardOpaque* EmberDeviceGuardHandle;
typedef struct EmberStreamOpaque* EmberStreamHandle;
typedef struct EmberStableLibraryOpaque* EmberStableLibraryHandle;

/* ---------------------------------------------------------------- version 1 */
EMBER_STABLE_API uint64_t ember_stable_abi_version(void);

/* errors: the last error of the calling thread */
EMBER_STABLE_API const char* ember_stable_get_last_error_message(void);
EMBER_STABLE_API EmberStableError ember_stable_get_last_error_code(void);
EMBER_STABLE_API void ember_stable_set_error(EmberStableError code, const char* message);
EMBER_STABLE_API void ember_stable_clear_error(void);

/* tensor handles */
EMBER_STABLE_API EmberStableError ember_stable_tensor_release(EmberTensorHandle t);
EMBER_STABLE_API EmberStableError ember_stable_tensor_new_handle(EmberTensorHandle t,
                                                                 EmberTensorHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_get_dlpack(EmberTensorHandle t,
                                                          const DLTensor** out);
EMBER_STABLE_API EmberStableError ember_stable_get_data_ptr(EmberTensorHandle t, void** out);
EMBER_STABLE_API EmberStableError ember_stable_get_dim(EmberTensorHandle t, int64_t* out);
EMBER_STABLE_API EmberStableError ember_stable_get_numel(EmberTensorHandle t, int64_t* out);
EMBER_STABLE_API EmberStableError ember_stable_get_sizes(EmberTensorHandle t,
                                                         const int64_t** out);
EMBER_STABLE_API EmberStableError ember_stable_get_strides(EmberTensorHandle t,
                                                           const int64_t** out);
EMBER_STABLE_API EmberStableError ember_stable_get_size(EmberTensorHandle t, int64_t dim,
                                                        int64_t* out);
EMBER_STABLE_API EmberStableError ember_stable_get_stride(EmberTensorHandle t, int64_t dim,
                                                          int64_t* out);
EMBER_STABLE_API EmberStableError ember_stable_get_storage_offset(EmberTensorHandle t,
                                                                  int64_t* out);
EMBER_STABLE_API EmberStableError ember_stable_get_element_size(EmberTensorHandle t,
                                                                int64_t* out);
EMBER_STABLE_API EmberStableError ember_stable_get_scalar_type(EmberTensorHandle t,
                                                               EmberScalarType* out);
EMBER_STABLE_API EmberStableError ember_stable_get_device_type(EmberTensorHandle t,
                                                               int32_t* out);
EMBER_STABLE_API EmberStableError ember_stable_get_device_index(EmberTensorHandle t,
                                                                int32_t* out);
EMBER_STABLE_API EmberStableError ember_stable_is_cpu(EmberTensorHandle t, int32_t* out);
EMBER_STABLE_API EmberStableError ember_stable_is_contiguous(EmberTensorHandle t,
                                                             int32_t* out);

/* stable ops (PyTorch's semantics; a new tensor is returned through `out`) */
EMBER_STABLE_API EmberStableError ember_stable_amax(EmberTensorHandle self, const int64_t* dims,
                                                    int64_t ndims, int32_t keepdim,
                                                    EmberTensorHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_narrow(EmberTensorHandle self, int64_t dim,
                                                      int64_t start, int64_t length,
                                                      EmberTensorHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_pad(EmberTensorHandle self, const int64_t* pad,
                                                   int64_t npad, const char* mode, double value,
                                                   EmberTensorHandle* out);
/* dtype: NULL keeps self's dtype */
EMBER_STABLE_API EmberStableError ember_stable_new_empty(EmberTensorHandle self,
                                                         const int64_t* sizes, int64_t ndim,
                                                         const EmberScalarType* dtype,
                                                         EmberTensorHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_new_zeros(EmberTensorHandle self,
                                                         const int64_t* sizes, int64_t ndim,
                                                         const EmberScalarType* dtype,
                                                         EmberTensorHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_empty_like(EmberTensorHandle self,
                                                          EmberTensorHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_fill_(EmberTensorHandle self, double value);
EMBER_STABLE_API EmberStableError ember_stable_zero_(EmberTensorHandle self);
EMBER_STABLE_API EmberStableError ember_stable_copy_(EmberTensorHandle self,
                                                     EmberTensorHandle src,
                                                     int32_t non_blocking);
EMBER_STABLE_API EmberStableError ember_stable_clone(EmberTensorHandle self,
                                                     EmberTensorHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_transpose(EmberTensorHandle self, int64_t dim0,
                                                         int64_t dim1, EmberTensorHandle* out);

/* devices and streams: on the CPU a device index is -1 (a CPU tensor's) or 0 and the stream is
 * the default stream (id 0); the objects are real and checked */
EMBER_STABLE_API EmberStableError ember_stable_device_guard_create(int32_t device_index,
                                                                   EmberDeviceGuardHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_device_guard_set_index(EmberDeviceGuardHandle g,
                                                                      int32_t device_index);
EMBER_STABLE_API EmberStableError ember_stable_device_guard_delete(EmberDeviceGuardHandle g);
EMBER_STABLE_API EmberStableError ember_stable_get_current_device_index(int32_t* out);
EMBER_STABLE_API EmberStableError ember_stable_get_current_stream(int32_t device_index,
                                                                  EmberStreamHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_stream_id(EmberStreamHandle s, int64_t* out);
EMBER_STABLE_API EmberStableError ember_stable_stream_delete(EmberStreamHandle s);

/* boxed kernels and registration (ember/stable/c/library.h has the macros) */
typedef void (*EmberBoxedKernel)(StableIValue* stack, uint64_t num_args, uint64_t num_outputs);
/* calls a kernel and turns what it throws into ember_stable_set_error (NULL: call directly) */
typedef EmberStableError (*EmberBoxedInvoker)(EmberBoxedKernel kernel, StableIValue* stack,
                                              uint64_t num_args, uint64_t num_outputs);
typedef void (*EmberLibraryInit)(EmberStableLibraryHandle lib);
/* kind: "DEF", "FRAGMENT" or "IMPL"; dispatch_key: "" for DEF/FRAGMENT, "CPU" for IMPL */
EMBER_STABLE_API EmberStableError ember_stable_library_register(
    uint64_t target_version, const char* ns, const char* kind, const char* dispatch_key,
    EmberLibraryInit init, const char* file, uint32_t line);
EMBER_STABLE_API EmberStableError ember_stable_library_def(EmberStableLibraryHandle lib,
                                                           const char* schema);
EMBER_STABLE_API EmberStableError ember_stable_library_impl(EmberStableLibraryHandle lib,
                                                            const char* name,
                                                            EmberBoxedKernel kernel,
                                                            EmberBoxedInvoker invoker);

/* ---------------------------------------------------------------- version 2 */
#if EMBER_TARGET_VERSION >= EMBER_STABLE_VERSION_2
EMBER_STABLE_API EmberStableError ember_stable_empty(const int64_t* sizes, int64_t ndim,
                                                     EmberScalarType dtype,
                                                     EmberTensorHandle* out);
EMBER_STABLE_API EmberStableError ember_stable_reshape(EmberTensorHandle self,
                                                       const int64_t* sizes, int64_t ndim,
                                                       EmberTensorHandle* out);
#endif

/* ---------------------------------------------------------------- version 3 */
#if EMBER_TARGET_VERSION >= EMBER_STABLE_VERSION_3
/* a Tensor[] result: (*out)[0] = count, (*out)[1..count] = 0 for the kernel to fill with new
 * handles (ember_stable_tensor_new_handle); stack[i] = (StableIValue)*out returns it, and ember
 * then owns the list and its handles.  A list that is not returned is freed with
 * ember_stable_tensor_list_release, which also releases the handles in it. */
EMBER_STABLE_API EmberStableError ember_stable_tensor_list_new(uint64_t count,
                                                               StableIValue** out);
EMBER_STABLE_API EmberStableError ember_stable_tensor_list_release(StableIValue* list);
#endif

#endif
