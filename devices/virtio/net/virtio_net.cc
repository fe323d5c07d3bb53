#include "devices/virtio/net/virtio_net.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "devices/log/log.h"

namespace minivmm::devices {

VirtioNet::VirtioNet(NetBackend& backend, LoopScheduler run_on_loop, VirtioNetOptions options)
    : backend_(backend),
      run_on_loop_(std::move(run_on_loop)),
      options_(std::move(options)),
      loop_thread_(std::this_thread::get_id()),
      self_(std::make_shared<VirtioNet*>(this)),
      tx_buf_(kMaxFrameBytes) {
  backend_.attach(this);
}

VirtioNet::~VirtioNet() {
  backend_.attach(nullptr);
  self_.reset();
}

void VirtioNet::read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept {
  std::array<std::uint8_t, kConfigBytes> config{};
  std::memcpy(config.data() + kConfigMac, options_.mac.data(), options_.mac.size());
  // Little-endian le16; the link is always up (5.1.4: a device offering STATUS reports it).
  config[kConfigStatus] = static_cast<std::uint8_t>(kStatusLinkUp & 0xff);
  config[kConfigStatus + 1] = static_cast<std::uint8_t>(kStatusLinkUp >> 8);
  // Any offset and width (Linux reads the MAC a byte at a time and status as one le16); what
  // lies past the fields we define reads 0.
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::uint64_t at = offset + i;
    data[i] = at >= offset && at < config.size() ? config[static_cast<std::size_t>(at)] : 0;
  }
}

void VirtioNet::activate(VirtioQueueHost& host, std::uint64_t /*features*/) noexcept {
  {
    std::lock_guard lock(mu_);
    host_ = &host;
    ++generation_;
    rx_held_ = false;
  }
  // The driver may have posted frames before DRIVER_OK, and a back-end may be holding a frame
  // from before a reset.
  kick(kPendingTx | kPendingRx);
}

void VirtioNet::reset() noexcept {
  {
    std::lock_guard lock(mu_);
    host_ = nullptr;
    ++generation_;
    rx_held_ = false;  // it belongs to the queue the transport is about to clear
  }
  // A back-end that waits for rx_space() would wait until the next driver; let it offer again
  // now and see its frames dropped (and counted) while no driver is live.
  kick(kPendingRx);
}

void VirtioNet::queue_notify(std::size_t queue) noexcept {
  if (queue == kTransmitQueue) {
    kick(kPendingTx);
  } else if (queue == kReceiveQueue) {
    kick(kPendingRx);
  }
}

void VirtioNet::kick(std::uint32_t pending) noexcept {
  if (!run_on_loop_ || on_loop_thread()) {
    if ((pending & kPendingTx) != 0) transmit_turn();
    if ((pending & kPendingRx) != 0) rx_kick();
    return;
  }
  pending_.fetch_or(pending, std::memory_order_acq_rel);
  {
    std::lock_guard lock(mu_);
    ++stats_.deferred_calls;
  }
  // One call in flight carries whatever accumulates until it runs.
  if (pending_scheduled_.exchange(true, std::memory_order_acq_rel)) return;
  run_on_loop_([weak = std::weak_ptr<VirtioNet*>(self_)] {
    if (const auto self = weak.lock()) (*self)->run_pending();
  });
}

void VirtioNet::run_pending() noexcept {
  // Cleared before the work is taken, so a notify that lands after the exchange schedules again.
  pending_scheduled_.store(false, std::memory_order_release);
  const std::uint32_t pending = pending_.exchange(0, std::memory_order_acq_rel);
  if ((pending & kPendingTx) != 0) transmit_turn();
  if ((pending & kPendingRx) != 0) rx_kick();
}

void VirtioNet::complete_locked(std::size_t queue, std::uint16_t head, std::uint32_t len,
                                std::uint64_t generation) noexcept {
  // After a reset the chain belongs to a ring the transport cleared; a new driver may have set
  // up another one in its place.
  if (host_ == nullptr || generation != generation_) return;
  host_->complete(queue, head, len);
}

void VirtioNet::tx_ready() noexcept {
  tx_blocked_ = false;
  transmit_turn();
}

void VirtioNet::transmit_turn() noexcept {
  if (tx_blocked_) return;
  std::size_t chains = 0;
  bool capped = false;
  bool transmitted = false;
  for (;;) {
    std::uint16_t head = 0;
    std::uint64_t generation = 0;
    std::size_t bytes = 0;
    if (tx_held_.held) {
      head = tx_held_.head;
      generation = tx_held_.generation;
      bytes = tx_held_.bytes;
      tx_held_.held = false;
      std::lock_guard lock(mu_);
      if (generation != generation_) {
        ++stats_.tx_dropped_reset;  // its chain went with the reset; the frame goes too
        continue;
      }
    } else {
      if (chains == kTxFramesPerTurn) {
        capped = true;  // maybe nothing is left; the next turn finds out, once
        break;
      }
      GuestMemory ram;
      {
        std::lock_guard lock(mu_);
        if (host_ == nullptr) break;
        if (host_->pop(kTransmitQueue, tx_chain_) != Virtqueue::Pop::kChain) break;
        generation = generation_;
        ram = host_->ram();
      }
      ++chains;
      head = tx_chain_.head;
      const TxFrame f = read_tx_frame(tx_chain_, ram, tx_buf_);
      if (f.error != TxFrameError::kNone) {
        std::lock_guard lock(mu_);
        switch (f.error) {
          case TxFrameError::kOversized: ++stats_.tx_oversized; break;
          case TxFrameError::kOffloadRequested: ++stats_.tx_offload_refused; break;
          default: ++stats_.tx_malformed; break;
        }
        log::debug("virtio_net: transmit chain {} refused ({})", head,
                   tx_frame_error_name(f.error));
        complete_locked(kTransmitQueue, head, 0, generation);
        continue;
      }
      bytes = f.frame_bytes;
    }
    // Without mu_: the back-end may hand frames to offer_frame() from inside (libslirp answers
    // an ARP request at once).
    const NetTxResult r = backend_.transmit(std::span(tx_buf_).first(bytes));
    transmitted = true;
    std::lock_guard lock(mu_);
    if (r == NetTxResult::kWouldBlock) {
      tx_held_ = HeldTx{true, head, generation, bytes};
      tx_blocked_ = true;
      ++stats_.tx_stalls;
      break;
    }
    if (r == NetTxResult::kSent) {
      ++stats_.tx_frames;
      stats_.tx_bytes += bytes;
    } else {
      ++stats_.tx_dropped_backend;
    }
    // Returned only once the back-end took (or dropped) the frame: while it blocks, this chain
    // and those behind it stay unreturned, the guest's queue fills and its driver stops sending.
    complete_locked(kTransmitQueue, head, 0, generation);
  }
  if (transmitted) backend_.transmit_done();
  if (!capped) return;
  {
    std::lock_guard lock(mu_);
    ++stats_.tx_capped;
  }
  if (tx_resume_scheduled_) return;
  if (!run_on_loop_) return;  // single-threaded use: the next notify continues
  tx_resume_scheduled_ = true;
  run_on_loop_([weak = std::weak_ptr<VirtioNet*>(self_)] {
    const auto self = weak.lock();
    if (!self) return;
    VirtioNet& net = **self;
    net.tx_resume_scheduled_ = false;
    {
      std::lock_guard lock(net.mu_);
      ++net.stats_.tx_resumes;
    }
    net.transmit_turn();
  });
}

void VirtioNet::rx_kick() noexcept {
  bool owed = false;
  {
    std::lock_guard lock(mu_);
    owed = rx_waiting_;
    rx_waiting_ = false;
  }
  if (owed) backend_.rx_space();
}

bool VirtioNet::offer_frame(std::span<const std::uint8_t> frame) noexcept {
  std::lock_guard lock(mu_);
  if (host_ == nullptr) {
    ++stats_.rx_dropped_not_ready;
    return true;
  }
  if (frame.size() > kMaxFrameBytes) {
    ++stats_.rx_dropped_too_big;
    return true;
  }
  for (std::size_t bad = 0;;) {
    if (!rx_held_) {
      const Virtqueue::Pop r = host_->pop(kReceiveQueue, rx_chain_);
      if (r == Virtqueue::Pop::kEmpty) {
        // The driver will notify queue 0 when it posts buffers (without EVENT_IDX it always
        // does, since we never set VIRTQ_USED_F_NO_NOTIFY; with it, avail_event asks for the
        // very entry we found missing).
        ++stats_.rx_no_buffer;
        rx_waiting_ = true;
        return false;
      }
      if (r == Virtqueue::Pop::kBroken) {
        ++stats_.rx_dropped_not_ready;  // DEVICE_NEEDS_RESET: nothing more until reset
        return true;
      }
      rx_held_ = true;
      if (check_rx_chain(rx_chain_) != RxChainError::kNone) {
        ++stats_.rx_bad_chains;
        rx_held_ = false;
        host_->complete(kReceiveQueue, rx_chain_.head, 0);
        if (++bad == kRxBadChainsPerFrame) {
          ++stats_.rx_dropped_bad_chains;
          return true;
        }
        continue;
      }
    }
    if (rx_chain_.writable_bytes < kVirtioNetHeaderBytes + frame.size()) {
      // Without MRG_RXBUF a frame must fit one chain (5.1.6.3.1). The chain is kept for the next
      // frame, which may be smaller: a guest with small buffers loses only the big frames.
      ++stats_.rx_dropped_too_big;
      return true;
    }
    const std::uint32_t len = write_rx_frame(rx_chain_, host_->ram(), frame);
    rx_held_ = false;
    ++stats_.rx_frames;
    stats_.rx_bytes += frame.size();
    host_->complete(kReceiveQueue, rx_chain_.head, len);
    return true;
  }
}

VirtioNetStats VirtioNet::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void VirtioNet::report(ReportWriter& out) const {
  const VirtioNetStats s = stats();
  char mac[18];
  std::snprintf(mac, sizeof mac, "%02x:%02x:%02x:%02x:%02x:%02x", options_.mac[0],
                options_.mac[1], options_.mac[2], options_.mac[3], options_.mac[4],
                options_.mac[5]);
  out.text("mac", mac);
  out.text("backend", backend_.kind());
  out.count("tx_frames", s.tx_frames);
  out.count("tx_bytes", s.tx_bytes);
  out.count("tx_dropped_backend", s.tx_dropped_backend);
  out.count("tx_malformed", s.tx_malformed);
  out.count("tx_oversized", s.tx_oversized);
  out.count("tx_offload_refused", s.tx_offload_refused);
  out.count("tx_stalls", s.tx_stalls);
  out.count("tx_dropped_reset", s.tx_dropped_reset);
  out.count("tx_capped", s.tx_capped);
  out.count("tx_resumes", s.tx_resumes);
  out.count("rx_frames", s.rx_frames);
  out.count("rx_bytes", s.rx_bytes);
  out.count("rx_no_buffer", s.rx_no_buffer);
  out.count("rx_dropped_too_big", s.rx_dropped_too_big);
  out.count("rx_dropped_not_ready", s.rx_dropped_not_ready);
  out.count("rx_bad_chains", s.rx_bad_chains);
  out.count("rx_dropped_bad_chains", s.rx_dropped_bad_chains);
  out.count("deferred_calls", s.deferred_calls);
  out.object(backend_.kind(), [this](ReportWriter& w) { backend_.report(w); });
}

}  // namespace minivmm::devices
