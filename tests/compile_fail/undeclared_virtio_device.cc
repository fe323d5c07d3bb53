// Must not compile (tests/compile_fail/CMakeLists.txt, issue 34): a virtio device without its
// snapshot record (VirtioDevice::save_state()/load_state() are pure virtual). With -DDECLARED
// it has them and compiles.
#include "devices/virtio/virtio_device.h"

namespace dev = minivmm::devices;

struct ScratchVirtio final : dev::VirtioDevice {
  std::string_view name() const noexcept override { return "scratch"; }
  std::uint32_t device_id() const noexcept override { return 1; }
  std::uint64_t device_features() const noexcept override { return 0; }
  std::size_t num_queues() const noexcept override { return 1; }
  void read_config(std::uint64_t, std::span<std::uint8_t>) noexcept override {}
  void activate(dev::VirtioQueueHost&, std::uint64_t) noexcept override {}
  void queue_notify(std::size_t) noexcept override {}
  void reset() noexcept override {}
#ifdef DECLARED
  void save_state(dev::StateWriter& out) const override { dev::write_version(out, 1); }
  void load_state(dev::StateReader& in) override { dev::read_version(in, 1); }
#endif
};

int main() {
  ScratchVirtio v;
  return v.num_queues() == 1 ? 0 : 1;
}
