/* ember::stable::Tensor: an RAII tensor over the stable C ABI, with torch::stable::Tensor's
 * names (PyTorch 2.9), so an extension ports by renaming torch:: to ember::.  Header-only: all
 * it compiles into an extension are calls of ember_stable_* functions. */
#ifndef EMBER_STABLE_TENSOR_H
#define EMBER_STABLE_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ember/stable/c/shim.h"
#include "ember/stable/macros.h"

namespace ember {
namespace stable {

using DeviceIndex = int32_t;

enum class ScalarType : int32_t {
  Byte = EMBER_STABLE_UINT8, Char = EMBER_STABLE_INT8, Short = EMBER_STABLE_INT16,
  Int = EMBER_STABLE_INT32, Long = EMBER_STABLE_INT64, Half = EMBER_STABLE_FLOAT16,
  Float = EMBER_STABLE_FLOAT32, Double = EMBER_STABLE_FLOAT64,
  ComplexFloat = EMBER_STABLE_COMPLEX64, ComplexDouble = EMBER_STABLE_COMPLEX128,
  Bool = EMBER_STABLE_BOOL, BFloat16 = EMBER_STABLE_BFLOAT16,
};
constexpr ScalarType kByte = ScalarType::Byte, kChar = ScalarType::Char,
                     kShort = ScalarType::Short, kInt = ScalarType::Int,
                     kLong = ScalarType::Long, kHalf = ScalarType::Half,
                     kFloat = ScalarType::Float, kDouble = ScalarType::Double,
                     kBool = ScalarType::Bool, kBFloat16 = ScalarType::BFloat16;

/* a borrowed run of int64 (PyTorch's IntHeaderOnlyArrayRef) */
class IntHeaderOnlyArrayRef {
 public:
  IntHeaderOnlyArrayRef() = default;
  IntHeaderOnlyArrayRef(const int64_t* data, size_t size) : data_(data), size_(size) {}
  /* the list lives until the end of the full expression: pass it straight to a call */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  IntHeaderOnlyArrayRef(std::initializer_list<int64_t> values)
      : data_(values.begin()), size_(values.size()) {}
#pragma GCC diagnostic pop
  template <class Container>
  IntHeaderOnlyArrayRef(const Container& c) : data_(c.data()), size_(c.size()) {}
  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t operator[](size_t i) const { return data_[i]; }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};
using IntArrayRef = IntHeaderOnlyArrayRef;

class Tensor {
 public:
  /* an undefined tensor */
  Tensor() = default;
  /* takes ownership of `handle` (released when the last copy goes) */
  explicit Tensor(EmberTensorHandle handle)
      : handle_(handle, [](EmberTensorHandle h) { ember_stable_tensor_release(h); }) {}
  /* borrows `handle` (a boxed kernel's argument: the caller keeps ownership) */
  static Tensor borrow(EmberTensorHandle handle) {
    Tensor t;
    t.handle_ = std::shared_ptr<EmberTensorOpaque>(handle, [](EmberTensorHandle) {});
    return t;
  }

  EmberTensorHandle get() const { return handle_.get(); }
  bool defined() const { return handle_ != nullptr; }

  void* data_ptr() const { return query<void*>(ember_stable_get_data_ptr); }
  template <class T> T* mutable_data_ptr() const { return static_cast<T*>(data_ptr()); }
  template <class T> const T* const_data_ptr() const {
    return static_cast<const T*>(data_ptr());
  }
  int64_t dim() const { return query<int64_t>(ember_stable_get_dim); }
  int64_t numel() const { return query<int64_t>(ember_stable_get_numel); }
  IntHeaderOnlyArrayRef sizes() const {
    return IntHeaderOnlyArrayRef(query<const int64_t*>(ember_stable_get_sizes),
                                 static_cast<size_t>(dim()));
  }
  IntHeaderOnlyArrayRef strides() const {
    return IntHeaderOnlyArrayRef(query<const int64_t*>(ember_stable_get_strides),
                                 static_cast<size_t>(dim()));
  }
  int64_t size(int64_t d) const {
    int64_t v;
    EMBER_ERROR_CODE_CHECK(ember_stable_get_size(get(), d, &v));
    return v;
  }
  int64_t stride(int64_t d) const {
    int64_t v;
    EMBER_ERROR_CODE_CHECK(ember_stable_get_stride(get(), d, &v));
    return v;
  }
  int64_t storage_offset() const { return query<int64_t>(ember_stable_get_storage_offset); }
  size_t element_size() const {
    return static_cast<size_t>(query<int64_t>(ember_stable_get_element_size));
  }
  ScalarType scalar_type() const {
    return static_cast<ScalarType>(query<EmberScalarType>(ember_stable_get_scalar_type));
  }
  bool is_contiguous() const { return query<int32_t>(ember_stable_is_contiguous) != 0; }
  bool is_cpu() const { return query<int32_t>(ember_stable_is_cpu) != 0; }
  bool is_cuda() const { return false; }
  DeviceIndex get_device_index() const {
    return query<int32_t>(ember_stable_get_device_index);
  }
  DeviceIndex get_device() const { return get_device_index(); }
  /* the DLPack view of this tensor (valid while the tensor lives) */
  const DLTensor* dlpack() const { return query<const DLTensor*>(ember_stable_get_dlpack); }

 private:
  template <class T, class Fn>
  T query(Fn fn) const {
    STD_EMBER_CHECK(defined(), "ember::stable::Tensor: the tensor is undefined");
    T v;
    EMBER_ERROR_CODE_CHECK(fn(get(), &v));
    return v;
  }
  std::shared_ptr<EmberTensorOpaque> handle_;
};

}  // namespace stable
}  // namespace ember

#endif
