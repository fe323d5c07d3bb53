// The 16550A's receiver as a ConsoleRxPort (the UART predates the interface and stays as is).
#pragma once

#include "devices/bus/console_rx_port.h"
#include "devices/pc/uart_16550.h"

namespace minivmm::devices {

class UartRxPort final : public ConsoleRxPort {
 public:
  explicit UartRxPort(Uart16550& uart) noexcept : uart_(uart) {}
  std::size_t receive(std::span<const std::uint8_t> bytes) noexcept override {
    return uart_.receive(bytes);
  }
  std::size_t rx_space() const noexcept override { return uart_.rx_space(); }
  void set_on_rx_space(std::function<void()> fn) override { uart_.set_on_rx_space(std::move(fn)); }

 private:
  Uart16550& uart_;
};

}  // namespace minivmm::devices
