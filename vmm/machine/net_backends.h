// The host side of every --net, built with the other user input, before /dev/kvm is opened (a
// TAP that does not exist or is not a TAP, a forward's port in use: one line, exit 2): a TAP
// interface or descriptor, or user-mode networking through libslirp (loaded only then). Their
// descriptors and timers join the loop; the virtio-net devices (virtio_board.h) attach to them.
//
// Threads: built and destroyed on the main thread, before and after the loop runs; everything
// else on the loop thread. Destroyed after the devices that use them.
#pragma once

#include <memory>
#include <vector>

#include "devices/host/net_backend.h"
#include "vmm/machine/config.h"
#include "vmm/machine/machine_loop.h"

namespace minivmm::vmm {

class NetBackends {
 public:
  // Throws VmmError(kUsage) with the back-end's one-line reason.
  NetBackends(const Config& config, MachineLoop& loop);
  NetBackends(const NetBackends&) = delete;
  NetBackends& operator=(const NetBackends&) = delete;

  // In --net order.
  devices::NetBackend& at(std::size_t i) { return *backends_[i]; }
  std::size_t size() const noexcept { return backends_.size(); }
  bool any_tap() const noexcept { return taps_ > 0; }
  bool any_user() const noexcept { return users_ > 0; }

 private:
  std::vector<std::unique_ptr<devices::NetBackend>> backends_;
  std::size_t taps_ = 0;
  std::size_t users_ = 0;
};

}  // namespace minivmm::vmm
