/* ember::stable library: registering boxed kernels (torch::stable's library.h names).
 *
 *   Tensor mul_scalar(const Tensor& x, double c) { ... }
 *   EMBER_STABLE_LIBRARY(myext, m) { m.def("mul_scalar(Tensor x, float c) -> Tensor"); }
 *   EMBER_STABLE_LIBRARY_IMPL(myext, CPU, m) { m.impl("mul_scalar", EMBER_BOX(&mul_scalar)); }
 *
 * A boxed kernel is void(StableIValue* stack, uint64_t num_args, uint64_t num_outputs): it
 * reads its arguments from stack[0, num_args) (borrowed: the caller owns argument handles) and
 * writes its results to stack[0, num_outputs) (new handles, owned by the caller).  What a kernel
 * throws becomes an ember error naming the op. */
#ifndef EMBER_STABLE_LIBRARY_H
#define EMBER_STABLE_LIBRARY_H

#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/stable/c/library.h"
#include "ember/stable/tensor.h"

namespace ember {
namespace stable {
namespace detail {

template <class T> struct tag {};

inline Tensor to(StableIValue v, tag<Tensor>) {
  return Tensor::borrow(reinterpret_cast<EmberTensorHandle>(v));
}
inline int64_t to(StableIValue v, tag<int64_t>) { return static_cast<int64_t>(v); }
inline int32_t to(StableIValue v, tag<int32_t>) { return static_cast<int32_t>(v); }
inline bool to(StableIValue v, tag<bool>) { return v != 0; }
inline double to(StableIValue v, tag<double>) {
  double d;
  std::memcpy(&d, &v, sizeof d);
  return d;
}
inline ScalarType to(StableIValue v, tag<ScalarType>) { return static_cast<ScalarType>(v); }
inline std::string to(StableIValue v, tag<std::string>) {
  return std::string(reinterpret_cast<const char*>(v));
}
inline std::vector<int64_t> to(StableIValue v, tag<std::vector<int64_t>>) {
  const int64_t* p = reinterpret_cast<const int64_t*>(v);
  return std::vector<int64_t>(p + 1, p + 1 + p[0]);
}
inline IntHeaderOnlyArrayRef to(StableIValue v, tag<IntHeaderOnlyArrayRef>) {
  const int64_t* p = reinterpret_cast<const int64_t*>(v);
  return IntHeaderOnlyArrayRef(p + 1, static_cast<size_t>(p[0]));
}
inline std::vector<double> to(StableIValue v, tag<std::vector<double>>) {
  const StableIValue* p = reinterpret_cast<const StableIValue*>(v);
  std::vector<double> out(static_cast<size_t>(p[0]));
  if (!out.empty()) std::memcpy(out.data(), p + 1, out.size() * sizeof(double));
  return out;
}
/* Tensor[]: a count, then borrowed handles (the Tensors do not own them) */
inline std::vector<Tensor> to(StableIValue v, tag<std::vector<Tensor>>) {
  const StableIValue* p = reinterpret_cast<const StableIValue*>(v);
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(p[0]));
  for (StableIValue i = 0; i < p[0]; i++) {
    out.push_back(Tensor::borrow(reinterpret_cast<EmberTensorHandle>(p[1 + i])));
  }
  return out;
}
#if EMBER_TARGET_VERSION >= EMBER_STABLE_VERSION_3
/* Tensor?[] (version 3): a count, then borrowed handles, 0 for None */
inline std::vector<std::optional<Tensor>> to(StableIValue v,
                                             tag<std::vector<std::optional<Tensor>>>) {
  const StableIValue* p = reinterpret_cast<const StableIValue*>(v);
  std::vector<std::optional<Tensor>> out;
  out.reserve(static_cast<size_t>(p[0]));
  for (StableIValue i = 0; i < p[0]; i++) {
    if (p[1 + i] == 0) {
      out.emplace_back(std::nullopt);
    } else {
      out.emplace_back(Tensor::borrow(reinterpret_cast<EmberTensorHandle>(p[1 + i])));
    }
  }
  return out;
}
#endif
template <class T>
std::optional<T> to(StableIValue v, tag<std::optional<T>>) {
  if (v == 0) return std::nullopt;
  return to(*reinterpret_cast<const StableIValue*>(v), tag<T>{});
}

inline StableIValue from(const Tensor& t) {
  EmberTensorHandle h;
  EMBER_ERROR_CODE_CHECK(ember_stable_tensor_new_handle(t.get(), &h));
  return reinterpret_cast<StableIValue>(h);
}
inline StableIValue from(int64_t v) { return static_cast<StableIValue>(v); }
inline StableIValue from(int32_t v) { return static_cast<StableIValue>(static_cast<int64_t>(v)); }
inline StableIValue from(bool v) { return v ? 1 : 0; }
inline StableIValue from(double v) {
  StableIValue s;
  std::memcpy(&s, &v, sizeof v);
  return s;
}
inline StableIValue from(ScalarType v) { return static_cast<StableIValue>(v); }
#if EMBER_TARGET_VERSION >= EMBER_STABLE_VERSION_3
/* a Tensor[] result (version 3): a list the caller of the kernel owns, with new handles */
inline StableIValue from(const std::vector<Tensor>& tensors) {
  StableIValue* list;
  EMBER_ERROR_CODE_CHECK(ember_stable_tensor_list_new(tensors.size(), &list));
  for (size_t i = 0; i < tensors.size(); i++) {
    EmberTensorHandle h;
    EmberStableError e = ember_stable_tensor_new_handle(tensors[i].get(), &h);
    if (e != EMBER_STABLE_SUCCESS) {
      ember_stable_tensor_list_release(list);
      throw Error(e, std::string("Tensor[] result, element ") + std::to_string(i) + ": " +
                         ember_stable_get_last_error_message());
    }
    list[1 + i] = reinterpret_cast<StableIValue>(h);
  }
  return reinterpret_cast<StableIValue>(list);
}
#endif

template <class T> struct Outputs { static constexpr uint64_t count = 1; };
template <> struct Outputs<void> { static constexpr uint64_t count = 0; };
template <class... Ts> struct Outputs<std::tuple<Ts...>> {
  static constexpr uint64_t count = sizeof...(Ts);
};

template <class T>
void put(StableIValue* stack, T&& value) { stack[0] = from(value); }
template <class... Ts>
void put(StableIValue* stack, std::tuple<Ts...>&& values) {
  std::apply([&](auto&... v) { uint64_t i = 0; ((stack[i++] = from(v)), ...); }, values);
}

template <class Sig> struct Boxer;
template <class R, class... Args>
struct Boxer<R (*)(Args...)> {
  template <R (*F)(Args...), size_t... I>
  static void call(StableIValue* stack, std::index_sequence<I...>) {
    if constexpr (std::is_void_v<R>) {
      F(to(stack[I], tag<std::decay_t<Args>>{})...);
    } else {
      put(stack, F(to(stack[I], tag<std::decay_t<Args>>{})...));
    }
  }
  template <R (*F)(Args...)>
  static void boxed(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
    if (num_args != sizeof...(Args) || num_outputs != Outputs<R>::count) {
      throw Error(EMBER_STABLE_INVALID_ARGUMENT,
                  "the boxed kernel takes " + std::to_string(sizeof...(Args)) +
                      " arguments and returns " + std::to_string(Outputs<R>::count) +
                      " values, but its schema gives " + std::to_string(num_args) +
                      " arguments and " + std::to_string(num_outputs) +
                      " returns; make the schema in m.def match the C++ function");
    }
    call<F>(stack, std::index_sequence_for<Args...>{});
  }
};
template <auto F>
void boxed_of(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  Boxer<decltype(F)>::template boxed<F>(stack, num_args, num_outputs);
}

/* runs a kernel; what it throws becomes the calling thread's last error */
inline EmberStableError invoke_catching(EmberBoxedKernel kernel, StableIValue* stack,
                                        uint64_t num_args, uint64_t num_outputs) {
  try {
    kernel(stack, num_args, num_outputs);
    return EMBER_STABLE_SUCCESS;
  } catch (const Error& e) {
    ember_stable_set_error(e.code(), e.what());
    return e.code();
  } catch (const std::exception& e) {
    ember_stable_set_error(EMBER_STABLE_FAILURE, e.what());
  } catch (...) {
    ember_stable_set_error(EMBER_STABLE_FAILURE, "a C++ exception of unknown type");
  }
  return EMBER_STABLE_FAILURE;
}

}  // namespace detail

template <class T>
T to(StableIValue v) { return detail::to(v, detail::tag<T>{}); }
template <class T>
StableIValue from(const T& v) { return detail::from(v); }

class Library {
 public:
  explicit Library(EmberStableLibraryHandle handle) : handle_(handle) {}
  Library& def(const char* schema) {
    EMBER_ERROR_CODE_CHECK(ember_stable_library_def(handle_, schema));
    return *this;
  }
  Library& impl(const char* name, EmberBoxedKernel kernel) {
    EMBER_ERROR_CODE_CHECK(ember_stable_library_impl(handle_, name, kernel,
                                                     &detail::invoke_catching));
    return *this;
  }

 private:
  EmberStableLibraryHandle handle_;
};

namespace detail {
inline void run_init(EmberStableLibraryHandle handle, void (*body)(Library&)) {
  try {
    Library lib(handle);
    body(lib);
  } catch (const Error& e) {
    ember_stable_set_error(e.code(), e.what());
  } catch (const std::exception& e) {
    ember_stable_set_error(EMBER_STABLE_FAILURE, e.what());
  }
}
}  // namespace detail
}  // namespace stable
}  // namespace ember

/* EMBER_BOX(&fn): the boxed kernel of an unboxed function (PyTorch's TORCH_BOX) */
#define EMBER_BOX(fn) (&::ember::stable::detail::boxed_of<fn>)

/* one more expansion, so a uid built from __LINE__ is expanded before ## */
#define EMBER_STABLE_LIBRARY_REGISTER(ns, kind, key, uid, lib) EMBER_STABLE_LIBRARY_REGISTER_(ns, kind, key, uid, lib)

#define EMBER_STABLE_LIBRARY_REGISTER_(ns, kind, key, uid, m)                          \
  static void ember_stable_body_##uid(::ember::stable::Library& m);                    \
  EMBER_STABLE_ABI_TAG_DEFINE(uid)                                                     \
  static void ember_stable_init_##uid(EmberStableLibraryHandle h) {                    \
    ::ember::stable::detail::run_init(h, &ember_stable_body_##uid);                    \
  }                                                                                    \
  __attribute__((constructor)) static void ember_stable_ctor_##uid() {                 \
    ember_stable_library_register(EMBER_TARGET_VERSION, #ns, kind, key,                \
                                  &ember_stable_init_##uid, __FILE__, __LINE__);       \
  }                                                                                    \
  static void ember_stable_body_##uid(::ember::stable::Library& m)

#define EMBER_STABLE_LIBRARY(ns, m) \
  EMBER_STABLE_LIBRARY_REGISTER(ns, "DEF", "", EMBER_STABLE_C_UID(def_##ns, __LINE__), m)
#define EMBER_STABLE_LIBRARY_FRAGMENT(ns, m) \
  EMBER_STABLE_LIBRARY_REGISTER(ns, "FRAGMENT", "", EMBER_STABLE_C_UID(frag_##ns, __LINE__), m)
#define EMBER_STABLE_LIBRARY_IMPL(ns, key, m)              \
  EMBER_STABLE_LIBRARY_REGISTER(ns, "IMPL", #key,         \
                                 EMBER_STABLE_C_UID(impl_##ns##_##key, __LINE__), m)

#endif
