// VirtioBlk's part of a snapshot: quiescing (every request answered before the rings are
// saved, since a request half done cannot be written down) and a record that checks the disk.
#include <poll.h>

#include <cerrno>

#include "devices/virtio/blk/virtio_blk.h"

namespace minivmm::devices {
namespace {

constexpr std::uint8_t kBlkStateVersion = 1;

std::uint64_t* blk_counters(VirtioBlkStats& s, std::size_t i) {
  std::uint64_t* const fields[] = {&s.reads, &s.writes, &s.flushes, &s.get_ids, &s.discards,
                                   &s.bytes_read, &s.bytes_written, &s.bytes_discarded,
                                   &s.io_errors, &s.write_syncs, &s.unanswerable, &s.cancelled,
                                   &s.uring_requests, &s.uring_submits, &s.uring_resubmits,
                                   &s.uring_submit_errors};
  return i < std::size(fields) ? fields[i] : nullptr;
}

}  // namespace

void VirtioBlk::quiesce() {
  // Host time bounds a host wait: no guest clock is involved, and nothing here sleeps longer
  // than the work it waits for.
  const auto deadline = std::chrono::steady_clock::now() + kQuiesceTimeout;
  std::unique_lock lock(mu_);
  if (ring_) {
    submit_locked();
    while (free_ops_.size() < ops_.size()) {
      std::array<BlockUring::Completion, 32> batch;
      const std::size_t n = ring_->take(batch);
      for (std::size_t i = 0; i < n; ++i) on_uring_completion_locked(batch[i]);
      submit_locked();  // continuations of what completed
      if (n > 0) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{ring_->event_fd(), POLLIN, 0};
      lock.unlock();
      const int r = ::poll(&p, 1, static_cast<int>(left.count()) + 1);
      lock.lock();
      if (r > 0) ring_->drain_event_fd();
      if (r < 0 && errno != EINTR) break;
    }
    if (free_ops_.size() < ops_.size()) {
      throw StateError("virtio-blk: requests still in flight");
    }
  }
  if (!idle_cv_.wait_until(lock, deadline, [this] { return jobs_.empty() && !running_job_; })) {
    throw StateError("virtio-blk: requests still in flight");
  }
}

void VirtioBlk::save_state(StateWriter& out) const {
  write_version(out, kBlkStateVersion);
  out.u64(capacity_);
  out.boolean(file_.read_only());
  VirtioBlkStats s = stats();
  for (std::size_t i = 0; blk_counters(s, i) != nullptr; ++i) out.u64(*blk_counters(s, i));
  for (std::uint64_t e : s.errors) out.u64(e);
}

void VirtioBlk::load_state(StateReader& in) {
  read_version(in, kBlkStateVersion);
  const std::uint64_t capacity = in.u64();
  const bool read_only = in.boolean();
  VirtioBlkStats s;
  for (std::size_t i = 0; blk_counters(s, i) != nullptr; ++i) *blk_counters(s, i) = in.u64();
  for (std::uint64_t& e : s.errors) e = in.u64();
  in.expect_end();
  // The guest read its disk's size and mode from config space; another disk would surprise it.
  if (capacity != capacity_) {
    in.fail("a disk of " + std::to_string(capacity) + " sectors (this one has " +
            std::to_string(capacity_) + ")");
  }
  if (read_only != file_.read_only()) in.fail("the disk's read-only flag differs");
  std::lock_guard lock(stats_mu_);
  stats_ = s;
}

}  // namespace minivmm::devices
