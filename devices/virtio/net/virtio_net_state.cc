// VirtioNet's part of a snapshot. The device holds at most two chains between turns: a receive
// buffer popped for a frame still being offered, and a transmit chain whose frame a blocked
// back-end did not take. Each is the last popped of its queue, so quiesce() hands both back
// and the ring positions say all (the next activate pops them again, and the frame is re-read
// from guest RAM). Frames inside the back-end or the host are not guest state.
#include "devices/virtio/net/virtio_net.h"

namespace minivmm::devices {
namespace {

constexpr std::uint8_t kNetStateVersion = 1;

template <typename Stats, typename Fn>
void each_counter(Stats& s, Fn fn) {
  for (auto* v : {&s.tx_frames, &s.tx_bytes, &s.tx_dropped_backend, &s.tx_malformed,
                  &s.tx_oversized, &s.tx_offload_refused, &s.tx_stalls, &s.tx_dropped_reset,
                  &s.tx_capped, &s.tx_resumes, &s.rx_frames, &s.rx_bytes, &s.rx_no_buffer,
                  &s.rx_dropped_too_big, &s.rx_dropped_not_ready, &s.rx_bad_chains,
                  &s.rx_dropped_bad_chains, &s.deferred_calls}) {
    fn(*v);
  }
}

}  // namespace

void VirtioNet::quiesce() {
  std::lock_guard lock(mu_);
  if (host_ == nullptr) return;
  if (rx_held_) {
    host_->give_back(kReceiveQueue);
    rx_held_ = false;
  }
  // Loop-thread state, and the snapshot runs on the loop thread.
  if (tx_held_.held && tx_held_.generation == generation_) {
    host_->give_back(kTransmitQueue);
    tx_held_.held = false;
  }
}

void VirtioNet::save_state(StateWriter& out) const {
  write_version(out, kNetStateVersion);
  VirtioNetStats s = stats();
  each_counter(s, [&out](std::uint64_t v) { out.u64(v); });
}

void VirtioNet::load_state(StateReader& in) {
  read_version(in, kNetStateVersion);
  VirtioNetStats s;
  each_counter(s, [&in](std::uint64_t& v) { v = in.u64(); });
  in.expect_end();
  std::lock_guard lock(mu_);
  stats_ = s;
}

}  // namespace minivmm::devices
