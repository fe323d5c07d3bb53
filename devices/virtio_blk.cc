#include "devices/virtio_blk.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "devices/log.h"

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

VirtioBlk::~VirtioBlk() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    // What is still queued is cancelled, not run: its transport and interrupt line may already
    // be gone (VirtioMmioDevices resets first, but nothing else has to).
    host_ = nullptr;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
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
  host_ = nullptr;
  idle_cv_.wait(lock, [this] { return jobs_.empty() && !running_job_; });
}

void VirtioBlk::wait_idle() noexcept {
  std::unique_lock lock(mu_);
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
    if (use_worker_) {
      jobs_.push_back(std::move(job));
      queued = true;
    } else {
      execute(host, job);
    }
  }
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
  std::uint32_t written = 0;
  const std::uint64_t offset = r.sector * kSectorSize;  // < capacity * 512: checked by the parser
  auto iovecs = [&] {
    std::vector<iovec> iov;
    iov.reserve(r.data.size());
    for (const Descriptor& d : r.data) {
      // In RAM: the walker checked every buffer, and RAM does not shrink.
      std::span<std::byte> s = host.ram().slice(d.addr, d.len);
      iov.push_back(iovec{s.data(), s.size()});
    }
    return iov;
  };
  switch (r.type) {
    case kBlkTIn: {
      const auto iov = iovecs();
      ok = file_.read(offset, iov);
      if (ok) written = static_cast<std::uint32_t>(std::min<std::uint64_t>(r.data_bytes, UINT32_MAX));
      std::lock_guard s(stats_mu_);
      ++stats_.reads;
      if (ok) stats_.bytes_read += r.data_bytes;
      break;
    }
    case kBlkTOut: {
      const auto iov = iovecs();
      ok = file_.write(offset, iov);
      const bool sync = ok && write_through_.load(std::memory_order_relaxed);
      if (sync) ok = file_.flush();
      std::lock_guard s(stats_mu_);
      ++stats_.writes;
      if (sync) ++stats_.write_syncs;
      if (ok) stats_.bytes_written += r.data_bytes;
      break;
    }
    case kBlkTFlush: {
      ok = file_.flush();
      std::lock_guard s(stats_mu_);
      ++stats_.flushes;
      break;
    }
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
      std::lock_guard s(stats_mu_);
      ++stats_.get_ids;
      break;
    }
    case kBlkTDiscard: {
      std::uint64_t bytes = 0;
      for (const DiscardSegment& seg : r.discards) {
        const std::uint64_t len = std::uint64_t{seg.sectors} * kSectorSize;
        // A discard is a hint (the data may stay): a file system without hole punching
        // answers OK rather than failing the guest's fstrim.
        if (!file_.discard(seg.sector * kSectorSize, len) && errno != EOPNOTSUPP) ok = false;
        bytes += len;
      }
      std::lock_guard s(stats_mu_);
      ++stats_.discards;
      if (ok) stats_.bytes_discarded += bytes;
      break;
    }
    default:
      ok = false;  // the parser only lets the types above through
      break;
  }
  if (!ok) {
    log::debug("drive {}: request type {} sector {} failed: {}", file_.path(), r.type, r.sector,
               std::strerror(errno));
    std::lock_guard s(stats_mu_);
    ++stats_.io_errors;
  }
  answer(host, r, job.head, ok ? kBlkSOk : kBlkSIoErr, ok ? written : 0);
}

VirtioBlkStats VirtioBlk::stats() const {
  std::lock_guard s(stats_mu_);
  return stats_;
}

}  // namespace minivmm::devices
