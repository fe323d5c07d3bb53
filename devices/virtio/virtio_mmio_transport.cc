#include "devices/virtio/virtio_mmio_transport.h"

#include <cstring>

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

std::uint32_t load32(std::span<const std::uint8_t> data) noexcept {
  std::uint32_t v = 0;
  std::memcpy(&v, data.data(), sizeof v);
  return v;
}

void store32(std::span<std::uint8_t> data, std::uint32_t v) noexcept {
  std::memcpy(data.data(), &v, sizeof v);
}

void set_low(std::uint64_t& field, std::uint32_t v) noexcept {
  field = (field & 0xffffffff00000000ull) | v;
}
void set_high(std::uint64_t& field, std::uint32_t v) noexcept {
  field = (field & 0xffffffffull) | (std::uint64_t{v} << 32);
}

}  // namespace

VirtioMmioTransport::VirtioMmioTransport(VirtioDevice& device, const GuestMemory& ram, IrqLine& irq)
    : device_(device),
      ram_(ram),
      irq_(irq),
      name_("virtio-mmio-" + std::string(device.name())),
      offered_(device.device_features() | kVirtioFVersion1 | kVirtioFIndirectDesc |
               kVirtioFEventIdx) {
  for (std::size_t i = 0; i < device.num_queues(); ++i) {
    queues_.emplace_back(device.queue_max_size());
  }
}

std::uint32_t VirtioMmioTransport::status() const noexcept {
  std::lock_guard lock(mu_);
  return status_;
}

Virtqueue* VirtioMmioTransport::selected_locked() noexcept {
  return queue_sel_ < queues_.size() ? &queues_[queue_sel_] : nullptr;
}

std::uint32_t VirtioMmioTransport::read_register(std::uint64_t offset) noexcept {
  Virtqueue* q = selected_locked();
  switch (offset) {
    case kMagicValue: return kMagic;
    case kVersionReg: return kVersion;
    case kDeviceId: return device_.device_id();
    case kVendorIdReg: return kVendorId;
    case kDeviceFeatures:
      if (device_features_sel_ > 1) return 0;
      return static_cast<std::uint32_t>(offered_ >> (32 * device_features_sel_));
    case kQueueNumMax: return q != nullptr ? q->max_size() : 0;
    case kQueueReady: return q != nullptr && q->ready() ? 1 : 0;
    case kInterruptStatus: return interrupt_status_.load(std::memory_order_acquire);
    case kStatus: return status_;
    case kConfigGeneration: return 0;
    default:
      bad_accesses_.fetch_add(1, std::memory_order_relaxed);
      return 0;
  }
}

void VirtioMmioTransport::read(std::uint64_t offset, std::span<std::uint8_t> data) noexcept {
  if (offset >= kConfig) {
    device_.read_config(offset - kConfig, data);
    return;
  }
  if (data.size() != 4 || offset % 4 != 0) {
    bad_accesses_.fetch_add(1, std::memory_order_relaxed);
    std::memset(data.data(), 0, data.size());
    return;
  }
  std::lock_guard lock(mu_);
  store32(data, read_register(offset));
}

void VirtioMmioTransport::write(std::uint64_t offset, std::span<const std::uint8_t> data) noexcept {
  if (offset >= kConfig) {
    device_.write_config(offset - kConfig, data);
    return;
  }
  if (data.size() != 4 || offset % 4 != 0) {
    bad_accesses_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint32_t v = load32(data);
  if (offset == kQueueNotify) {
    notify(v, false);
    return;
  }
  if (offset == kStatus) {
    write_status(v);
    return;
  }
  std::lock_guard lock(mu_);
  Virtqueue* q = selected_locked();
  // Queue registers only change while the queue is not live (4.2.2.3.2: the driver writes them
  // before QueueReady and DRIVER_OK); a live ring moving under the device would be a use of
  // stale addresses.
  const bool queue_writable = q != nullptr && !q->active() && !q->broken();
  switch (offset) {
    case kDeviceFeaturesSel: device_features_sel_ = v; return;
    case kDriverFeaturesSel: driver_features_sel_ = v; return;
    case kDriverFeatures:
      if ((status_ & kStatusFeaturesOk) != 0 || driver_features_sel_ > 1) break;
      if (driver_features_sel_ == 0) {
        set_low(driver_features_, v);
      } else {
        set_high(driver_features_, v);
      }
      return;
    case kQueueSel: queue_sel_ = v; return;
    case kQueueNum:
      if (!queue_writable || v > 0xffff) break;
      q->set_size(static_cast<std::uint16_t>(v));
      return;
    case kQueueReady:
      // 4.2.2: only 0 and 1 mean anything.
      if (q == nullptr || v > 1) break;
      if (v == 0) {
        // The driver stops using the queue (Linux del_vq; 4.2.3.2 expects a queue being set up
        // to read 0): it goes out of service now, whatever the device status.
        q->set_ready(false);
        return;
      }
      // Before DRIVER_OK the queue goes live with the others at DRIVER_OK. After it, enabling a
      // queue again needs VIRTIO_F_RING_RESET (2.6.1), which is not offered: a request still in
      // flight on the old ring could complete into the new one. It reads back 0 (not live).
      if ((status_ & kStatusDriverOk) != 0 && !q->ready()) break;
      q->set_ready(true);
      return;
    case kInterruptAck:
      interrupt_status_.fetch_and(~v, std::memory_order_acq_rel);
      return;
    case kQueueDescLow:
    case kQueueDescHigh:
    case kQueueDriverLow:
    case kQueueDriverHigh:
    case kQueueDeviceLow:
    case kQueueDeviceHigh: {
      if (!queue_writable) break;
      std::uint64_t desc = q->desc_addr(), avail = q->avail_addr(), used = q->used_addr();
      if (offset == kQueueDescLow) set_low(desc, v);
      if (offset == kQueueDescHigh) set_high(desc, v);
      if (offset == kQueueDriverLow) set_low(avail, v);
      if (offset == kQueueDriverHigh) set_high(avail, v);
      if (offset == kQueueDeviceLow) set_low(used, v);
      if (offset == kQueueDeviceHigh) set_high(used, v);
      q->set_desc_addr(desc);
      q->set_avail_addr(avail);
      q->set_used_addr(used);
      return;
    }
    default: break;
  }
  bad_accesses_.fetch_add(1, std::memory_order_relaxed);
}

void VirtioMmioTransport::write_status(std::uint32_t value) noexcept {
  if (value == 0) {
    reset();
    return;
  }
  bool activate = false;
  std::uint64_t features = 0;
  {
    std::lock_guard lock(mu_);
    // 2.1: the status is 8 bits, and DEVICE_NEEDS_RESET is the device's to set; a driver that
    // writes it (or bits past the field, or the undefined 0x10/0x20) would have the device
    // refuse service with no interrupt to say why. Ignored and counted, like Linux never does.
    if ((value & ~kDriverStatusBits) != 0) {
      bad_accesses_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // 2.1.2: the driver never clears a status bit; only writing 0 resets. A write that would
    // clear one (to re-negotiate features under live queues, say) is ignored and counted.
    const std::uint32_t held = status_ & ~kStatusNeedsReset;
    if ((value & held) != held) {
      bad_accesses_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    std::uint32_t next = value | (status_ & kStatusNeedsReset);
    if ((value & kStatusFeaturesOk) != 0 && (status_ & kStatusFeaturesOk) == 0) {
      // 3.1.1 step 5: the device refuses a subset it cannot support. Accepting a bit we did not
      // offer, or running without VERSION_1 (we have no legacy interface), is refused.
      const bool subset = (driver_features_ & ~offered_) == 0;
      if (!subset || (driver_features_ & kVirtioFVersion1) == 0) {
        next &= ~kStatusFeaturesOk;
        features_refused_.fetch_add(1, std::memory_order_relaxed);
        log::debug("{}: refused driver features 0x{:x} (offered 0x{:x})", name_,
                   driver_features_, offered_);
      }
    }
    if ((value & kStatusDriverOk) != 0 && (status_ & kStatusDriverOk) == 0) {
      if ((next & kStatusFeaturesOk) == 0) {
        // DRIVER_OK without a successful negotiation: nothing goes live.
        next &= ~kStatusDriverOk;
        bad_accesses_.fetch_add(1, std::memory_order_relaxed);
      } else {
        const bool indirect = (driver_features_ & kVirtioFIndirectDesc) != 0;
        const bool event_idx = (driver_features_ & kVirtioFEventIdx) != 0;
        bool ok = true;
        for (Virtqueue& q : queues_) {
          if (q.ready() && !q.activate(ram_, indirect, event_idx)) ok = false;
        }
        status_ = next;
        if (!ok) {
          set_needs_reset_locked();
        } else {
          activate = true;
          features = driver_features_;
        }
        next = status_;
      }
    }
    status_ = next;
  }
  if (activate) {
    live_.store(true, std::memory_order_release);
    device_.activate(*this, features);
  }
}

void VirtioMmioTransport::reset() noexcept {
  live_.store(false, std::memory_order_release);
  // Without mu_: the device waits for its in-flight requests, which complete through mu_.
  device_.reset();
  std::lock_guard lock(mu_);
  for (Virtqueue& q : queues_) q.reset();
  status_ = 0;
  device_features_sel_ = 0;
  driver_features_sel_ = 0;
  driver_features_ = 0;
  queue_sel_ = 0;
  interrupt_status_.store(0, std::memory_order_release);
  resets_.fetch_add(1, std::memory_order_relaxed);
}

void VirtioMmioTransport::set_needs_reset_locked() noexcept {
  if ((status_ & kStatusNeedsReset) != 0) return;
  status_ |= kStatusNeedsReset;
  needs_reset_.fetch_add(1, std::memory_order_relaxed);
  log::debug("{}: DEVICE_NEEDS_RESET", name_);
  // 4.2.2.1: a configuration change notification tells a DRIVER_OK driver to look at status.
  if ((status_ & kStatusDriverOk) != 0) {
    interrupt_status_.fetch_or(kInterruptConfigChange, std::memory_order_acq_rel);
    config_interrupts_.fetch_add(1, std::memory_order_relaxed);
    irq_.pulse();
  }
}

void VirtioMmioTransport::notify(std::uint32_t queue, bool from_eventfd) noexcept {
  (from_eventfd ? notifies_eventfd_ : notifies_vcpu_).fetch_add(1, std::memory_order_relaxed);
  if (!live_.load(std::memory_order_acquire) || queue >= queues_.size()) {
    bad_notifies_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  {
    // A queue the driver never enabled, took out of service (QueueReady=0) or that broke: the
    // device would find nothing to pop; say so in the counter instead.
    std::lock_guard lock(mu_);
    if (!queues_[queue].active()) {
      bad_notifies_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  device_.queue_notify(queue);
}

void VirtioMmioTransport::notify_from_eventfd(std::uint32_t queue) noexcept {
  notify(queue, true);
}

Virtqueue::Pop VirtioMmioTransport::pop(std::size_t queue, DescriptorChain& out) noexcept {
  std::lock_guard lock(mu_);
  if (queue >= queues_.size() || (status_ & kStatusNeedsReset) != 0) return Virtqueue::Pop::kBroken;
  Virtqueue& q = queues_[queue];
  const Virtqueue::Pop r = q.pop(out);
  if (r == Virtqueue::Pop::kBroken) set_needs_reset_locked();
  return r;
}

void VirtioMmioTransport::complete(std::size_t queue, std::uint16_t head,
                                   std::uint32_t len) noexcept {
  std::lock_guard lock(mu_);
  if (queue >= queues_.size()) return;
  if (!queues_[queue].push_used(head, len)) return;
  interrupt_status_.fetch_or(kInterruptUsedBuffer, std::memory_order_acq_rel);
  interrupts_.fetch_add(1, std::memory_order_relaxed);
  irq_.pulse();
}

void VirtioMmioTransport::give_back(std::size_t queue) noexcept {
  std::lock_guard lock(mu_);
  if (queue < queues_.size()) queues_[queue].unpop();
}

VirtioMmioStats VirtioMmioTransport::stats() const {
  VirtioMmioStats s;
  s.notifies_vcpu = notifies_vcpu_.load(std::memory_order_relaxed);
  s.notifies_eventfd = notifies_eventfd_.load(std::memory_order_relaxed);
  s.bad_notifies = bad_notifies_.load(std::memory_order_relaxed);
  s.interrupts = interrupts_.load(std::memory_order_relaxed);
  s.config_interrupts = config_interrupts_.load(std::memory_order_relaxed);
  s.resets = resets_.load(std::memory_order_relaxed);
  s.features_refused = features_refused_.load(std::memory_order_relaxed);
  s.needs_reset = needs_reset_.load(std::memory_order_relaxed);
  s.bad_accesses = bad_accesses_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  for (const Virtqueue& q : queues_) s.queues.push_back(q.stats());
  return s;
}

void VirtioMmioTransport::report(ReportWriter& out) const {
  const VirtioMmioStats s = stats();
  out.count("notifies_vcpu", s.notifies_vcpu);
  out.count("notifies_ioeventfd", s.notifies_eventfd);
  out.count("bad_notifies", s.bad_notifies);
  out.count("interrupts", s.interrupts);
  out.count("config_interrupts", s.config_interrupts);
  out.count("resets", s.resets);
  out.count("features_refused", s.features_refused);
  out.count("needs_reset", s.needs_reset);
  out.count("bad_accesses", s.bad_accesses);
  out.list("queues", s.queues.size(), [&s](std::size_t i, ReportWriter& queue) {
    const VirtqueueStats& q = s.queues[i];
    queue.count("chains", q.chains);
    queue.count("descriptors", q.descriptors);
    queue.count("used", q.used);
    queue.count("interrupts_suppressed", q.interrupts_suppressed);
    queue.count("in_flight", q.in_flight);
    queue.count("not_popped", q.not_popped);
    queue.object("errors", [&q](ReportWriter& errors) {
      for (std::size_t e = 0; e < q.errors.size(); ++e) {
        if (q.errors[e] == 0) continue;
        errors.count(queue_error_name(static_cast<QueueError>(e)), q.errors[e]);
      }
    });
  });
}

}  // namespace minivmm::devices
