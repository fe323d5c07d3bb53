// VirtioConsole's part of a snapshot: the transmitq flushed (its bytes belong to the run that
// wrote them), host input not yet delivered, and the counters.
#include "devices/virtio/virtio_console.h"

namespace minivmm::devices {
namespace {

constexpr std::uint8_t kConsoleStateVersion = 1;

}  // namespace

void VirtioConsole::quiesce() {
  flush_transmit();
  std::lock_guard lock(mu_);
  if (host_ != nullptr && tx_held_) {
    // A guest that queued more than kTxFlushTurns of output: the rest of this chain goes out
    // again from its start after the snapshot (a repeated line beats a stalled snapshot).
    host_->give_back(kTransmitQueue);
    tx_held_ = false;
  }
}

void VirtioConsole::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  write_version(out, kConsoleStateVersion);
  std::vector<std::uint8_t> rx(rx_.begin(), rx_.end());
  out.bytes(rx);
  for (std::uint64_t v : {stats_.tx_chains, stats_.tx_bytes, stats_.rx_chains, stats_.rx_bytes,
                          stats_.rx_full, stats_.tx_capped, stats_.tx_resumes}) {
    out.u64(v);
  }
}

void VirtioConsole::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  read_version(in, kConsoleStateVersion);
  const std::vector<std::uint8_t> rx = in.bytes(kRxBuffer);
  VirtioConsoleStats s;
  for (std::uint64_t* v : {&s.tx_chains, &s.tx_bytes, &s.rx_chains, &s.rx_bytes, &s.rx_full,
                           &s.tx_capped, &s.tx_resumes}) {
    *v = in.u64();
  }
  in.expect_end();
  rx_.assign(rx.begin(), rx.end());
  stats_ = s;
  // Buffers the driver posted take the input when the transport activates the device.
}

}  // namespace minivmm::devices
