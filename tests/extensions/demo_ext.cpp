// A stable-ABI extension used by tests/extensions/test_stable_abi.py (load_inline reads it).
#include <ember/stable/accelerator.h>
#include <ember/stable/library.h>
#include <ember/stable/ops.h>

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using ember::stable::Tensor;
namespace st = ember::stable;

// y = x * c for a float32 tensor of any layout
Tensor mul_scalar(const Tensor& x, double c) {
  STD_EMBER_CHECK(x.scalar_type() == st::ScalarType::Float,
                  "mul_scalar expects a float32 tensor, got scalar type ",
                  static_cast<int>(x.scalar_type()));
  STD_EMBER_CHECK(x.is_cpu(), "mul_scalar expects a CPU tensor");
  st::accelerator::DeviceGuard guard(x.get_device_index());
  Tensor src = x.is_contiguous() ? x : st::clone(x);
  Tensor y = st::empty_like(src);
  const float* in = src.const_data_ptr<float>();
  float* out = y.mutable_data_ptr<float>();
  for (int64_t i = 0; i < src.numel(); i++) out[i] = in[i] * static_cast<float>(c);
  return y;
}

// amax over the last dim of x[:, start:start+length], padded by `width` zeros on both sides
Tensor window_max(const Tensor& x, int64_t start, int64_t length, int64_t width) {
  Tensor w = st::narrow(x, x.dim() - 1, start, length);
  Tensor m = st::amax(w, -1, /*keepdim=*/false);
  return st::pad(m, {width, width}, "constant", 0.0);
}

// (x^T clone, zeros of x's shape as float64 filled with 2, x.stride(0), x.storage_offset)
std::tuple<Tensor, Tensor, int64_t, int64_t> layout_info(const Tensor& x) {
  Tensor t = st::clone(st::transpose(x, 0, 1));
  Tensor z = st::new_zeros(x, x.sizes(), st::ScalarType::Double);
  st::fill_(z, 2.0);
  return {t, z, x.stride(0), x.storage_offset()};
}

// copies src into a zeroed new tensor of dst's shape and dtype (broadcasting, converting)
Tensor copy_into(const Tensor& dst_like, const Tensor& src) {
  Tensor out = st::new_empty(dst_like, dst_like.sizes());
  st::zero_(out);
  st::copy_(out, src);
  return out;
}

int64_t stream_id(const Tensor& x) {
  auto s = st::accelerator::getCurrentStream(x.get_device_index());
  return s.id() + 10 * st::accelerator::getCurrentDeviceIndex();
}

// a raw boxed kernel (no EMBER_BOX): stack[0] = x, stack[1] = c
void add_scalar_boxed(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  Tensor x = st::to<Tensor>(stack[0]);
  double c = st::to<double>(stack[1]);
  Tensor y = st::clone(x);
  float* p = y.mutable_data_ptr<float>();
  for (int64_t i = 0; i < y.numel(); i++) p[i] += static_cast<float>(c);
  stack[0] = st::from(y);
}

Tensor bad_arity(const Tensor& x) { return st::clone(x); }

// every kind of argument: optional tensor, int list, string, optional dtype, bool
std::tuple<Tensor, int64_t, double, bool> options(const Tensor& x, std::optional<Tensor> y,
                                                  std::vector<int64_t> dims, std::string mode,
                                                  std::optional<st::ScalarType> dtype,
                                                  bool flag) {
  Tensor m = st::amax(y.has_value() ? *y : x, dims, /*keepdim=*/false);
  Tensor out = st::new_zeros(m, m.sizes(), dtype);
  st::copy_(out, m);
  return {out, static_cast<int64_t>(dims.size()), mode == "x" ? 1.5 : -2.5, !flag};
}

int64_t guard_bad(const Tensor& x) {
  st::accelerator::DeviceGuard guard(3);
  return x.dim();
}

// keeps a handle to its argument's memory past the call (ember must keep that memory alive)
static StableIValue kept = 0;
int64_t stash(const Tensor& x) {
  if (kept) ember_stable_tensor_release(reinterpret_cast<EmberTensorHandle>(kept));
  kept = st::from(x);
  return x.numel();
}
Tensor peek(const Tensor& like) {
  STD_EMBER_CHECK(kept != 0, "peek: nothing stashed");
  Tensor t = st::to<Tensor>(kept);
  return st::clone(t);
}

// the DLPack view: (dtype code, bits, device type, byte offset)
std::tuple<int64_t, int64_t, int64_t, int64_t> dl_info(const Tensor& x) {
  const DLTensor* d = x.dlpack();
  return {d->dtype.code, d->dtype.bits, d->device.device_type,
          static_cast<int64_t>(d->byte_offset)};
}

EMBER_STABLE_LIBRARY(stabletest, m) {
  m.def("mul_scalar(Tensor x, float c) -> Tensor");
  m.def("window_max(Tensor x, int start, int length, int width) -> Tensor");
  m.def("layout_info(Tensor x) -> (Tensor, Tensor, int, int)");
  m.def("copy_into(Tensor dst_like, Tensor src) -> Tensor");
  m.def("stream_id(Tensor x) -> int");
  m.def("add_scalar(Tensor x, float c) -> Tensor");
  m.def("bad_arity(Tensor x, float c) -> Tensor");
  m.def("stash(Tensor x) -> int");
  m.def("peek(Tensor like) -> Tensor");
  m.def("dl_info(Tensor x) -> (int, int, int, int)");
  m.def("options(Tensor x, Tensor? y, int[] dims, str mode, ScalarType? dtype, bool flag)"
        " -> (Tensor, int, float, bool)");
  m.def("guard_bad(Tensor x) -> int");
}

EMBER_STABLE_LIBRARY_IMPL(stabletest, CPU, m) {
  m.impl("mul_scalar", EMBER_BOX(&mul_scalar));
  m.impl("window_max", EMBER_BOX(&window_max));
  m.impl("layout_info", EMBER_BOX(&layout_info));
  m.impl("copy_into", EMBER_BOX(&copy_into));
  m.impl("stream_id", EMBER_BOX(&stream_id));
  m.impl("add_scalar", &add_scalar_boxed);
  m.impl("bad_arity", EMBER_BOX(&bad_arity));
  m.impl("stash", EMBER_BOX(&stash));
  m.impl("peek", EMBER_BOX(&peek));
  m.impl("dl_info", EMBER_BOX(&dl_info));
  m.impl("options", EMBER_BOX(&options));
  m.impl("guard_bad", EMBER_BOX(&guard_bad));
}
