// VirtioBlk's io_uring engine: a request's steps (transfer, continued while short; the sync
// of a write-through write; each discard segment) queued on the ring, submitted once per
// notification or completion batch, answered from the loop when the ring's eventfd fires, and
// drained on reset and destruction. The device side is in virtio_blk.cc.
#include "devices/virtio/blk/virtio_blk.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "devices/host/iov_advance.h"
#include "devices/log/log.h"

namespace minivmm::devices {

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
      op.iov = blk_data_iovecs(host.ram(), r);
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
  std::size_t taken = 0;
  for (;;) {
    const std::size_t n = ring_->take(batch);
    for (std::size_t i = 0; i < n; ++i) on_uring_completion_locked(batch[i]);
    taken += n;
    if (n < batch.size()) break;
  }
  if (taken == 0) {
    // The signal of a completion an earlier wakeup already took (VirtioBlkStats says why).
    std::lock_guard s(stats_mu_);
    ++stats_.uring_empty_wakeups;
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

}  // namespace minivmm::devices
