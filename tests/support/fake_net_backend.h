// A NetBackend for device tests and the fuzzer: records what the device transmits, answers each
// transmit as told (sent, dropped, would block), and offers host frames with a TAP's policy (a
// refused frame is kept, nothing more is offered until rx_space()).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "devices/host/net_backend.h"

namespace minivmm::testing {

class FakeNetBackend final : public devices::NetBackend {
 public:
  using Frame = std::vector<std::uint8_t>;

  std::string_view kind() const noexcept override { return "fake"; }
  void attach(devices::NetPeer* peer) override {
    peer_ = peer;
    ++attaches;
  }
  devices::NetTxResult transmit(std::span<const std::uint8_t> frame) noexcept override {
    ++transmit_calls;
    devices::NetTxResult r = next_result;
    if (!results.empty()) {
      r = results.front();
      results.pop_front();
    }
    if (r == devices::NetTxResult::kSent) sent.emplace_back(frame.begin(), frame.end());
    if (r == devices::NetTxResult::kDropped) ++dropped;
    if (on_transmit) on_transmit();
    return r;
  }
  void transmit_done() noexcept override { ++transmit_dones; }
  void rx_space() noexcept override {
    ++rx_space_calls;
    offer_pending();
  }
  void report(devices::ReportWriter& out) const override {
    out.count("sent", sent.size());
    out.count("dropped", static_cast<std::uint64_t>(dropped));
  }

  // Host frames for the guest, offered in order until one is refused.
  void inject(Frame frame) {
    pending.push_back(std::move(frame));
    if (!waiting) offer_pending();
  }
  // The back-end's writable event, after a kWouldBlock.
  void make_writable() {
    if (peer_ != nullptr) peer_->tx_ready();
  }
  devices::NetPeer* peer() const { return peer_; }

  // What transmit() answers: the queued results first, then next_result.
  std::deque<devices::NetTxResult> results;
  devices::NetTxResult next_result = devices::NetTxResult::kSent;
  std::function<void()> on_transmit;  // runs inside transmit(), as libslirp's replies do

  std::vector<Frame> sent;
  std::deque<Frame> pending;  // not yet taken by the device
  bool waiting = false;       // refused: waits for rx_space()
  int attaches = 0, transmit_calls = 0, transmit_dones = 0, rx_space_calls = 0, dropped = 0;
  int offered = 0, refused = 0;

 private:
  void offer_pending() {
    waiting = false;
    while (!pending.empty() && peer_ != nullptr) {
      ++offered;
      if (!peer_->offer_frame(pending.front())) {
        ++refused;
        waiting = true;
        return;
      }
      pending.pop_front();
    }
  }

  devices::NetPeer* peer_ = nullptr;
};

}  // namespace minivmm::testing
