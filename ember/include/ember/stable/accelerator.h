/* ember::stable::accelerator: DeviceGuard, Stream, getCurrentStream (torch::stable's names).
 * On the CPU the device index is -1 or 0 and the stream is the default one (id 0): the objects
 * are real (created and checked by ember) so code written for an accelerator runs unchanged. */
#ifndef EMBER_STABLE_ACCELERATOR_H
#define EMBER_STABLE_ACCELERATOR_H

#include <memory>

#include "ember/stable/tensor.h"

namespace ember {
namespace stable {
namespace accelerator {

using DeviceIndex = int32_t;

class DeviceGuard {
 public:
  DeviceGuard() = delete;
  explicit DeviceGuard(DeviceIndex index) {
    EmberDeviceGuardHandle g;
    EMBER_ERROR_CODE_CHECK(ember_stable_device_guard_create(index, &g));
    guard_.reset(g);
  }
  void set_index(DeviceIndex index) {
    EMBER_ERROR_CODE_CHECK(ember_stable_device_guard_set_index(guard_.get(), index));
  }

 private:
  struct Deleter {
    void operator()(EmberDeviceGuardHandle g) const { ember_stable_device_guard_delete(g); }
  };
  std::unique_ptr<std::remove_pointer_t<EmberDeviceGuardHandle>, Deleter> guard_;
};

class Stream {
 public:
  explicit Stream(EmberStreamHandle s)
      : stream_(s, [](EmberStreamHandle p) { ember_stable_stream_delete(p); }) {}
  int64_t id() const {
    int64_t v;
    EMBER_ERROR_CODE_CHECK(ember_stable_stream_id(stream_.get(), &v));
    return v;
  }

 private:
  std::shared_ptr<std::remove_pointer_t<EmberStreamHandle>> stream_;
};

inline Stream getCurrentStream(DeviceIndex index) {
  EmberStreamHandle s;
  EMBER_ERROR_CODE_CHECK(ember_stable_get_current_stream(index, &s));
  return Stream(s);
}

inline DeviceIndex getCurrentDeviceIndex() {
  int32_t v;
  EMBER_ERROR_CODE_CHECK(ember_stable_get_current_device_index(&v));
  return v;
}

}  // namespace accelerator
}  // namespace stable
}  // namespace ember

#endif
