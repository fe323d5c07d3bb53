// VirtioBlk's synchronous engine: the worker thread that runs queued requests one at a time,
// and execute(), which runs one request with BlockFile's syscalls, there or (without a worker)
// inline on the notifying thread. The device side is in virtio_blk.cc.
#include "devices/virtio/blk/virtio_blk.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace minivmm::devices {

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
      const auto iov = blk_data_iovecs(host.ram(), r);
      ok = file_.read(offset, iov);
      written = static_cast<std::uint32_t>(std::min<std::uint64_t>(r.data_bytes, UINT32_MAX));
      break;
    }
    case kBlkTOut: {
      const auto iov = blk_data_iovecs(host.ram(), r);
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

}  // namespace minivmm::devices
