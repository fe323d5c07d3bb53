#include "devices/virtio/blk/virtio_blk.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "devices/host/iov_advance.h"
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

// The request's data buffers as host iovecs. In RAM: the walker checked every buffer, and RAM
// does not shrink.
std::vector<iovec> iovecs(const GuestMemory& ram, const BlkRequest& r) {
  std::vector<iovec> iov;
  iov.reserve(r.data.size());
  for (const Descriptor& d : r.data) {
    std::span<std::byte> s = ram.slice(d.addr, d.len);
    iov.push_back(iovec{s.data(), s.size()});
  }
  return iov;
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

void VirtioBlk::worker_main() noexcept {
  if (on_worker_start_ && !on_worker_start_()) return;
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left (queued jobs are cancelled below)
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    running_job_ = true;
    // host_ cannot go away while a job runs: reset() waits for running_job_ to clear.
    VirtioQueueHost* host = host_;
    lock.unlock();
    if (host != nullptr) {
      execute(*host, job);
    } else {
      std::lock_guard s(stats_mu_);
      ++stats_.cancelled;
    }
    lock.lock();
    running_job_ = false;
    if (jobs_.empty()) idle_cv_.notify_all();
  }
}

void VirtioBlk::execute(VirtioQueueHost& host, const Job& job) noexcept {
  const BlkRequest& r = job.request;
  bool ok = true;
  bool synced = false;
  std::uint32_t written = 0;
  const std::uint64_t offset = r.sector * kSectorSize;  // < capacity * 512: checked by the parser
  switch (r.type) {
    case kBlkTIn: {
      const auto iov = iovecs(host.ram(), r);
      ok = file_.read(offset, iov);
      written = static_cast<std::uint32_t>(std::min<std::uint64_t>(r.data_bytes, UINT32_MAX));
      break;
    }
    case kBlkTOut: {
      const auto iov = iovecs(host.ram(), r);
      ok = file_.write(offset, iov);
      synced = ok && write_through_.load(std::memory_order_relaxed);
      if (synced) ok = file_.flush();
      break;
    }
    case kBlkTFlush:
      ok = file_.flush();
      break;
    case kBlkTGetId: {
      // The id, NUL-padded, truncated to the buffers (5.2.6: 20 bytes, no NUL if exactly 20).
      std::array<std::byte, kBlkIdBytes> id{};
      std::memcpy(id.data(), id_.data(), std::min(id_.size(), id.size()));
      std::size_t at = 0;
      for (const Descriptor& d : r.data) {
        if (at == id.size()) break;
        const std::size_t n = std::min<std::size_t>(d.len, id.size() - at);
        host.ram().write(d.addr, std::span(id).subspan(at, n));
        at += n;
      }
      written = static_cast<std::uint32_t>(at);
      break;
    }
    case kBlkTDiscard:
      for (const DiscardSegment& seg : r.discards) {
        // A discard is a hint (the data may stay): a file system without hole punching
        // answers OK rather than failing the guest's fstrim.
        if (!file_.discard(seg.sector * kSectorSize, std::uint64_t{seg.sectors} * kSectorSize) &&
            errno != EOPNOTSUPP) {
          ok = false;
        }
      }
      break;
    default:
      ok = false;  // the parser only lets the types above through
      break;
  }
  finish(&host, job, ok, synced, written, ok ? 0 : errno);
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

void VirtioBlk::start_uring_locked(VirtioQueueHost& host, Job job) noexcept {
  if (free_ops_.empty()) {
    // Cannot happen (see the constructor); answered rather than lost if it ever does.
    finish(&host, job, false, false, 0, EBUSY);
    return;
  }
  const std::uint16_t tag = free_ops_.back();
  free_ops_.pop_back();
  UringOp& op = ops_[tag];
  op = UringOp{};
  op.active = true;
  op.job = std::move(job);
  op.host = &host;
  const BlkRequest& r = op.job.request;
  op.offset = r.sector * kSectorSize;
  switch (r.type) {
    case kBlkTIn:
    case kBlkTOut:
      op.iov = iovecs(host.ram(), r);
      op.step = UringOp::Step::kTransfer;
      break;
    case kBlkTFlush:
      op.step = UringOp::Step::kSync;
      break;
    default:  // kBlkTDiscard: the parser passes no other type here
      op.step = r.discards.empty() ? UringOp::Step::kDone : UringOp::Step::kDiscard;
      break;
  }
  {
    std::lock_guard s(stats_mu_);
    ++stats_.uring_requests;
  }
  issue_locked(tag);
}

void VirtioBlk::issue_locked(std::size_t tag) noexcept {
  UringOp& op = ops_[tag];
  const BlkRequest& r = op.job.request;
  if (op.step == UringOp::Step::kTransfer) {
    op.first = advance_iov(op.iov, op.first, 0);
    if (op.first == op.iov.size()) op.step = after_transfer(op);  // nothing (left) to move
  }
  bool queued = true;
  const std::span<const iovec> rest(op.iov.data() + op.first, op.iov.size() - op.first);
  switch (op.step) {
    case UringOp::Step::kTransfer:
      queued = r.type == kBlkTIn ? ring_->queue_readv(tag, op.offset, rest)
                                 : ring_->queue_writev(tag, op.offset, rest);
      break;
    case UringOp::Step::kSync:
      queued = ring_->queue_fdatasync(tag);
      break;
    case UringOp::Step::kDiscard: {
      const DiscardSegment& seg = r.discards[op.next_discard];
      queued = ring_->queue_punch_hole(tag, seg.sector * kSectorSize,
                                       std::uint64_t{seg.sectors} * kSectorSize);
      break;
    }
    case UringOp::Step::kDone:
      finish_uring_locked(tag);
      return;
  }
  if (queued) {
    ring_queued_ = true;
    return;
  }
  // The submission queue is full: cannot happen with one entry per slot; answered if it does.
  op.ok = false;
  op.err = EBUSY;
  finish_uring_locked(tag);
}

VirtioBlk::UringOp::Step VirtioBlk::after_transfer(const UringOp& op) const noexcept {
  // 5.2.6.3: without FLUSH negotiated, a write is durable before it is answered.
  if (op.ok && op.job.request.type == kBlkTOut && write_through_.load(std::memory_order_relaxed)) {
    return UringOp::Step::kSync;
  }
  return UringOp::Step::kDone;
}

void VirtioBlk::on_uring_completion_locked(const BlockUring::Completion& c) noexcept {
  if (c.tag >= ops_.size() || !ops_[c.tag].active) return;  // not ours: cannot happen
  const std::size_t tag = static_cast<std::size_t>(c.tag);
  UringOp& op = ops_[tag];
  const BlkRequest& r = op.job.request;
  // The kernel may answer a transient "try again"; a request is retried a bounded number of
  // times, then fails with that error.
  if ((c.result == -EINTR || c.result == -EAGAIN) && op.retries < kUringRetries) {
    ++op.retries;
    issue_locked(tag);
    return;
  }
  auto fail = [&op](int err) {
    op.ok = false;
    op.err = err;
    op.step = UringOp::Step::kDone;
  };
  switch (op.step) {
    case UringOp::Step::kTransfer:
      if (c.result < 0) {
        fail(-c.result);
      } else if (c.result == 0) {
        fail(EIO);  // end of file inside the disk: the file shrank under us
      } else {
        // A short transfer continues where it stopped, as BlockFile::transfer does.
        op.offset += static_cast<std::uint64_t>(c.result);
        op.first = advance_iov(op.iov, op.first, static_cast<std::size_t>(c.result));
        if (op.first < op.iov.size()) {
          std::lock_guard s(stats_mu_);
          ++stats_.uring_resubmits;
        }
      }
      break;
    case UringOp::Step::kSync:
      op.synced = r.type == kBlkTOut;  // a write-through write's sync, counted as execute() does
      if (c.result < 0) {
        fail(-c.result);
      } else {
        op.step = UringOp::Step::kDone;
      }
      break;
    case UringOp::Step::kDiscard:
      // A discard is a hint: a file system without hole punching answers OK (see execute()).
      if (c.result < 0 && c.result != -EOPNOTSUPP) {
        op.ok = false;
        op.err = -c.result;
      }
      if (++op.next_discard == r.discards.size()) op.step = UringOp::Step::kDone;
      break;
    case UringOp::Step::kDone:
      break;
  }
  issue_locked(tag);
}

void VirtioBlk::finish_uring_locked(std::size_t tag) noexcept {
  UringOp& op = ops_[tag];
  const Job job = std::move(op.job);
  VirtioQueueHost* const host = op.host;
  const bool ok = op.ok;
  const bool synced = op.synced;
  const int err = op.err;
  op = UringOp{};
  free_ops_.push_back(static_cast<std::uint16_t>(tag));
  const std::uint32_t written =
      job.request.type == kBlkTIn
          ? static_cast<std::uint32_t>(std::min<std::uint64_t>(job.request.data_bytes, UINT32_MAX))
          : 0;
  finish(host, job, ok, synced, written, err);
}

void VirtioBlk::submit_locked() noexcept {
  if (!ring_queued_) return;
  const int r = ring_->submit();
  std::lock_guard s(stats_mu_);
  if (r >= 0) {
    ring_queued_ = false;
    ++stats_.uring_submits;
    return;
  }
  // The kernel refused for now (-ENOMEM, -EAGAIN): the requests stay queued and go with the
  // next notification's or completion's submit, or with a drain.
  ++stats_.uring_submit_errors;
  log::warn("drive {}: io_uring submit: {}", file_.path(), std::strerror(-r));
}

void VirtioBlk::on_completion_fd() noexcept {
  if (!ring_) return;
  // Cleared before reaping: a completion posted after the reap signals again.
  ring_->drain_event_fd();
  std::lock_guard lock(mu_);
  std::array<BlockUring::Completion, 32> batch;
  for (;;) {
    const std::size_t n = ring_->take(batch);
    for (std::size_t i = 0; i < n; ++i) on_uring_completion_locked(batch[i]);
    if (n < batch.size()) break;
  }
  submit_locked();  // continued transfers, write-through syncs, later discard segments
}

void VirtioBlk::drain_ring_locked() noexcept {
  unsigned failures = 0;
  while (free_ops_.size() < ops_.size()) {
    BlockUring::Completion c;
    if (!ring_->wait(c)) {
      // Nothing a healthy ring says to a wait. Giving up leaves requests the kernel may still
      // complete into guest RAM, so only after trying hard, and loudly.
      log::error("drive {}: io_uring wait: {}", file_.path(), std::strerror(errno));
      if (++failures == 100) {
        log::error("drive {}: {} requests left on the ring", file_.path(),
                   ops_.size() - free_ops_.size());
        break;
      }
      continue;
    }
    failures = 0;
    on_uring_completion_locked(c);
  }
  // Every request answered: wait() submitted whatever was queued, continuations included. After
  // giving up, what is queued stays queued for the next submit.
  if (free_ops_.size() == ops_.size()) ring_queued_ = false;
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
