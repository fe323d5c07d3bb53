// The device half of a virtio device (virtio 1.2 chapter 5), driven by a transport
// (VirtioMmioTransport) that owns the registers, feature negotiation and the virtqueues. The
// device sees its queues only through VirtioQueueHost, so it never touches a ring directly and
// never learns which transport or which thread delivered a notification.
//
// Threads and locks: the transport calls every method without holding its own lock (so the
// device may call back into VirtioQueueHost from inside them, and from its own worker threads).
// queue_notify() may run on a vCPU thread (notify register write) or the loop thread (ioeventfd),
// and concurrently with completions from a worker: the device serializes its own state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/guest_memory.h"
#include "devices/bus/report_writer.h"
#include "devices/virtio/virtqueue.h"

namespace minivmm::devices {

// Feature bits every virtio device may offer (virtio 1.2 section 6).
inline constexpr std::uint64_t kVirtioFIndirectDesc = 1ull << 28;
inline constexpr std::uint64_t kVirtioFEventIdx = 1ull << 29;
inline constexpr std::uint64_t kVirtioFVersion1 = 1ull << 32;

class VirtioQueueHost {
 public:
  virtual ~VirtioQueueHost() = default;
  virtual const GuestMemory& ram() const noexcept = 0;
  // The next available chain of `queue`; kBroken also marks the device DEVICE_NEEDS_RESET.
  virtual Virtqueue::Pop pop(std::size_t queue, DescriptorChain& out) noexcept = 0;
  // Returns `head` to the driver with `len` bytes written, and interrupts if the driver wants.
  virtual void complete(std::size_t queue, std::uint16_t head, std::uint32_t len) noexcept = 0;
  // Hands the chain the device popped last from `queue`, unanswered, back to the available
  // ring: the next pop takes it again. For a device that must let go of a chain it holds (a
  // receive buffer waiting for a frame) before a snapshot. Only the last chain popped, once.
  virtual void give_back(std::size_t /*queue*/) noexcept {}
};

class VirtioDevice {
 public:
  virtual ~VirtioDevice() = default;

  virtual std::string_view name() const noexcept = 0;
  virtual std::uint32_t device_id() const noexcept = 0;
  // Device-specific feature bits; the transport adds VERSION_1, INDIRECT_DESC and EVENT_IDX.
  virtual std::uint64_t device_features() const noexcept = 0;
  virtual std::size_t num_queues() const noexcept = 0;
  virtual std::uint16_t queue_max_size() const noexcept { return 256; }

  // The device configuration space, any offset and width; bytes past its end read as 0.
  virtual void read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept = 0;
  // Ignored by default (our devices have no writable config fields).
  virtual void write_config(std::uint64_t /*offset*/,
                            std::span<const std::uint8_t> /*data*/) noexcept {}

  // DRIVER_OK: the queues are live and `features` is what was negotiated. `host` outlives the
  // next reset().
  virtual void activate(VirtioQueueHost& host, std::uint64_t features) noexcept = 0;
  virtual void queue_notify(std::size_t queue) noexcept = 0;
  // Device reset (status 0): forget the queues. Returns only once no request is in flight, so
  // nothing completes into a queue after the transport cleared it.
  virtual void reset() noexcept = 0;

  // A descriptor the device's owner watches for readability on the event loop, calling
  // on_completion_fd() when it is (virtio-blk's io_uring completions); -1: none.
  virtual int completion_fd() const noexcept { return -1; }
  virtual void on_completion_fd() noexcept {}

  // The device's own counters for the run report, written into the object that holds its
  // transport's (VirtioMmioTransport::report()); the VMM names that object after the device's
  // slot (virtio_blk0), so a virtio device has no report key of its own. Any thread.
  virtual void report(ReportWriter& /*out*/) const {}

  // Snapshots (issue 23), on the loop thread while the VM is paused. quiesce() comes first:
  // afterwards the device holds no chain of any queue (each was answered, or handed back with
  // VirtioQueueHost::give_back()), so the ring positions are the whole of the queues' state.
  // Throws StateError if it cannot get there (virtio-blk: requests that do not complete).
  virtual void quiesce() {}
  // The device's own record, inside its transport's. load_state() runs on a fresh device before
  // the transport activates it again (a live driver), so a refused record has served nothing.
  // No default (issue 34): every virtio device states its participation, so one that was never
  // thought about does not build. A device with nothing to keep beyond its queues writes a
  // version byte only and says why beside it (a restore then refuses another layout by name).
  virtual void save_state(StateWriter& out) const = 0;
  virtual void load_state(StateReader& in) = 0;
};

}  // namespace minivmm::devices
