// Virtio9p: the queue side of the 9p device; the protocol and the host folder are P9Server's.
#include "devices/virtio/9p/virtio_9p.h"

#include <algorithm>
#include <cstring>

#include "devices/bus/device_state.h"

namespace minivmm::devices {

Virtio9p::Virtio9p(std::unique_ptr<p9::P9Server> server, std::string tag, bool use_worker,
                   std::function<bool()> on_worker_start)
    : server_(std::move(server)),
      tag_(tag.substr(0, kMaxTagBytes)),
      use_worker_(use_worker),
      on_worker_start_(std::move(on_worker_start)) {
  if (use_worker_) worker_ = std::thread([this] { worker_main(); });
}

Virtio9p::~Virtio9p() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    host_ = nullptr;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Virtio9p::read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept {
  // struct virtio_9p_config: le16 tag_len, then the tag (no NUL).
  std::vector<std::uint8_t> cfg(2 + tag_.size());
  cfg[0] = static_cast<std::uint8_t>(tag_.size());
  cfg[1] = 0;
  std::memcpy(cfg.data() + 2, tag_.data(), tag_.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = offset < cfg.size() && i < cfg.size() - offset ? cfg[offset + i] : 0;
  }
}

void Virtio9p::activate(VirtioQueueHost& host, std::uint64_t /*features*/) noexcept {
  {
    std::lock_guard lock(mu_);
    host_ = &host;
  }
  queue_notify(0);
}

void Virtio9p::reset() noexcept {
  std::unique_lock lock(mu_);
  host_ = nullptr;
  jobs_.clear();  // not started: the transport clears the queue, nothing is answered
  idle_cv_.wait(lock, [this] { return !running_job_; });
  // A new driver starts a new 9p session (Tversion), but the old fids go now: on the worker,
  // whose seccomp list has close() (reset() may run on a vCPU thread, whose list has not).
  if (use_worker_) {
    clunk_all_ = true;
    work_cv_.notify_one();
  } else {
    server_->reset();
  }
}

void Virtio9p::wait_idle() noexcept {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return jobs_.empty() && !running_job_ && !clunk_all_; });
}

void Virtio9p::quiesce() {
  throw StateError(
      "virtio-9p: a --share cannot be snapshotted (its open host files are descriptors)");
}

void Virtio9p::save_state(StateWriter& /*out*/) const {
  throw StateError("virtio-9p: a share's open files are host descriptors, not snapshotted");
}

void Virtio9p::load_state(StateReader& /*in*/) {
  throw StateError("virtio-9p: a snapshot never holds a share (a run with one refuses them)");
}

std::uint64_t Virtio9p::unanswerable() const {
  return unanswerable_.load(std::memory_order_relaxed);
}

void Virtio9p::queue_notify(std::size_t queue) noexcept {
  if (queue != 0) return;
  std::unique_lock lock(mu_);
  if (host_ == nullptr) return;
  VirtioQueueHost& host = *host_;
  bool queued = false;
  while (host.pop(0, chain_) == Virtqueue::Pop::kChain) {
    Job job{chain_.head, chain_.descriptors};
    if (use_worker_) {
      jobs_.push_back(std::move(job));
      queued = true;
    } else {
      serve(host, job);
    }
  }
  lock.unlock();
  if (queued) work_cv_.notify_one();
}

void Virtio9p::worker_main() noexcept {
  if (on_worker_start_ && !on_worker_start_()) return;
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || clunk_all_ || !jobs_.empty(); });
    if (stopping_) return;
    if (clunk_all_) {
      clunk_all_ = false;
      server_->reset();  // under mu_: no job runs, and the next waits for it
      idle_cv_.notify_all();
      continue;
    }
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    running_job_ = true;
    // host_ stays while a job runs: reset() waits for running_job_ to clear.
    VirtioQueueHost* host = host_;
    lock.unlock();
    if (host != nullptr) serve(*host, job);
    lock.lock();
    running_job_ = false;
    idle_cv_.notify_all();
  }
}

void Virtio9p::serve(VirtioQueueHost& host, const Job& job) noexcept {
  const GuestMemory& ram = host.ram();
  // The request: the readable buffers in order, up to the largest message we take (a longer
  // one is answered EPROTO by its size field).
  std::size_t readable = 0, writable = 0;
  for (const Descriptor& d : job.descriptors) (d.device_writable ? writable : readable) += d.len;
  const std::size_t max = p9::P9Server::kMaxMsize;
  request_.resize(std::min(readable, max));
  std::size_t at = 0;
  for (const Descriptor& d : job.descriptors) {
    if (d.device_writable || at == request_.size()) continue;
    const std::size_t n = std::min<std::size_t>(d.len, request_.size() - at);
    ram.read(d.addr, std::span(request_).subspan(at, n));
    at += n;
  }
  reply_.resize(std::min(writable, max));
  const std::size_t len = server_->handle(request_, reply_);
  if (len == 0) {
    unanswerable_.fetch_add(1, std::memory_order_relaxed);  // mu_ may be held (inline)
    host.complete(0, job.head, 0);
    return;
  }
  // The answer over the writable buffers in order.
  std::size_t put = 0;
  for (const Descriptor& d : job.descriptors) {
    if (!d.device_writable || put == len) continue;
    const std::size_t n = std::min<std::size_t>(d.len, len - put);
    ram.write(d.addr, std::span<const std::byte>(reply_).subspan(put, n));
    put += n;
  }
  host.complete(0, job.head, static_cast<std::uint32_t>(len));
}

void Virtio9p::report(ReportWriter& out) const {
  const p9::P9Stats s = server_->stats();
  out.text("tag", tag_);
  out.flag("read_only", server_->read_only());
  out.object("requests", [&s](ReportWriter& req) {
    for (std::size_t i = 0; i < s.requests.size(); ++i) {
      req.count(p9::op_name(static_cast<p9::Op>(i)), s.requests[i]);
    }
  });
  out.count("errors", s.errors);
  out.count("protocol_errors", s.protocol_errors);
  out.count("escapes_refused", s.escapes_refused);
  out.count("read_only_refused", s.read_only_refused);
  out.count("bytes_read", s.bytes_read);
  out.count("bytes_written", s.bytes_written);
  out.count("fids_open", s.fids_open);
  out.count("unanswerable", unanswerable());
  // Now, for a hung run's report: requests taken off the ring and not yet served.
  std::lock_guard lock(mu_);
  out.count("requests_waiting", jobs_.size());
  out.flag("request_running", running_job_);
}

}  // namespace minivmm::devices
