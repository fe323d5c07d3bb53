#include "devices/virtio/virtqueue.h"

#include <atomic>

namespace minivmm::devices {
namespace {

// virtio 1.2 section 2.7.5: struct virtq_desc.
struct RawDesc {
  std::uint64_t addr;
  std::uint32_t len;
  std::uint16_t flags;
  std::uint16_t next;
};
static_assert(sizeof(RawDesc) == 16);

struct RawUsedElem {
  std::uint32_t id;
  std::uint32_t len;
};
static_assert(sizeof(RawUsedElem) == 8);

constexpr std::uint16_t kDescNext = 1;
constexpr std::uint16_t kDescWrite = 2;
constexpr std::uint16_t kDescIndirect = 4;
constexpr std::uint16_t kAvailNoInterrupt = 1;  // VIRTQ_AVAIL_F_NO_INTERRUPT

// Orders our guest-RAM accesses against the guest's (which runs concurrently on another CPU).
// GCC's ThreadSanitizer rejects fences (-Wtsan, an error with -Werror); a TSan build has no
// guest to order against, so an atomic read-modify-write of a local stands in there.
void fence(std::memory_order order) noexcept {
#if defined(__SANITIZE_THREAD__)
  std::atomic<int> local{0};
  local.exchange(1, order);
#else
  std::atomic_thread_fence(order);
#endif
}

}  // namespace

std::string_view queue_error_name(QueueError e) noexcept {
  switch (e) {
    case QueueError::kRingOutsideRam: return "ring_outside_ram";
    case QueueError::kBadSize: return "bad_size";
    case QueueError::kMisaligned: return "misaligned";
    case QueueError::kAvailIndexJump: return "avail_index_jump";
    case QueueError::kHeadOutOfRange: return "head_out_of_range";
    case QueueError::kNextOutOfRange: return "next_out_of_range";
    case QueueError::kChainTooLong: return "chain_too_long";
    case QueueError::kBufferOutsideRam: return "buffer_outside_ram";
    case QueueError::kIndirectNotOffered: return "indirect_not_offered";
    case QueueError::kIndirectNested: return "indirect_nested";
    case QueueError::kIndirectBadSize: return "indirect_bad_size";
    case QueueError::kIndirectOutsideRam: return "indirect_outside_ram";
    case QueueError::kIndirectWithNext: return "indirect_with_next";
    case QueueError::kTooManyInFlight: return "too_many_in_flight";
    case QueueError::kCount: break;
  }
  return "unknown";
}

void Virtqueue::set_ready(bool r) noexcept {
  ready_ = r;
  if (!r) {
    active_ = false;
    // A broken queue out of service is just out of service: the transport's
    // DEVICE_NEEDS_RESET, not this flag, keeps the device from serving until reset.
    broken_ = false;
  }
}

bool Virtqueue::activate(const GuestMemory& ram, bool indirect, bool event_idx) noexcept {
  ram_ = ram;
  indirect_ = indirect;
  event_idx_ = event_idx;
  next_avail_ = 0;
  next_used_ = 0;
  active_ = false;
  if (size_ == 0 || size_ > max_size_ || (size_ & (size_ - 1)) != 0) {
    fail(QueueError::kBadSize);
    return false;
  }
  if (desc_ % 16 != 0 || avail_ % 2 != 0 || used_ % 4 != 0) {
    fail(QueueError::kMisaligned);
    return false;
  }
  const std::uint64_t n = size_;
  if (!ram.contains(desc_, 16 * n) || !ram.contains(avail_, 6 + 2 * n) ||
      !ram.contains(used_, 6 + 8 * n)) {
    fail(QueueError::kRingOutsideRam);
    return false;
  }
  broken_ = false;
  active_ = true;
  return true;
}

Virtqueue::Pop Virtqueue::fail(QueueError e) noexcept {
  ++stats_.errors[static_cast<std::size_t>(e)];
  broken_ = true;
  active_ = false;
  return Pop::kBroken;
}

bool Virtqueue::add_buffer(std::uint64_t addr, std::uint32_t len, bool writable,
                           DescriptorChain& out) noexcept {
  if (!ram_.contains(addr, len)) return false;
  out.descriptors.push_back(Descriptor{addr, len, writable});
  (writable ? out.writable_bytes : out.readable_bytes) += len;
  ++stats_.descriptors;
  return true;
}

Virtqueue::Pop Virtqueue::pop(DescriptorChain& out) noexcept {
  if (broken_ || !active_) return broken_ ? Pop::kBroken : Pop::kEmpty;
  out.descriptors.clear();
  out.readable_bytes = 0;
  out.writable_bytes = 0;

  std::uint16_t avail_idx = 0;
  ram_.read_obj(avail_ + 2, avail_idx);  // in RAM: checked by activate()
  if (avail_idx == next_avail_) return Pop::kEmpty;
  if (static_cast<std::uint16_t>(avail_idx - next_avail_) > size_) {
    return fail(QueueError::kAvailIndexJump);
  }
  // A driver owns at most `size` descriptors' worth of chains, so the device can never hold
  // more than `size` unanswered; one that republishes heads still in flight would otherwise
  // grow the device's queue of work without bound (QEMU: "Virtqueue size exceeded").
  if (static_cast<std::uint16_t>(next_avail_ - next_used_) >= size_) {
    return fail(QueueError::kTooManyInFlight);
  }
  // The ring entry and the descriptors are read after the index (the driver wrote them first).
  fence(std::memory_order_acquire);
  std::uint16_t head = 0;
  ram_.read_obj(avail_ + 4 + 2 * std::uint64_t{static_cast<std::uint16_t>(next_avail_ % size_)},
                head);
  if (head >= size_) return fail(QueueError::kHeadOutOfRange);
  out.head = head;

  std::uint16_t index = head;
  for (std::uint32_t count = 1;; ++count) {
    // A chain visits each descriptor at most once, so more than `size_` steps is a loop.
    if (count > size_) return fail(QueueError::kChainTooLong);
    RawDesc d{};
    ram_.read_obj(desc_ + 16 * std::uint64_t{index}, d);
    if ((d.flags & kDescIndirect) != 0) {
      if (!indirect_) return fail(QueueError::kIndirectNotOffered);
      if ((d.flags & kDescNext) != 0) return fail(QueueError::kIndirectWithNext);
      if (d.len == 0 || d.len % 16 != 0 || d.len / 16 > kMaxIndirect) {
        return fail(QueueError::kIndirectBadSize);
      }
      if (!ram_.contains(d.addr, d.len)) return fail(QueueError::kIndirectOutsideRam);
      const std::uint32_t n = d.len / 16;
      std::uint32_t i = 0;
      for (std::uint32_t steps = 1;; ++steps) {
        if (steps > n) return fail(QueueError::kChainTooLong);
        RawDesc e{};
        ram_.read_obj(d.addr + 16 * std::uint64_t{i}, e);
        if ((e.flags & kDescIndirect) != 0) return fail(QueueError::kIndirectNested);
        if (!add_buffer(e.addr, e.len, (e.flags & kDescWrite) != 0, out)) {
          return fail(QueueError::kBufferOutsideRam);
        }
        if ((e.flags & kDescNext) == 0) break;
        i = e.next;
        if (i >= n) return fail(QueueError::kNextOutOfRange);
      }
      break;  // an indirect descriptor ends the chain (no NEXT, checked above)
    }
    if (!add_buffer(d.addr, d.len, (d.flags & kDescWrite) != 0, out)) {
      return fail(QueueError::kBufferOutsideRam);
    }
    if ((d.flags & kDescNext) == 0) break;
    index = d.next;
    if (index >= size_) return fail(QueueError::kNextOutOfRange);
  }

  ++next_avail_;
  ++stats_.chains;
  if (event_idx_) {
    // avail_event: "notify me when you make entry next_avail_ available" (2.7.10).
    ram_.write_obj(used_ + 4 + 8 * std::uint64_t{size_}, next_avail_);
    // The next pop's read of avail.idx must not pass this store (x86 reorders store->load):
    // a driver that read the old avail_event skipped its notify, and relies on us seeing the
    // entry it published then (virtio 1.2, 2.7.10).
    fence(std::memory_order_seq_cst);
  }
  return Pop::kChain;
}

bool Virtqueue::push_used(std::uint16_t head, std::uint32_t len) noexcept {
  if (!active_) return false;
  const std::uint16_t old_idx = next_used_;
  const RawUsedElem elem{head, len};
  ram_.write_obj(used_ + 4 + 8 * std::uint64_t{static_cast<std::uint16_t>(old_idx % size_)}, elem);
  // The element (and the buffer contents before it) must be visible before the index.
  fence(std::memory_order_release);
  const std::uint16_t new_idx = static_cast<std::uint16_t>(old_idx + 1);
  ram_.write_obj(used_ + 2, new_idx);
  next_used_ = new_idx;
  ++stats_.used;
  // The index store must be ordered before the suppression read, or the driver may re-enable
  // interrupts after we looked and miss this entry (Linux virtio_mb).
  fence(std::memory_order_seq_cst);
  bool want = false;
  if (event_idx_) {
    std::uint16_t used_event = 0;
    ram_.read_obj(avail_ + 4 + 2 * std::uint64_t{size_}, used_event);
    // vring_need_event(used_event, new_idx, old_idx)
    want = static_cast<std::uint16_t>(new_idx - used_event - 1) <
           static_cast<std::uint16_t>(new_idx - old_idx);
  } else {
    std::uint16_t flags = 0;
    ram_.read_obj(avail_, flags);
    want = (flags & kAvailNoInterrupt) == 0;
  }
  if (!want) ++stats_.interrupts_suppressed;
  return want;
}

VirtqueueStats Virtqueue::stats() const noexcept {
  VirtqueueStats s = stats_;
  s.in_flight = in_flight();
  if (active_) {
    std::uint16_t avail_idx = 0;
    ram_.read_obj(avail_ + 2, avail_idx);
    s.not_popped = static_cast<std::uint16_t>(avail_idx - next_avail_);
  }
  return s;
}

bool Virtqueue::unpop() noexcept {
  if (in_flight() == 0) return false;
  --next_avail_;
  --stats_.chains;
  return true;
}

void Virtqueue::reset() noexcept {
  size_ = 0;
  desc_ = avail_ = used_ = 0;
  ready_ = false;
  active_ = false;
  broken_ = false;
  next_avail_ = 0;
  next_used_ = 0;
}

}  // namespace minivmm::devices
