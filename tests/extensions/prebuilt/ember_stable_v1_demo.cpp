// A stable-ABI extension built once against ember's stable ABI version 1 and checked in as
// ember_stable_v1_demo.so (build.sh rebuilds it; do not, unless version 1 itself is wrong):
// tests/extensions/test_stable_abi.py loads the binary on the current ember, proving that
// later versions keep loading and running it.  Only version-1 APIs are visible here.
#define EMBER_TARGET_VERSION 1
#include <ember/stable/accelerator.h>
#include <ember/stable/library.h>
#include <ember/stable/ops.h>

#include <tuple>

using ember::stable::Tensor;
namespace st = ember::stable;

// x * a + b for float32 or float64 tensors of any layout
Tensor scale_add(const Tensor& x, double a, double b) {
  st::accelerator::DeviceGuard guard(x.get_device_index());
  Tensor src = x.is_contiguous() ? x : st::clone(x);
  Tensor y = st::empty_like(src);
  int64_t n = src.numel();
  if (src.scalar_type() == st::ScalarType::Float) {
    const float* p = src.const_data_ptr<float>();
    float* q = y.mutable_data_ptr<float>();
    for (int64_t i = 0; i < n; i++) q[i] = p[i] * static_cast<float>(a) + static_cast<float>(b);
  } else {
    STD_EMBER_CHECK(src.scalar_type() == st::ScalarType::Double,
                    "scale_add: expected a float32 or float64 tensor");
    const double* p = src.const_data_ptr<double>();
    double* q = y.mutable_data_ptr<double>();
    for (int64_t i = 0; i < n; i++) q[i] = p[i] * a + b;
  }
  return y;
}

// amax over the last dim of x[..., 1:], padded with `width` copies of -1 on both sides
Tensor row_amax_padded(const Tensor& x, int64_t width) {
  Tensor w = st::narrow(x, -1, 1, x.size(-1) - 1);
  return st::pad(st::amax(w, -1), {width, width}, "constant", -1.0);
}

// (dim, numel, element_size, is_contiguous, storage_offset, stream id)
std::tuple<int64_t, int64_t, int64_t, bool, int64_t, int64_t> info(const Tensor& x) {
  int64_t stream = st::accelerator::getCurrentStream(-1).id();
  return {x.dim(), x.numel(), static_cast<int64_t>(x.element_size()), x.is_contiguous(),
          x.storage_offset(), stream};
}

// zeros of x^T's shape as float64, then x^T copied in, then + 1 via a filled tensor
Tensor transpose_plus_one(const Tensor& x) {
  Tensor t = st::transpose(x, 0, 1);
  Tensor out = st::new_zeros(x, t.sizes(), st::ScalarType::Double);
  st::copy_(out, t);
  Tensor ones = st::new_empty(out, out.sizes());
  st::zero_(ones);
  st::fill_(ones, 1.0);
  Tensor res = st::clone(out);
  double* r = res.mutable_data_ptr<double>();
  const double* o = ones.const_data_ptr<double>();
  for (int64_t i = 0; i < res.numel(); i++) r[i] += o[i];
  return res;
}

EMBER_STABLE_LIBRARY(stable_v1, m) {
  m.def("scale_add(Tensor x, float a, float b) -> Tensor");
  m.def("row_amax_padded(Tensor x, int width) -> Tensor");
  m.def("info(Tensor x) -> (int, int, int, bool, int, int)");
  m.def("transpose_plus_one(Tensor x) -> Tensor");
}

EMBER_STABLE_LIBRARY_IMPL(stable_v1, CPU, m) {
  m.impl("scale_add", EMBER_BOX(&scale_add));
  m.impl("row_amax_padded", EMBER_BOX(&row_amax_padded));
  m.impl("info", EMBER_BOX(&info));
  m.impl("transpose_plus_one", EMBER_BOX(&transpose_plus_one));
}
