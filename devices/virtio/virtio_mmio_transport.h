// The virtio-mmio transport, version 2 ("modern", virtio 1.2 section 4.2.2), as Firecracker and
// kvmtool expose it: a 4 KiB register window per device, found by Linux through
// `virtio_mmio.device=4K@ADDR:GSI` on its command line. It owns feature negotiation, the
// virtqueues and the interrupt status; the VirtioDevice behind it owns the requests.
//
// Deliberate limits: legacy (version 1) registers are not offered, there are no shared memory
// regions, and the configuration never changes (ConfigGeneration stays 0). Registers must be
// accessed 32 bits wide (4.2.2.2); other widths read 0 and are ignored, counted, like unknown
// offsets and writes to read-only registers. Feature negotiation refuses FEATURES_OK when the
// driver accepted a bit that was not offered or left out VERSION_1. A queue whose rings are
// malformed, or whose chains the walker rejects, sets DEVICE_NEEDS_RESET with a configuration
// change interrupt (4.2.2.1), and the device serves no more requests until reset.
//
// Queues go live at DRIVER_OK (those with QueueReady 1 then). QueueReady=0 takes a queue out of
// service at any time (Linux's del_vq): its notifies are refused and counted, completions still
// owed to it are not published, and its registers may be rewritten. Enabling it again under
// DRIVER_OK would need VIRTIO_F_RING_RESET (not offered) and is refused; reset (status 0)
// clears every queue, QueueReady included, and InterruptStatus.
//
// Interrupts: the line is pulsed (an edge, as an irqfd delivers) each time a used buffer is
// published that the driver did not suppress, or the status gains DEVICE_NEEDS_RESET.
// Notifications arrive either through write() (the vCPU thread, the fallback) or
// notify_from_eventfd() (the loop thread, when an ioeventfd is registered on QueueNotify).
//
// Threads: read()/write() on vCPU threads, notify_from_eventfd() on the loop thread, the
// VirtioQueueHost calls from wherever the device runs (a worker); all serialize on mu_. The
// device is always called with mu_ released. Lock order: device locks -> mu_.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "devices/bus/guest_memory.h"
#include "devices/bus/irq_line.h"
#include "devices/bus/mmio_device.h"
#include "devices/bus/report_writer.h"
#include "devices/virtio/virtio_device.h"
#include "devices/virtio/virtqueue.h"

namespace minivmm::devices {

struct VirtioMmioStats {
  std::uint64_t notifies_vcpu = 0;      // QueueNotify writes seen by the vCPU thread
  std::uint64_t notifies_eventfd = 0;   // notifications through the ioeventfd
  std::uint64_t bad_notifies = 0;       // before DRIVER_OK, queue out of range or not live
  std::uint64_t interrupts = 0;         // used-buffer interrupts raised
  std::uint64_t config_interrupts = 0;  // configuration-change interrupts (NEEDS_RESET)
  std::uint64_t resets = 0;
  std::uint64_t features_refused = 0;   // FEATURES_OK refused
  std::uint64_t needs_reset = 0;        // times DEVICE_NEEDS_RESET was set
  std::uint64_t bad_accesses = 0;       // bad width, unknown offset, read-only write
  std::vector<VirtqueueStats> queues;
};

class VirtioMmioTransport final : public MmioDevice, public StatefulDevice, private VirtioQueueHost {
 public:
  static constexpr std::uint64_t kWindowSize = 0x1000;
  static constexpr std::uint32_t kMagic = 0x74726976;  // "virt"
  static constexpr std::uint32_t kVersion = 2;
  static constexpr std::uint32_t kVendorId = 0x4d4d564d;  // "MVMM"

  // Register offsets (4.2.2, table "MMIO Device Register Layout").
  static constexpr std::uint64_t kMagicValue = 0x000, kVersionReg = 0x004, kDeviceId = 0x008,
                                 kVendorIdReg = 0x00c, kDeviceFeatures = 0x010,
                                 kDeviceFeaturesSel = 0x014, kDriverFeatures = 0x020,
                                 kDriverFeaturesSel = 0x024, kQueueSel = 0x030,
                                 kQueueNumMax = 0x034, kQueueNum = 0x038, kQueueReady = 0x044,
                                 kQueueNotify = 0x050, kInterruptStatus = 0x060,
                                 kInterruptAck = 0x064, kStatus = 0x070, kQueueDescLow = 0x080,
                                 kQueueDescHigh = 0x084, kQueueDriverLow = 0x090,
                                 kQueueDriverHigh = 0x094, kQueueDeviceLow = 0x0a0,
                                 kQueueDeviceHigh = 0x0a4, kConfigGeneration = 0x0fc,
                                 kConfig = 0x100;

  // Device status bits (2.1).
  static constexpr std::uint32_t kStatusAcknowledge = 1, kStatusDriver = 2,
                                 kStatusDriverOk = 4, kStatusFeaturesOk = 8,
                                 kStatusNeedsReset = 0x40, kStatusFailed = 0x80;
  // What a driver may write to Status (all but DEVICE_NEEDS_RESET, which the device sets).
  static constexpr std::uint32_t kDriverStatusBits = kStatusAcknowledge | kStatusDriver |
                                                     kStatusDriverOk | kStatusFeaturesOk |
                                                     kStatusFailed;
  static constexpr std::uint32_t kInterruptUsedBuffer = 1, kInterruptConfigChange = 2;

  VirtioMmioTransport(VirtioDevice& device, const GuestMemory& ram, IrqLine& irq);

  std::string_view name() const noexcept override { return name_; }
  void read(std::uint64_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint64_t offset, std::span<const std::uint8_t> data) noexcept override;

  // The loop thread's ioeventfd for QueueNotify fired with `queue` as the datamatch.
  void notify_from_eventfd(std::uint32_t queue) noexcept;

  std::uint64_t offered_features() const noexcept { return offered_; }
  std::uint32_t status() const noexcept;
  VirtioMmioStats stats() const;
  // The transport's counters for the run report, under the report's names (notifies_eventfd
  // is notifies_ioeventfd there), and "queues": one object per queue, with its errors by name
  // (only those that happened). The VMM adds what its wiring knows (the window's base, the
  // GSI, the eventfd reads), the device its own (VirtioDevice::report()). Any thread.
  void report(ReportWriter& out) const;

  // StatefulDevice (virtio_mmio_state.cc). The key is the owner's name for the slot
  // ("virtio_blk0"); name() until it sets one.
  void set_state_key(std::string key) { state_key_ = std::move(key); }
  std::string_view state_key() const noexcept override {
    return state_key_.empty() ? std::string_view(name_) : std::string_view(state_key_);
  }
  // Lets the device quiesce (VirtioDevice::quiesce(), may throw StateError), so that no chain
  // is held. The owner calls it before save_state().
  void quiesce();
  // The registers, each queue's configuration and ring positions, the counters, then the
  // device's own record (VirtioDevice::save_state()). Throws StateError while a chain is in
  // flight (popped, not answered): quiesce() first.
  void save_state(StateWriter& out) const override;
  // On a fresh transport and device over the same guest RAM. The record names its device type
  // (another's is refused). The device loads its record first; then a transport that was live
  // (DRIVER_OK) activates it again with the negotiated features, so it serves the next request
  // from the saved ring positions.
  void load_state(StateReader& in) override;

 private:
  // VirtioQueueHost
  const GuestMemory& ram() const noexcept override { return ram_; }
  Virtqueue::Pop pop(std::size_t queue, DescriptorChain& out) noexcept override;
  void complete(std::size_t queue, std::uint16_t head, std::uint32_t len) noexcept override;
  void give_back(std::size_t queue) noexcept override;

  std::uint32_t read_register(std::uint64_t offset) noexcept;  // requires mu_
  void notify(std::uint32_t queue, bool from_eventfd) noexcept;
  void write_status(std::uint32_t value) noexcept;
  void reset() noexcept;
  void set_needs_reset_locked() noexcept;
  Virtqueue* selected_locked() noexcept;

  VirtioDevice& device_;
  const GuestMemory ram_;
  IrqLine& irq_;
  const std::string name_;
  const std::uint64_t offered_;
  std::string state_key_;

  mutable std::mutex mu_;
  std::vector<Virtqueue> queues_;            // guarded by mu_
  std::uint32_t status_ = 0;                 // guarded by mu_
  std::uint32_t device_features_sel_ = 0;    // guarded by mu_
  std::uint32_t driver_features_sel_ = 0;    // guarded by mu_
  std::uint64_t driver_features_ = 0;        // guarded by mu_
  std::uint32_t queue_sel_ = 0;              // guarded by mu_
  std::atomic<std::uint32_t> interrupt_status_{0};
  std::atomic<bool> live_{false};            // DRIVER_OK accepted and not reset

  std::atomic<std::uint64_t> notifies_vcpu_{0}, notifies_eventfd_{0}, bad_notifies_{0},
      interrupts_{0}, config_interrupts_{0}, resets_{0}, features_refused_{0}, needs_reset_{0},
      bad_accesses_{0};
};

}  // namespace minivmm::devices
