// virtio-blk (device id 2, virtio 1.2 section 5.2) over a BlockFile: IN, OUT, FLUSH, GET_ID and
// DISCARD; any other type is answered VIRTIO_BLK_S_UNSUPP. Offered features: RO for a read-only
// drive, FLUSH, DISCARD (one segment per request), SEG_MAX, BLK_SIZE (512).
//
// Requests never block the thread that delivered the notification (the loop, through the
// ioeventfd, or a vCPU): they are parsed there, malformed ones answered at once, and valid ones
// queued to one worker thread, which does the preadv/pwritev/fdatasync/fallocate straight
// between the file and guest RAM and completes into the used ring (the transport raises the
// interrupt). liburing is not used (not installed where this was written); one worker serializes
// the I/O, which is what a sequential guest needs. With `use_worker = false` requests run inline
// on the notifying thread: deterministic, for unit tests and the fuzzer.
//
// Threads: see VirtioDevice. mu_ guards the job queue and the host pointer; lock order
// mu_ -> transport lock (notify pops under mu_). The worker completes without mu_ held.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "devices/block_file.h"
#include "devices/virtio_blk_request.h"
#include "devices/virtio_device.h"

namespace minivmm::devices {

struct VirtioBlkStats {
  std::uint64_t reads = 0, writes = 0, flushes = 0, get_ids = 0, discards = 0;
  std::uint64_t bytes_read = 0, bytes_written = 0, bytes_discarded = 0;
  std::uint64_t io_errors = 0;       // host syscalls that failed (answered IOERR)
  std::uint64_t write_syncs = 0;     // writes made durable at once: FLUSH was not negotiated
  std::uint64_t unanswerable = 0;    // no usable status byte: returned with nothing written
  std::uint64_t cancelled = 0;       // queued but not started when the driver reset the device
  std::array<std::uint64_t, static_cast<std::size_t>(BlkError::kCount)> errors{};
};

class VirtioBlk final : public VirtioDevice {
  public:
  static constexpr std::uint32_t kDeviceId = 2;
  // Feature bits (5.2.3).
  static constexpr std::uint64_t kFSegMax = 1ull << 2, kFRo = 1ull << 5, kFBlkSize = 1ull << 6,
                                 kFFlush = 1ull << 9, kFDiscard = 1ull << 13;
  static constexpr std::uint16_t kQueueSize = 256;

  // `on_worker_start` runs first on the worker thread (minivmm installs the worker's seccomp
  // filter there); when it returns false the worker ends at once and serves nothing (the run
  // is being abandoned before the guest starts).
  VirtioBlk(BlockFile file, std::string id, bool use_worker = true,
            std::function<bool()> on_worker_start = nullptr);
  ~VirtioBlk() override;
  VirtioBlk(const VirtioBlk&) = delete;
  VirtioBlk& operator=(const VirtioBlk&) = delete;

  std::string_view name() const noexcept override { return "blk"; }
  std::uint32_t device_id() const noexcept override { return kDeviceId; }
  std::uint64_t device_features() const noexcept override;
  std::size_t num_queues() const noexcept override { return 1; }
  std::uint16_t queue_max_size() const noexcept override { return kQueueSize; }
  void read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept override;
  void activate(VirtioQueueHost& host, std::uint64_t features) noexcept override;
  void queue_notify(std::size_t queue) noexcept override;
  void reset() noexcept override;

  std::uint64_t capacity_sectors() const noexcept { return capacity_; }
  // Waits until every queued request has completed (tests; shutdown).
  void wait_idle() noexcept;
  VirtioBlkStats stats() const;

 private:
  struct Job {
    BlkRequest request;
    std::uint16_t head;
  };
  // Runs a valid request against the file and completes it. Any thread, without mu_.
  void execute(VirtioQueueHost& host, const Job& job) noexcept;
  void answer(VirtioQueueHost& host, const BlkRequest& r, std::uint16_t head, std::uint8_t status,
              std::uint32_t data_len) noexcept;
  void worker_main() noexcept;

  BlockFile file_;
  const std::string id_;
  const std::uint64_t capacity_;
  const bool use_worker_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // jobs queued, or stopping
  std::condition_variable idle_cv_;  // jobs_ empty and nothing running
  VirtioQueueHost* host_ = nullptr;  // guarded by mu_; null while not activated
  std::deque<Job> jobs_;             // guarded by mu_
  bool running_job_ = false;         // guarded by mu_
  bool stopping_ = false;            // guarded by mu_
  std::atomic<bool> write_through_{false};  // FLUSH not negotiated: fdatasync every write
  DescriptorChain chain_;            // guarded by mu_ (reused buffer)

  mutable std::mutex stats_mu_;
  VirtioBlkStats stats_;  // guarded by stats_mu_

  std::function<bool()> on_worker_start_;
  std::thread worker_;  // last: starts after everything it uses
};

}  // namespace minivmm::devices
