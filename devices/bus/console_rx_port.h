// Where host console input goes: a receiver with bounded room (the UART's RX FIFO, the
// virtio-console's receive buffer). ConsoleInput reads the host only as much as there is room,
// and waits for the on_rx_space hook when there is none (back-pressure instead of overruns).
//
// Threads: receive()/rx_space() from the loop thread; the hook runs on whatever thread made
// room (a vCPU, the loop) and must only schedule work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace minivmm::devices {

class ConsoleRxPort {
 public:
  virtual ~ConsoleRxPort() = default;
  // Takes up to rx_space() bytes; returns how many.
  virtual std::size_t receive(std::span<const std::uint8_t> bytes) noexcept = 0;
  // Bytes receive() would take now. A caller that gets 0 (or had bytes refused) gets the hook
  // once when room appears.
  virtual std::size_t rx_space() const noexcept = 0;
  virtual void set_on_rx_space(std::function<void()> fn) = 0;
};

}  // namespace minivmm::devices
