/* ember AOT runner: load a .pt2 package written by ember.aot.compile_and_package (or
   ember._inductor.aoti_compile_and_package) and run one of its models from C, without Python.

   Link with -lember_aot (python -m ember.aot --lib-dir) and -ldl.  Every function returns 0 on
   success or a nonzero EMBER_AOT_E* code; ember_aot_last_error() then describes the failure
   (a per-thread message).  See docs/aot.md for a complete example. */
#ifndef EMBER_AOT_RUNNER_H
#define EMBER_AOT_RUNNER_H

#include <stdint.h>

#include "dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the runtime ABI packages record (metadata): a package records the oldest runtime that runs
   it; 2 added buffers the model updates in place (EMBER_AOT_ARG_MUTABLE in model.h) */
#define EMBER_AOT_RUNTIME_VERSION 2

enum {
  EMBER_AOT_OK = 0,
  EMBER_AOT_EIO = 1,          /* the file cannot be read or a temp file cannot be written */
  EMBER_AOT_EFORMAT = 2,      /* not a valid package: bad zip, compressed entry, lying sizes */
  EMBER_AOT_ENOTFOUND = 3,    /* no such model in the package */
  EMBER_AOT_EHASH = 4,        /* the model library does not match its recorded sha256 */
  EMBER_AOT_ECOMPAT = 5,      /* built for another CPU, runtime ABI or platform */
  EMBER_AOT_ELOAD = 6,        /* dlopen/dlsym failed */
  EMBER_AOT_EARG = 7,         /* bad arguments: counts, dtypes, ranks, shapes, guards */
  EMBER_AOT_ERUN = 8,         /* the model reported an error while running */
  EMBER_AOT_ENOMEM = 9
};

typedef struct ember_aot_model ember_aot_model;

int ember_aot_load(const char *package_path, const char *model_name, ember_aot_model **out);
int ember_aot_num_inputs(ember_aot_model *m, int64_t *n);
int ember_aot_num_outputs(ember_aot_model *m, int64_t *n);
int ember_aot_run(ember_aot_model *m, DLTensor *const *inputs, int64_t n_inputs,
                  DLTensor **outputs, int64_t n_outputs); /* outputs allocated by the runtime */
void ember_aot_free_output(DLTensor *t);
const char *ember_aot_metadata(ember_aot_model *m, const char *key); /* NULL if absent */
const char *ember_aot_last_error(void);
void ember_aot_unload(ember_aot_model *m);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_AOT_RUNNER_H */
