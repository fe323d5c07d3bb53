// The virtio-mmio transport's snapshot record, with its queues'. A snapshot is taken with no
// chain in flight (the device quiesced), so each queue is its configuration and two ring
// positions: the next available entry to pop and the next used entry to write. Everything else
// the driver and device share (the rings, avail_event/used_event) is in guest RAM, which the
// snapshot holds on its own.
#include "devices/virtio/virtio_mmio_transport.h"

namespace minivmm::devices {
namespace {

// 2: the device id follows the version.
constexpr std::uint8_t kMmioStateVersion = 2;
// The device's own record: far more than any of ours needs, and a cap a hostile length field
// cannot push past.
constexpr std::size_t kMaxDeviceRecord = 1 << 20;

}  // namespace

void Virtqueue::save_state(StateWriter& out) const {
  out.u16(size_);
  out.u64(desc_);
  out.u64(avail_);
  out.u64(used_);
  out.boolean(ready_);
  out.boolean(active_);
  out.boolean(broken_);
  out.boolean(indirect_);
  out.boolean(event_idx_);
  out.u16(next_avail_);
  out.u16(next_used_);
  out.u64(stats_.chains);
  out.u64(stats_.descriptors);
  out.u64(stats_.used);
  out.u64(stats_.interrupts_suppressed);
  for (std::uint64_t e : stats_.errors) out.u64(e);
}

void Virtqueue::load_state(StateReader& in, const GuestMemory& ram, bool indirect_negotiated,
                           bool event_idx_negotiated) {
  const std::uint16_t size = in.u16();
  const std::uint64_t desc = in.u64();
  const std::uint64_t avail = in.u64();
  const std::uint64_t used = in.u64();
  const bool ready = in.boolean();
  const bool active = in.boolean();
  const bool broken = in.boolean();
  const bool indirect = in.boolean();
  const bool event_idx = in.boolean();
  const std::uint16_t next_avail = in.u16();
  const std::uint16_t next_used = in.u16();
  VirtqueueStats stats;
  stats.chains = in.u64();
  stats.descriptors = in.u64();
  stats.used = in.u64();
  stats.interrupts_suppressed = in.u64();
  for (std::uint64_t& e : stats.errors) e = in.u64();

  // A queue that is not live may hold any size a driver wrote (QueueNum takes up to 0xffff
  // before DRIVER_OK); a live one passed activate()'s checks, which run again below.
  if ((active || broken) && !ready) in.fail("a queue in service that the driver took out");
  if (active && broken) in.fail("a queue both live and broken");
  size_ = size;
  desc_ = desc;
  avail_ = avail;
  used_ = used;
  ready_ = ready;
  if (active) {
    // A live queue walks indirect tables and suppresses interrupts as the driver negotiated.
    if (indirect != indirect_negotiated || event_idx != event_idx_negotiated) {
      in.fail("a live queue whose ring features differ from the negotiated ones");
    }
    // The same checks as at DRIVER_OK: size, alignment, the rings inside RAM.
    if (!activate(ram, indirect, event_idx)) in.fail("a live queue whose rings are not valid");
    if (next_avail != next_used) in.fail("a queue with chains in flight");
  }
  active_ = active;
  broken_ = broken;
  indirect_ = indirect;
  event_idx_ = event_idx;
  next_avail_ = next_avail;
  next_used_ = next_used;
  stats_ = stats;
}

void VirtioMmioTransport::quiesce() { device_.quiesce(); }

void VirtioMmioTransport::save_state(StateWriter& out) const {
  // The device's record first, without mu_: the lock order is device locks -> mu_ (the device
  // is always called with mu_ released; TSan saw the inversion when it was taken inside).
  StateWriter device;
  device_.save_state(device);
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < queues_.size(); ++i) {
    if (queues_[i].active() && queues_[i].in_flight() != 0) {
      throw StateError(std::string(state_key()) + " state: queue " + std::to_string(i) + " has " +
                       std::to_string(queues_[i].in_flight()) + " requests in flight");
    }
  }
  write_version(out, kMmioStateVersion);
  out.u32(device_.device_id());
  out.u32(status_);
  out.u32(device_features_sel_);
  out.u32(driver_features_sel_);
  out.u64(driver_features_);
  out.u32(queue_sel_);
  out.u32(interrupt_status_.load(std::memory_order_acquire));
  out.boolean(live_.load(std::memory_order_acquire));
  out.u32(static_cast<std::uint32_t>(queues_.size()));
  for (const Virtqueue& q : queues_) q.save_state(out);
  for (const auto* c : {&notifies_vcpu_, &notifies_eventfd_, &bad_notifies_, &interrupts_,
                        &config_interrupts_, &resets_, &features_refused_, &needs_reset_,
                        &bad_accesses_}) {
    out.u64(c->load(std::memory_order_relaxed));
  }
  out.bytes(device.data());
}

void VirtioMmioTransport::load_state(StateReader& in) {
  std::uint64_t features = 0;
  bool live = false;
  std::vector<std::uint8_t> device_record;
  {
    std::lock_guard lock(mu_);
    read_version(in, kMmioStateVersion);
    // Another device's record could otherwise fit: net and console both have two queues.
    const std::uint32_t device_id = in.u32();
    if (device_id != device_.device_id()) {
      in.fail("a record of virtio device " + std::to_string(device_id) + " (this one is " +
              std::to_string(device_.device_id()) + ")");
    }
    const std::uint32_t status = in.u32();
    const std::uint32_t device_sel = in.u32();
    const std::uint32_t driver_sel = in.u32();
    const std::uint64_t driver_features = in.u64();
    const std::uint32_t queue_sel = in.u32();
    const std::uint32_t interrupt_status = in.u32();
    live = in.boolean();
    const std::uint32_t queues = in.u32();
    if (queues != queues_.size()) {
      in.fail(std::to_string(queues) + " queues for a device with " +
              std::to_string(queues_.size()));
    }
    if ((status & ~(kDriverStatusBits | kStatusNeedsReset)) != 0) {
      in.fail("status 0x" + std::to_string(status) + " with undefined bits");
    }
    if ((status & kStatusFeaturesOk) != 0 &&
        ((driver_features & ~offered_) != 0 || (driver_features & kVirtioFVersion1) == 0)) {
      in.fail("FEATURES_OK for features the device refuses");
    }
    if ((status & kStatusDriverOk) != 0 && (status & kStatusFeaturesOk) == 0) {
      in.fail("DRIVER_OK without FEATURES_OK");
    }
    if (live && (status & kStatusDriverOk) == 0) in.fail("live without DRIVER_OK");
    if ((interrupt_status & ~(kInterruptUsedBuffer | kInterruptConfigChange)) != 0) {
      in.fail("interrupt status with undefined bits");
    }
    status_ = status;
    device_features_sel_ = device_sel;
    driver_features_sel_ = driver_sel;
    driver_features_ = driver_features;
    queue_sel_ = queue_sel;
    interrupt_status_.store(interrupt_status, std::memory_order_release);
    const bool indirect = (driver_features & kVirtioFIndirectDesc) != 0;
    const bool event_idx = (driver_features & kVirtioFEventIdx) != 0;
    for (Virtqueue& q : queues_) {
      q.load_state(in, ram_, indirect, event_idx);
      if (q.active() && !live) in.fail("a live queue on a device that is not");
    }
    for (auto* c : {&notifies_vcpu_, &notifies_eventfd_, &bad_notifies_, &interrupts_,
                    &config_interrupts_, &resets_, &features_refused_, &needs_reset_,
                    &bad_accesses_}) {
      c->store(in.u64(), std::memory_order_relaxed);
    }
    device_record = in.bytes(kMaxDeviceRecord);
    in.expect_end();
    features = driver_features_;
  }
  // The device's record before it goes live (without mu_: the device may call back): a record
  // it refuses must not have served a request first (the disk is not a fresh device's), and
  // what activation serves counts on top of the loaded counters.
  StateReader device(device_record, std::string(state_key()) + " device");
  device_.load_state(device);
  device.expect_end();
  if (live) {
    live_.store(true, std::memory_order_release);
    device_.activate(*this, features);
  }
}

}  // namespace minivmm::devices
