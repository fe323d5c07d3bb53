// virtio-9p (device id 9, virtio 1.2 section 5.11): one host folder served to the guest over
// 9P2000.L (P9Server), as Linux's 9pnet_virtio and v9fs mount it:
//   mount -t 9p -o trans=virtio,version=9p2000.L TAG /mnt
// Offered feature: MOUNT_TAG; the configuration space is the tag's length (le16) and bytes.
// One request queue: each chain is one request (the device-readable part, in order) and room
// for its answer (the device-writable part); Linux's zero-copy reads put the answer's first 11
// bytes in the first writable buffer and the data in the pages after, which a reply laid out
// contiguously over the writable buffers matches.
//
// Requests never run on the notifying thread (a vCPU or the loop): a worker thread of the
// device's own gathers, serves and answers them one at a time, so a slow host disk stalls only
// the share. With `use_worker = false` they run inline (unit tests, the fuzzer).
//
// Snapshots: a share is host descriptors (one per fid) that a snapshot file cannot hold, so
// quiesce() refuses: a run with --share cannot be snapshotted (StateError, one line).
//
// Threads: see VirtioDevice. mu_ guards the job queue and the host pointer; the server is used
// only by the worker (or inline under mu_).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devices/virtio/9p/p9_server.h"
#include "devices/virtio/virtio_device.h"

namespace minivmm::devices {

class Virtio9p final : public VirtioDevice {
 public:
  static constexpr std::uint32_t kDeviceId = 9;
  static constexpr std::uint64_t kFMountTag = 1ull << 0;
  static constexpr std::uint16_t kQueueSize = 128;
  static constexpr std::size_t kMaxTagBytes = 31;

  // `tag` is at most kMaxTagBytes (the caller checks). `on_worker_start` runs first on the
  // worker thread (minivmm's seccomp filter); false ends the worker at once.
  Virtio9p(std::unique_ptr<p9::P9Server> server, std::string tag, bool use_worker = true,
           std::function<bool()> on_worker_start = nullptr);
  ~Virtio9p() override;
  Virtio9p(const Virtio9p&) = delete;
  Virtio9p& operator=(const Virtio9p&) = delete;

  std::string_view name() const noexcept override { return "9p"; }
  std::uint32_t device_id() const noexcept override { return kDeviceId; }
  std::uint64_t device_features() const noexcept override { return kFMountTag; }
  std::size_t num_queues() const noexcept override { return 1; }
  std::uint16_t queue_max_size() const noexcept override { return kQueueSize; }
  void read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept override;
  void activate(VirtioQueueHost& host, std::uint64_t features) noexcept override;
  void queue_notify(std::size_t queue) noexcept override;
  void reset() noexcept override;
  // Throws StateError: a share's host descriptors cannot go into a snapshot.
  void quiesce() override;
  // "tag", "read_only", "requests" by operation, and the server's counters.
  void report(ReportWriter& out) const override;

  const std::string& tag() const noexcept { return tag_; }
  p9::P9Stats stats() const { return server_->stats(); }
  std::uint64_t unanswerable() const;
  void wait_idle() noexcept;

 private:
  struct Job {
    std::uint16_t head = 0;
    std::vector<Descriptor> descriptors;
  };
  void worker_main() noexcept;
  void serve(VirtioQueueHost& host, const Job& job) noexcept;

  std::unique_ptr<p9::P9Server> server_;
  const std::string tag_;
  const bool use_worker_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  VirtioQueueHost* host_ = nullptr;  // guarded by mu_
  std::deque<Job> jobs_;             // guarded by mu_
  bool running_job_ = false;         // guarded by mu_
  bool stopping_ = false;            // guarded by mu_
  bool clunk_all_ = false;           // guarded by mu_: reset() asked the worker to clunk
  DescriptorChain chain_;            // guarded by mu_
  std::uint64_t unanswerable_ = 0;   // guarded by mu_: chains with no room for an answer
  std::vector<std::byte> request_, reply_;  // the worker's (or inline, under mu_)

  std::function<bool()> on_worker_start_;
  std::thread worker_;  // last: starts after everything it uses
};

}  // namespace minivmm::devices
