/* The interface a generated ember AOT model library exports (model ABI version 1).

   Both loaders use it, and nothing else: the Python loader (ember/aot/_loader.py, via ctypes)
   and the C runner (libember_aot, runner.h).  A library exports one function,

       const ember_aot_model_v1 *ember_aot_model_get_v1(void);

   returning a static table.  A later, incompatible table gets a new name
   (ember_aot_model_get_v2) and new libraries may export both; fields are never reordered.

   Arguments ("args") are the exported program's inputs in signature order: constants
   (parameters, buffers, lifted tensor constants) and user inputs.  All tensors are dense,
   row-major, on the CPU.  Sizes travel as int64 "ints": bind_sizes computes them from the
   arguments' shapes (checking the export's guards), output_shape and run take them.
   Every function returns 0 on success or a positive code; message() words a code. */
#ifndef EMBER_AOT_MODEL_H
#define EMBER_AOT_MODEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_AOT_MODEL_ABI_VERSION 1

/* EMBER_AOT_ARG_MUTABLE (runtime ABI 2): a buffer the model updates in place; run() writes its
   new value over args[i] after every kernel has run, so the loader passes a private writable
   copy of its weight blob (the same copy on every call) and runs one call at a time. */
enum { EMBER_AOT_ARG_USER = 0, EMBER_AOT_ARG_CONSTANT = 1, EMBER_AOT_ARG_MUTABLE = 2 };

typedef struct {
  const char *name;        /* FQN of a constant ("fc.weight"), or the user input's name */
  int32_t kind;            /* EMBER_AOT_ARG_USER, _CONSTANT or _MUTABLE */
  uint8_t dtype_code;      /* DLPack type code (kDLFloat, kDLInt, ...) */
  uint8_t dtype_bits;      /* DLPack bits */
  int32_t ndim;
  const int64_t *shape;    /* constants (and mutable buffers): their static shape; else NULL */
  int64_t nbytes;          /* constants: bytes of the weight blob; user args: -1 */
  const char *weight_file; /* constants: blob name under data/weights/<model>/; else NULL */
} ember_aot_arg_info;

typedef struct {
  int32_t abi_version;     /* EMBER_AOT_MODEL_ABI_VERSION */
  int32_t n_args;
  int32_t n_outputs;
  int32_t n_ints;
  const ember_aot_arg_info *args;     /* n_args entries */
  const ember_aot_arg_info *outputs;  /* n_outputs entries (shape NULL: see output_shape) */
  /* shapes[i] points at args[i]'s dims (args[i].ndim of them); fills ints[n_ints].
     Returns 0, or a code whose message() names the failed guard. */
  int (*bind_sizes)(const int64_t *const *shapes, int64_t *ints);
  /* The shape of output k (outputs[k].ndim dims) for these ints. */
  void (*output_shape)(int32_t k, const int64_t *ints, int64_t *shape);
  /* Run the model: args[i] and outputs[k] are data pointers (outputs allocated by the
     caller with output_shape's sizes); intermediate buffers are allocated inside. */
  int (*run)(void *const *args, void *const *outputs, const int64_t *ints);
  void (*set_num_threads)(int n);
  const char *(*message)(int code);
} ember_aot_model_v1;

typedef const ember_aot_model_v1 *(*ember_aot_model_get_v1_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_AOT_MODEL_H */
