/* ember::stable errors: Error (what a failing C call or a failed check throws),
 * EMBER_ERROR_CODE_CHECK (a C call's error code to an exception) and STD_EMBER_CHECK
 * (PyTorch's STD_TORCH_CHECK).  Header-only over the C ABI. */
#ifndef EMBER_STABLE_MACROS_H
#define EMBER_STABLE_MACROS_H

#include <sstream>
#include <stdexcept>
#include <string>

#include "ember/stable/c/shim.h"

namespace ember {
namespace stable {

/* an error with one of the EMBER_STABLE_* codes; ember raises it in Python as the matching
 * error type (RuntimeError, ValueError, IndexError, TypeError, ...) naming the op */
class Error : public std::runtime_error {
 public:
  Error(EmberStableError code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  EmberStableError code() const noexcept { return code_; }

 private:
  EmberStableError code_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& s, const T& first, const Rest&... rest) {
  s << first;
  append(s, rest...);
}
template <class... Args>
std::string check_message(const char* condition, const Args&... args) {
  std::ostringstream s;
  if (sizeof...(Args) == 0) {
    s << "Expected " << condition << " to be true, but got false.";
  } else {
    append(s, args...);
  }
  return s.str();
}
}  // namespace detail
}  // namespace stable
}  // namespace ember

#define EMBER_ERROR_CODE_CHECK(call)                                                   \
  do {                                                                                 \
    EmberStableError ember_stable_err_ = (call);                                       \
    if (ember_stable_err_ != EMBER_STABLE_SUCCESS) {                                   \
      throw ::ember::stable::Error(ember_stable_err_,                                  \
                                   ember_stable_get_last_error_message());             \
    }                                                                                  \
  } while (0)

/* STD_EMBER_CHECK(cond, "message ", value, ...): throw unless cond holds */
#define STD_EMBER_CHECK(cond, ...)                                                     \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      throw ::ember::stable::Error(                                                    \
          EMBER_STABLE_FAILURE, ::ember::stable::detail::check_message(#cond, ##__VA_ARGS__)); \
    }                                                                                  \
  } while (0)

#endif
