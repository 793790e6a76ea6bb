/* ember stable C ABI: registering ops from C (C++ extensions use ember/stable/library.h).
 *
 *   static void my_kernel(StableIValue* stack, uint64_t num_args, uint64_t num_outputs);
 *   EMBER_STABLE_C_LIBRARY(myext, lib) {
 *     ember_stable_library_def(lib, "scale(Tensor x, float c) -> Tensor");
 *   }
 *   EMBER_STABLE_C_LIBRARY_IMPL(myext, CPU, lib) {
 *     ember_stable_library_impl(lib, "scale", my_kernel, NULL);
 *   }
 *
 * A kernel reports an error with ember_stable_set_error and returns. */
#ifndef EMBER_STABLE_C_LIBRARY_H
#define EMBER_STABLE_C_LIBRARY_H
#include "ember/stable/c/shim.h"

/* the target version as text in the binary: ember reads it before loading the library */
#define EMBER_STABLE_ABI_TAG_DEFINE(uid)                                               \
  __attribute__((used)) static const char ember_stable_abi_tag_##uid[] = \
      EMBER_STABLE_ABI_TAG;

/* one more expansion, so a uid built from __LINE__ is expanded before ## */
#define EMBER_STABLE_C_REGISTER(ns, kind, key, uid, lib) EMBER_STABLE_C_REGISTER_(ns, kind, key, uid, lib)

#define EMBER_STABLE_C_REGISTER_(ns, kind, key, uid, lib)                              \
  static void ember_stable_init_##uid(EmberStableLibraryHandle lib);                   \
  EMBER_STABLE_ABI_TAG_DEFINE(uid)                                                     \
  __attribute__((constructor)) static void ember_stable_ctor_##uid(void) {             \
    ember_stable_library_register(EMBER_TARGET_VERSION, #ns, kind, key,                \
                                  ember_stable_init_##uid, __FILE__, __LINE__);        \
  }                                                                                    \
  static void ember_stable_init_##uid(EmberStableLibraryHandle lib)

#define EMBER_STABLE_C_UID_(a, b) a##_##b
#define EMBER_STABLE_C_UID(a, b) EMBER_STABLE_C_UID_(a, b)

#define EMBER_STABLE_C_LIBRARY(ns, lib) \
  EMBER_STABLE_C_REGISTER(ns, "DEF", "", EMBER_STABLE_C_UID(def_##ns, __LINE__), lib)
#define EMBER_STABLE_C_LIBRARY_FRAGMENT(ns, lib) \
  EMBER_STABLE_C_REGISTER(ns, "FRAGMENT", "", EMBER_STABLE_C_UID(frag_##ns, __LINE__), lib)
#define EMBER_STABLE_C_LIBRARY_IMPL(ns, key, lib) \
  EMBER_STABLE_C_REGISTER(ns, "IMPL", #key, EMBER_STABLE_C_UID(impl_##ns##_##key, __LINE__), lib)

#endif
