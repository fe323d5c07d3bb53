// VirtioBlk's device side: construction, features and the configuration space, activation
// and reset, and request handling: each notification's chains parsed, malformed ones answered
// at once, valid ones handed to the engine; every answer counted (finish()) and the report.
// The engines that run them: virtio_blk_worker.cc (the worker thread, or inline) and
// virtio_blk_uring.cc (io_uring).
#include "devices/virtio/blk/virtio_blk.h"

#include <cstring>

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

// struct virtio_blk_config offsets (5.2.4).
constexpr std::size_t kCfgCapacity = 0, kCfgSegMax = 12, kCfgBlkSize = 20,
                      kCfgMaxDiscardSectors = 36, kCfgMaxDiscardSeg = 40,
                      kCfgDiscardAlignment = 44, kCfgSize = 60;

template <typename T>
void put(std::array<std::uint8_t, kCfgSize>& cfg, std::size_t at, T v) {
  std::memcpy(cfg.data() + at, &v, sizeof v);
}

}  // namespace

VirtioBlk::VirtioBlk(BlockFile file, std::string id, bool use_worker,
                     std::function<bool()> on_worker_start)
    : file_(std::move(file)),
      id_(std::move(id)),
      capacity_(file_.size_bytes() / kSectorSize),
      use_worker_(use_worker),
      on_worker_start_(std::move(on_worker_start)) {
  if (file_.size_bytes() % kSectorSize != 0) {
    log::warn("drive {}: size is not a multiple of 512; the last {} bytes are not visible",
              file_.path(), file_.size_bytes() % kSectorSize);
  }
  if (use_worker_) worker_ = std::thread([this] { worker_main(); });
}

VirtioBlk::VirtioBlk(BlockFile file, std::string id, std::unique_ptr<BlockUring> ring)
    : VirtioBlk(std::move(file), std::move(id), false, nullptr) {
  ring_ = std::move(ring);
  // One slot per request the queue can hold: the transport breaks a queue that has more chains
  // unanswered than its size, so the slots (and the ring's 256 entries) never run out.
  ops_.resize(kQueueSize);
  free_ops_.reserve(kQueueSize);
  for (std::size_t i = kQueueSize; i-- > 0;) free_ops_.push_back(static_cast<std::uint16_t>(i));
}

VirtioBlk::~VirtioBlk() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    // What is still queued is cancelled, not run: its transport and interrupt line may already
    // be gone (VirtioMmioDevices resets first, but nothing else has to).
    host_ = nullptr;
    if (ring_) {
      // The kernel may still be writing into guest RAM for these: wait for each, answer none
      // (the transport may be gone).
      for (UringOp& op : ops_) op.host = nullptr;
      drain_ring_locked();
    }
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::string_view VirtioBlk::engine() const noexcept {
  if (ring_) return "io_uring";
  return use_worker_ ? "worker" : "inline";
}

std::uint64_t VirtioBlk::device_features() const noexcept {
  std::uint64_t f = kFSegMax | kFBlkSize | kFFlush;
  if (file_.read_only()) {
    f |= kFRo;
  } else {
    f |= kFDiscard;
  }
  return f;
}

void VirtioBlk::read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept {
  std::array<std::uint8_t, kCfgSize> cfg{};
  put(cfg, kCfgCapacity, capacity_);
  put(cfg, kCfgSegMax, std::uint32_t{kQueueSize - 2});  // header and status take two
  put(cfg, kCfgBlkSize, std::uint32_t{kSectorSize});
  put(cfg, kCfgMaxDiscardSectors, std::uint32_t{0xffffffff});
  put(cfg, kCfgMaxDiscardSeg, std::uint32_t{1});
  put(cfg, kCfgDiscardAlignment, std::uint32_t{1});
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = offset < kCfgSize && i < kCfgSize - offset ? cfg[offset + i] : 0;
  }
}

void VirtioBlk::activate(VirtioQueueHost& host, std::uint64_t features) noexcept {
  {
    std::lock_guard lock(mu_);
    host_ = &host;
    // 5.2.6.3: a driver that did not negotiate FLUSH treats the disk as write-through, so then
    // every write is made durable before it is answered.
    write_through_.store((features & kFFlush) == 0, std::memory_order_relaxed);
  }
  // Requests a driver queued before DRIVER_OK got no service from their notify; serve them.
  queue_notify(0);
}

void VirtioBlk::reset() noexcept {
  std::unique_lock lock(mu_);
  // Requests on the ring complete into the queues first, as the worker's running job does.
  if (ring_) drain_ring_locked();
  host_ = nullptr;
  idle_cv_.wait(lock, [this] { return jobs_.empty() && !running_job_; });
}

void VirtioBlk::wait_idle() noexcept {
  std::unique_lock lock(mu_);
  if (ring_) drain_ring_locked();
  idle_cv_.wait(lock, [this] { return jobs_.empty() && !running_job_; });
}

void VirtioBlk::answer(VirtioQueueHost& host, const BlkRequest& r, std::uint16_t head,
                       std::uint8_t status, std::uint32_t data_len) noexcept {
  std::uint32_t len = data_len;
  if (r.has_status) {
    host.ram().write_obj(r.status_addr, status);
    ++len;
  }
  host.complete(0, head, len);
}

void VirtioBlk::queue_notify(std::size_t queue) noexcept {
  if (queue != 0) return;
  std::unique_lock lock(mu_);
  if (host_ == nullptr) return;
  VirtioQueueHost& host = *host_;
  bool queued = false;
  while (host.pop(0, chain_) == Virtqueue::Pop::kChain) {
    BlkRequest r = parse_blk_request(chain_, host.ram(), capacity_, file_.read_only());
    if (r.error != BlkError::kNone) {
      {
        std::lock_guard s(stats_mu_);
        ++stats_.errors[static_cast<std::size_t>(r.error)];
        if (!r.has_status) ++stats_.unanswerable;
      }
      answer(host, r, chain_.head, blk_status_for(r.error), 0);
      continue;
    }
    Job job{std::move(r), chain_.head};
    if (ring_) {
      // GET_ID touches no file: answered here.
      if (job.request.type == kBlkTGetId) {
        execute(host, job);
      } else {
        start_uring_locked(host, std::move(job));
      }
    } else if (use_worker_) {
      jobs_.push_back(std::move(job));
      queued = true;
    } else {
      execute(host, job);
    }
  }
  if (ring_) submit_locked();
  lock.unlock();
  if (queued) work_cv_.notify_one();
}

void VirtioBlk::finish(VirtioQueueHost* host, const Job& job, bool ok, bool synced,
                       std::uint32_t written, int err) noexcept {
  const BlkRequest& r = job.request;
  {
    std::lock_guard s(stats_mu_);
    switch (r.type) {
      case kBlkTIn:
        ++stats_.reads;
        if (ok) stats_.bytes_read += r.data_bytes;
        break;
      case kBlkTOut:
        ++stats_.writes;
        if (synced) ++stats_.write_syncs;
        if (ok) stats_.bytes_written += r.data_bytes;
        break;
      case kBlkTFlush:
        ++stats_.flushes;
        break;
      case kBlkTGetId:
        ++stats_.get_ids;
        break;
      case kBlkTDiscard: {
        ++stats_.discards;
        std::uint64_t bytes = 0;
        for (const DiscardSegment& seg : r.discards) {
          bytes += std::uint64_t{seg.sectors} * kSectorSize;
        }
        if (ok) stats_.bytes_discarded += bytes;
        break;
      }
      default:
        break;
    }
    if (!ok) ++stats_.io_errors;
  }
  if (!ok) {
    log::debug("drive {}: request type {} sector {} failed: {}", file_.path(), r.type, r.sector,
               std::strerror(err));
  }
  if (host != nullptr) answer(*host, r, job.head, ok ? kBlkSOk : kBlkSIoErr, ok ? written : 0);
}

VirtioBlkStats VirtioBlk::stats() const {
  std::lock_guard s(stats_mu_);
  return stats_;
}

void VirtioBlk::report(ReportWriter& out) const {
  const VirtioBlkStats s = stats();
  out.text("engine", engine());
  if (ring_) {
    out.object("io_uring", [&s](ReportWriter& uring) {
      uring.count("requests", s.uring_requests);
      uring.count("submits", s.uring_submits);
      uring.count("resubmits", s.uring_resubmits);
      uring.count("submit_errors", s.uring_submit_errors);
      uring.count("empty_wakeups", s.uring_empty_wakeups);
    });
  }
  out.object("requests", [&s](ReportWriter& requests) {
    requests.count("reads", s.reads);
    requests.count("writes", s.writes);
    requests.count("flushes", s.flushes);
    requests.count("get_ids", s.get_ids);
    requests.count("discards", s.discards);
    requests.count("bytes_read", s.bytes_read);
    requests.count("bytes_written", s.bytes_written);
    requests.count("bytes_discarded", s.bytes_discarded);
    requests.count("io_errors", s.io_errors);
    requests.count("unanswerable", s.unanswerable);
    requests.count("write_syncs", s.write_syncs);
    requests.count("cancelled", s.cancelled);
    requests.object("errors", [&s](ReportWriter& errors) {
      // From 1: kNone is no error.
      for (std::size_t e = 1; e < s.errors.size(); ++e) {
        if (s.errors[e] == 0) continue;
        errors.count(blk_error_name(static_cast<BlkError>(e)), s.errors[e]);
      }
    });
  });
}

}  // namespace minivmm::devices
