// virtio-blk (device id 2, virtio 1.2 section 5.2) over a BlockFile: IN, OUT, FLUSH, GET_ID and
// DISCARD; any other type is answered VIRTIO_BLK_S_UNSUPP. Offered features: RO for a read-only
// drive, FLUSH, DISCARD (one segment per request), SEG_MAX, BLK_SIZE (512).
//
// Requests never block the thread that delivered the notification (the loop, through the
// ioeventfd, or a vCPU): they are parsed there, malformed ones answered at once, and valid ones
// go to one of two engines:
//  * io_uring (BlockUring, the default where the kernel allows it): queued on the ring and
//    submitted in one io_uring_enter per notification; the kernel does the I/O straight between
//    the file and guest RAM and signals the ring's eventfd, which the loop watches
//    (completion_fd()); on_completion_fd() then answers them. No thread of ours waits on a disk.
//  * a worker thread: one per disk, which does the preadv/pwritev/fdatasync/fallocate itself and
//    completes into the used ring; one request at a time, which is what a sequential guest needs.
// With `use_worker = false` requests run inline on the notifying thread: deterministic, for unit
// tests and the fuzzer. The transport raises the interrupts in every case.
//
// Threads: see VirtioDevice. mu_ guards the job queue, the ring and the host pointer; lock order
// mu_ -> transport lock (notify pops under mu_, ring completions answer under mu_). The worker
// completes without mu_ held.
//
// Files: the device side and request handling in virtio_blk.cc, the worker (and inline) engine
// in virtio_blk_worker.cc, the io_uring engine in virtio_blk_uring.cc, request parsing in
// virtio_blk_request.cc.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devices/host/block_file.h"
#include "devices/host/block_uring.h"
#include "devices/virtio/blk/virtio_blk_request.h"
#include "devices/virtio/virtio_device.h"

namespace minivmm::devices {

struct VirtioBlkStats {
  std::uint64_t reads = 0, writes = 0, flushes = 0, get_ids = 0, discards = 0;
  std::uint64_t bytes_read = 0, bytes_written = 0, bytes_discarded = 0;
  std::uint64_t io_errors = 0;       // host syscalls that failed (answered IOERR)
  std::uint64_t write_syncs = 0;     // writes made durable at once: FLUSH was not negotiated
  std::uint64_t unanswerable = 0;    // no usable status byte: returned with nothing written
  std::uint64_t cancelled = 0;       // queued but not started when the driver reset the device
  // io_uring engine: requests handed to the kernel, io_uring_enter calls that submitted them,
  // short transfers continued, and submissions refused (answered IOERR).
  std::uint64_t uring_requests = 0, uring_submits = 0, uring_resubmits = 0;
  std::uint64_t uring_submit_errors = 0;
  // Completion-fd wakeups that found no completion: io_uring publishes a CQE before it signals
  // the eventfd (and may defer the signal past an RCU grace period), so a reap between the two
  // takes the CQE and the signal that follows finds nothing. Legitimate, and harmless: counted.
  std::uint64_t uring_empty_wakeups = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(BlkError::kCount)> errors{};
};

class VirtioBlk final : public VirtioDevice {
  public:
  static constexpr std::uint32_t kDeviceId = 2;
  // Feature bits (5.2.3).
  static constexpr std::uint64_t kFSegMax = 1ull << 2, kFRo = 1ull << 5, kFBlkSize = 1ull << 6,
                                 kFFlush = 1ull << 9, kFDiscard = 1ull << 13;
  static constexpr std::uint16_t kQueueSize = 256;
  // Times one request is handed back to the ring after the kernel said EINTR or EAGAIN.
  static constexpr unsigned kUringRetries = 16;

  // `on_worker_start` runs first on the worker thread (minivmm installs the worker's seccomp
  // filter there); when it returns false the worker ends at once and serves nothing (the run
  // is being abandoned before the guest starts).
  VirtioBlk(BlockFile file, std::string id, bool use_worker = true,
            std::function<bool()> on_worker_start = nullptr);
  // The io_uring engine: `ring` was created for `file`'s descriptor (BlockUring::create).
  VirtioBlk(BlockFile file, std::string id, std::unique_ptr<BlockUring> ring);
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
  int completion_fd() const noexcept override { return ring_ ? ring_->event_fd() : -1; }
  void on_completion_fd() noexcept override;
  // Snapshots (virtio_blk_state.cc). quiesce() returns once every request taken from the ring
  // has completed and been published to the used ring: the worker's are waited for, the
  // io_uring's reaped here (the event loop does not run while a snapshot is written). After
  // kQuiesceTimeout it throws StateError("virtio-blk: requests still in flight").
  static constexpr std::chrono::seconds kQuiesceTimeout{5};
  void quiesce() override;
  // The end of the run, after quiesce(): the disk's lock given up now (BlockFile::unlock), so
  // the next VMM on it is not refused while this one's ring is freed after the exit.
  void release_file() noexcept { file_.unlock(); }
  // The record checks the disk: the same capacity and read-only flag (device config space),
  // then the counters.
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

  std::uint64_t capacity_sectors() const noexcept { return capacity_; }
  // "io_uring", "worker" or "inline", for the report.
  std::string_view engine() const noexcept;
  // Waits until every queued request has completed (tests; shutdown).
  void wait_idle() noexcept;
  VirtioBlkStats stats() const;
  // The report's device part, beside the transport's counters: "engine"; "io_uring" (its
  // four counters) with that engine only; "requests", with "errors" by name for the malformed
  // requests that happened.
  void report(ReportWriter& out) const override;

 private:
  struct Job {
    BlkRequest request;
    std::uint16_t head;
  };
  // A request on the ring: where its transfer stands. Indexed by the completion's tag.
  struct UringOp {
    enum class Step { kTransfer, kSync, kDiscard, kDone };
    bool active = false;
    Job job;
    VirtioQueueHost* host = nullptr;  // null: answer nothing (the device is being destroyed)
    Step step = Step::kTransfer;
    std::vector<iovec> iov;   // what is left of the transfer: advanced on a short one
    std::size_t first = 0;    // first iovec with bytes left
    std::uint64_t offset = 0;
    std::size_t next_discard = 0;
    unsigned retries = 0;     // EINTR/EAGAIN from the kernel, bounded
    int err = 0;              // errno of the failure, for the log
    bool ok = true;
    bool synced = false;
  };

  // Runs a valid request against the file and completes it. Any thread, without mu_.
  void execute(VirtioQueueHost& host, const Job& job) noexcept;
  // Counts a finished request and answers it (host null: counts it cancelled).
  void finish(VirtioQueueHost* host, const Job& job, bool ok, bool synced,
              std::uint32_t written, int err) noexcept;
  void answer(VirtioQueueHost& host, const BlkRequest& r, std::uint16_t head, std::uint8_t status,
              std::uint32_t data_len) noexcept;
  void worker_main() noexcept;
  // io_uring engine, all under mu_.
  void start_uring_locked(VirtioQueueHost& host, Job job) noexcept;
  // Queues the op's next step on the ring, or finishes it when nothing is left to do.
  void issue_locked(std::size_t tag) noexcept;
  UringOp::Step after_transfer(const UringOp& op) const noexcept;
  void submit_locked() noexcept;
  void on_uring_completion_locked(const BlockUring::Completion& c) noexcept;
  void finish_uring_locked(std::size_t tag) noexcept;
  // Waits for every request on the ring to finish (reset, wait_idle, destruction).
  void drain_ring_locked() noexcept;

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
  std::unique_ptr<BlockUring> ring_;  // io_uring engine; calls guarded by mu_
  std::vector<UringOp> ops_;          // guarded by mu_; slot = tag
  std::vector<std::uint16_t> free_ops_;  // guarded by mu_
  bool ring_queued_ = false;          // guarded by mu_: requests queued, not yet submitted

  mutable std::mutex stats_mu_;
  VirtioBlkStats stats_;  // guarded by stats_mu_

  std::function<bool()> on_worker_start_;
  std::thread worker_;  // last: starts after everything it uses
};

}  // namespace minivmm::devices
