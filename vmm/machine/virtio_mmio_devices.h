// The virtio-mmio devices of one VM: each gets a 4 KiB register window above RAM on the MMIO
// bus, an ISA interrupt line (an irqfd pulse per interrupt), and one ioeventfd per queue on its
// QueueNotify register (datamatch = queue index) watched by the event loop, so a guest's
// notification costs no exit to user space on the vCPU thread: KVM signals the eventfd and the
// loop thread runs the device. Where KVM refuses the ioeventfd, the notify write exits to the
// vCPU thread instead and the transport handles it there (counted apart).
//
// Layout: the board's (board_layout.h): device i at board::virtio_window(i) and the i-th of
// board::kVirtioGsis. Linux learns each device from `virtio_mmio.device=4K@0xd0000000:5` on
// its command line (cmdline()).
//
// Threads: construct and add() on the main thread before the vCPU starts; the loop thread runs
// the ioeventfd handlers; stats_json() from the loop thread. Destroy after the vCPU has stopped.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "devices/bus/guest_memory.h"
#include "devices/bus/mmio_bus.h"
#include "devices/virtio/virtio_device.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "loop/event_loop.h"
#include "vmm/kvm/kvm_irq_line.h"
#include "vmm/kvm/unique_fd.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/board_layout.h"

namespace minivmm::vmm {

class VirtioMmioDevices {
 public:
  static constexpr std::size_t kMaxDevices = board::kVirtioGsis.size();
  static_assert(board::kVirtioFirst.size == devices::VirtioMmioTransport::kWindowSize);

  VirtioMmioDevices(const Vm& vm, loop::EventLoop& loop, devices::MmioBus& bus);
  ~VirtioMmioDevices();
  VirtioMmioDevices(const VirtioMmioDevices&) = delete;
  VirtioMmioDevices& operator=(const VirtioMmioDevices&) = delete;

  // Maps `device` at the next window and GSI. `label` names it in the report ("blk0").
  // Throws VmmError when the slots are used up or KVM refuses the interrupt line.
  devices::VirtioMmioTransport& add(std::string label,
                                    std::unique_ptr<devices::VirtioDevice> device);

  bool empty() const noexcept { return slots_.empty(); }
  std::size_t size() const noexcept { return slots_.size(); }
  // `virtio_mmio.device=4K@0xd0000000:5 ...` for every device, "" when there are none.
  std::string cmdline() const;
  // The same for `count` devices added in order: known before any exists, so the kernel can be
  // loaded (with it on its command line) before KVM is opened. Throws VmmError(kUsage) past
  // kMaxDevices.
  static std::string cmdline_for(std::size_t count);
  // Every device's counters under "virtio_<label>": its transport's, its own, and its
  // window, GSI and eventfd reads.
  void report(nlohmann::json& devices) const;
  // Snapshots: each transport under "virtio_<label>", and every device's quiesce().
  std::vector<std::pair<std::string, devices::StatefulDevice*>> stateful() const;
  void quiesce();

 private:
  // Device i's register window: the one formula add() and cmdline_for() share.
  static constexpr std::uint64_t slot_base(std::size_t i) noexcept {
    return board::virtio_window(i).base;
  }

  struct Slot {
    std::string label;
    std::uint64_t base = 0;
    std::uint32_t gsi = 0;
    // Destroyed bottom up: eventfds (unregistered), transport, irq line, device; the devices
    // were reset (quiesced) before any of it, in ~VirtioMmioDevices.
    std::unique_ptr<devices::VirtioDevice> device;
    std::unique_ptr<KvmIrqLine> irq;
    std::unique_ptr<devices::VirtioMmioTransport> transport;
    std::vector<UniqueFd> notify_fds;  // index = queue; invalid where KVM refused it
    std::uint64_t eventfd_reads = 0;   // loop thread
  };
  void register_notify(Slot& slot);

  const Vm& vm_;
  loop::EventLoop& loop_;
  devices::MmioBus& bus_;
  const devices::GuestMemory ram_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace minivmm::vmm
