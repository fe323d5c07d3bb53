// One split virtqueue (virtio 1.2 section 2.7): the descriptor table, the available ring the
// driver fills and the used ring the device fills, all in guest RAM at addresses the driver
// wrote. The guest controls every index, length and address here, so the walker checks each one
// against RAM and the queue size and bounds every loop; a malformed chain is counted by kind and
// breaks the queue (the transport then sets DEVICE_NEEDS_RESET) rather than crashing or hanging
// the VMM. Indirect descriptors (VIRTIO_RING_F_INDIRECT_DESC) and VIRTIO_F_EVENT_IDX interrupt
// suppression are supported when negotiated.
//
// Not modelled: packed virtqueues, in-order use, notification data.
//
// Threads: none of its own; the owner (VirtioMmioTransport) serializes every call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "devices/bus/device_state.h"
#include "devices/bus/guest_memory.h"

namespace minivmm::devices {

struct Descriptor {
  std::uint64_t addr = 0;
  std::uint32_t len = 0;
  bool device_writable = false;
};

struct DescriptorChain {
  std::uint16_t head = 0;
  std::vector<Descriptor> descriptors;  // in chain order, indirect tables flattened
  std::uint64_t readable_bytes = 0;
  std::uint64_t writable_bytes = 0;
};

// Why a queue broke; each is counted.
enum class QueueError : std::size_t {
  kRingOutsideRam,     // desc/avail/used rings not inside RAM at activation
  kBadSize,            // queue size 0, above the maximum or not a power of two
  kMisaligned,         // ring alignment (16/2/4) violated
  kAvailIndexJump,     // avail.idx moved by more than the queue size
  kHeadOutOfRange,     // a head index >= queue size
  kNextOutOfRange,     // a next index >= table size
  kChainTooLong,       // more descriptors than the table holds: a loop
  kBufferOutsideRam,   // a buffer's [addr, addr+len) not inside RAM
  kIndirectNotOffered, // INDIRECT flag without the feature
  kIndirectNested,     // an indirect descriptor inside an indirect table
  kIndirectBadSize,    // table length 0, not a multiple of 16 or above the limit
  kIndirectOutsideRam, // the table itself not inside RAM
  kIndirectWithNext,   // INDIRECT together with NEXT (forbidden, 2.7.5.3.1)
  kTooManyInFlight,    // a chain offered while the device already holds `size` unanswered
  kCount,
};

std::string_view queue_error_name(QueueError e) noexcept;

struct VirtqueueStats {
  std::uint64_t chains = 0;       // chains popped
  std::uint64_t descriptors = 0;  // descriptors walked (indirect ones flattened)
  std::uint64_t used = 0;         // used-ring entries written
  std::uint64_t interrupts_suppressed = 0;
  // At the moment of the report (a hung run's tells where it hangs): chains popped and not
  // answered (the device's), and chains the driver made available that are not popped yet
  // (a notify not seen).
  std::uint64_t in_flight = 0;
  std::uint64_t not_popped = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(QueueError::kCount)> errors{};
};

class Virtqueue {
 public:
  // Spec 2.7: a split queue has at most 32768 entries; ours offer fewer.
  static constexpr std::uint16_t kMaxSizeLimit = 32768;
  // An indirect table may hold at most this many descriptors (Linux uses at most queue size).
  static constexpr std::uint32_t kMaxIndirect = 1024;

  explicit Virtqueue(std::uint16_t max_size = 256) noexcept : max_size_(max_size) {}

  // Driver-written configuration (transport registers), taken as is and checked by activate().
  std::uint16_t max_size() const noexcept { return max_size_; }
  std::uint16_t size() const noexcept { return size_; }
  void set_size(std::uint16_t n) noexcept { size_ = n; }
  void set_desc_addr(std::uint64_t a) noexcept { desc_ = a; }
  void set_avail_addr(std::uint64_t a) noexcept { avail_ = a; }
  void set_used_addr(std::uint64_t a) noexcept { used_ = a; }
  std::uint64_t desc_addr() const noexcept { return desc_; }
  std::uint64_t avail_addr() const noexcept { return avail_; }
  std::uint64_t used_addr() const noexcept { return used_; }
  // QueueReady as the driver last wrote it (4.2.2): the queue goes live at activate().
  bool ready() const noexcept { return ready_; }
  // false takes a live queue out of service at once (Linux's del_vq writes QueueReady=0 and
  // reads it back): nothing more is popped, completions still owed to it are not published, and
  // the configuration may be rewritten. Indexes restart at the next activate().
  void set_ready(bool r) noexcept;

  // Checks size, alignment and that all three rings lie in `ram`; on success the queue can be
  // used (indexes from 0). On failure the queue is broken and the error counted.
  bool activate(const GuestMemory& ram, bool indirect, bool event_idx) noexcept;
  bool active() const noexcept { return active_; }
  bool broken() const noexcept { return broken_; }

  enum class Pop { kChain, kEmpty, kBroken };
  // Takes the next available chain into `out` (its vector reused). kBroken: the queue is (now)
  // broken; nothing more is popped until reset().
  Pop pop(DescriptorChain& out) noexcept;

  // Publishes `head` with `len` bytes written by the device (release order: the data written
  // before is visible to the driver before the index). Returns whether the driver wants an
  // interrupt for it (flags or used_event).
  bool push_used(std::uint16_t head, std::uint32_t len) noexcept;

  // Back to the state after device reset: configuration and indexes cleared.
  void reset() noexcept;

  // The chain popped last goes back to the available ring (VirtioQueueHost::give_back()).
  // False if nothing is popped and unanswered.
  bool unpop() noexcept;
  // Chains popped and not yet answered.
  std::uint16_t in_flight() const noexcept {
    return static_cast<std::uint16_t>(next_avail_ - next_used_);
  }

  // The transport's snapshot record of this queue (virtio_mmio_state.cc): configuration, the
  // ring positions (last_avail_idx, next used idx; the event-idx words live in guest RAM) and
  // the counters. load_state() checks a live queue's rings against `ram` as activate() does,
  // and its ring features against the driver's negotiated INDIRECT_DESC and EVENT_IDX.
  void save_state(StateWriter& out) const;
  void load_state(StateReader& in, const GuestMemory& ram, bool indirect_negotiated,
                  bool event_idx_negotiated);

  // The counters, with in_flight and not_popped as they are now (read from guest RAM).
  VirtqueueStats stats() const noexcept;

 private:
  Pop fail(QueueError e) noexcept;
  bool walk_indirect(const Descriptor& table, DescriptorChain& out) noexcept;
  bool add_buffer(std::uint64_t addr, std::uint32_t len, bool writable,
                  DescriptorChain& out) noexcept;

  const std::uint16_t max_size_;
  std::uint16_t size_ = 0;
  std::uint64_t desc_ = 0, avail_ = 0, used_ = 0;
  bool ready_ = false;

  GuestMemory ram_;
  bool active_ = false;
  bool broken_ = false;
  bool indirect_ = false;
  bool event_idx_ = false;
  std::uint16_t next_avail_ = 0;  // free-running, like the ring indexes
  std::uint16_t next_used_ = 0;
  VirtqueueStats stats_;
};

}  // namespace minivmm::devices
