/* ember stable C ABI: version numbers (docs/extensions.md, "Stable C ABI").
 *
 * EMBER_STABLE_ABI_VERSION is the ABI these headers describe.  An extension may define
 * EMBER_TARGET_VERSION (before including any stable header) to the oldest ember ABI it must run
 * on: APIs added after that version are compiled out, so using one is a compile error, and the
 * binary then loads on that ember and every later one.  Version history:
 *   1  tensor handle and accessors, amax, narrow, pad, new_empty, new_zeros, empty_like, fill_,
 *      zero_, copy_, clone, transpose, DeviceGuard, Stream, boxed kernels, registration, errors
 *   2  ember_stable_empty, ember_stable_reshape (ember::stable::empty, reshape)
 *   3  ember_stable_tensor_list_new, ember_stable_tensor_list_release: Tensor[] results of
 *      boxed kernels (EMBER_BOX of a function returning std::vector<Tensor>); Tensor?[]
 *      arguments (to<std::vector<std::optional<Tensor>>>)
 */
#ifndef EMBER_STABLE_VERSION_H
#define EMBER_STABLE_VERSION_H

#define EMBER_STABLE_VERSION_1 1
#define EMBER_STABLE_VERSION_2 2
#define EMBER_STABLE_VERSION_3 3
#define EMBER_STABLE_ABI_VERSION EMBER_STABLE_VERSION_3

#ifndef EMBER_TARGET_VERSION
#define EMBER_TARGET_VERSION EMBER_STABLE_ABI_VERSION
#endif

#if EMBER_TARGET_VERSION > EMBER_STABLE_ABI_VERSION
#error "EMBER_TARGET_VERSION is newer than the ember stable ABI these headers describe (EMBER_STABLE_ABI_VERSION); build against a newer ember or target an older version"
#endif
#if EMBER_TARGET_VERSION < EMBER_STABLE_VERSION_1
#error "EMBER_TARGET_VERSION must be at least 1 (EMBER_STABLE_VERSION_1)"
#endif

/* the version an extension is built for, written into its binary by the registration macros so
 * that ember can refuse an extension built for a newer ABI before loading it */
#define EMBER_STABLE_STR_(x) #x
#define EMBER_STABLE_STR(x) EMBER_STABLE_STR_(x)
#define EMBER_STABLE_ABI_TAG "EMBER_STABLE_ABI_TARGET:" EMBER_STABLE_STR(EMBER_TARGET_VERSION) ";"

#endif
