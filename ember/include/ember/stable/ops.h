/* ember::stable ops: torch::stable's free functions (PyTorch 2.9) over the stable C ABI. */
#ifndef EMBER_STABLE_OPS_H
#define EMBER_STABLE_OPS_H

#include <optional>
#include <string>

#include "ember/stable/tensor.h"

namespace ember {
namespace stable {

inline Tensor amax(const Tensor& self, IntHeaderOnlyArrayRef dims, bool keepdim = false) {
  EmberTensorHandle out;
  EMBER_ERROR_CODE_CHECK(ember_stable_amax(self.get(), dims.data(),
                                           static_cast<int64_t>(dims.size()), keepdim, &out));
  return Tensor(out);
}
inline Tensor amax(const Tensor& self, int64_t dim, bool keepdim = false) {
  return amax(self, IntHeaderOnlyArrayRef(&dim, 1), keepdim);
}
inline Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  EmberTensorHandle out;
  EMBER_ERROR_CODE_CHECK(ember_stable_narrow(self.get(), dim, start, length, &out));
  return Tensor(out);
}
inline Tensor pad(const Tensor& self, IntHeaderOnlyArrayRef pad,
                  const std::string& mode = "constant", double value = 0.0) {
  EmberTensorHandle out;
  EMBER_ERROR_CODE_CHECK(ember_stable_pad(self.get(), pad.data(),
                                          static_cast<int64_t>(pad.size()), mode.c_str(),
                                          value, &out));
  return Tensor(out);
}
inline Tensor new_empty(const Tensor& self, IntHeaderOnlyArrayRef size,
                        std::optional<ScalarType> dtype = std::nullopt) {
  EmberTensorHandle out;
  EmberScalarType d = dtype ? static_cast<EmberScalarType>(*dtype) : 0;
  EMBER_ERROR_CODE_CHECK(ember_stable_new_empty(self.get(), size.data(),
                                                static_cast<int64_t>(size.size()),
                                                dtype ? &d : nullptr, &out));
  return Tensor(out);
}
inline Tensor new_zeros(const Tensor& self, IntHeaderOnlyArrayRef size,
                        std::optional<ScalarType> dtype = std::nullopt) {
  EmberTensorHandle out;
  EmberScalarType d = dtype ? static_cast<EmberScalarType>(*dtype) : 0;
  EMBER_ERROR_CODE_CHECK(ember_stable_new_zeros(self.get(), size.data(),
                                                static_cast<int64_t>(size.size()),
                                                dtype ? &d : nullptr, &out));
  return Tensor(out);
}
inline Tensor empty_like(const Tensor& self) {
  EmberTensorHandle out;
  EMBER_ERROR_CODE_CHECK(ember_stable_empty_like(self.get(), &out));
  return Tensor(out);
}
inline Tensor fill_(const Tensor& self, double value) {
  EMBER_ERROR_CODE_CHECK(ember_stable_fill_(self.get(), value));
  return self;
}
inline Tensor zero_(Tensor& self) {
  EMBER_ERROR_CODE_CHECK(ember_stable_zero_(self.get()));
  return self;
}
inline Tensor copy_(Tensor& self, const Tensor& src,
                    std::optional<bool> non_blocking = std::nullopt) {
  EMBER_ERROR_CODE_CHECK(ember_stable_copy_(self.get(), src.get(),
                                            non_blocking.value_or(false)));
  return self;
}
inline Tensor clone(const Tensor& self) {
  EmberTensorHandle out;
  EMBER_ERROR_CODE_CHECK(ember_stable_clone(self.get(), &out));
  return Tensor(out);
}
inline Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  EmberTensorHandle out;
  EMBER_ERROR_CODE_CHECK(ember_stable_transpose(self.get(), dim0, dim1, &out));
  return Tensor(out);
}

#if EMBER_TARGET_VERSION >= EMBER_STABLE_VERSION_2
inline Tensor empty(IntHeaderOnlyArrayRef size, ScalarType dtype = kFloat) {
  EmberTensorHandle out;
  EMBER_ERROR_CODE_CHECK(ember_stable_empty(size.data(), static_cast<int64_t>(size.size()),
                                            static_cast<EmberScalarType>(dtype), &out));
  return Tensor(out);
}
inline Tensor reshape(const Tensor& self, IntHeaderOnlyArrayRef shape) {
  EmberTensorHandle out;
  EMBER_ERROR_CODE_CHECK(ember_stable_reshape(self.get(), shape.data(),
                                              static_cast<int64_t>(shape.size()), &out));
  return Tensor(out);
}
#endif

}  // namespace stable
}  // namespace ember

#endif
