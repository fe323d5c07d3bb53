// virtio-console (device id 3, virtio 1.2 section 5.3) with one port and no features (no
// MULTIPORT, no SIZE, no EMERG_WRITE): queue 0 (receiveq) carries host input to the guest, queue
// 1 (transmitq) guest output to a ByteSink (stdout).
//
// Input back-pressure follows the UART's rules (ConsoleRxPort): host bytes go into a bounded
// buffer (kRxBuffer) that drains into the receive buffers the guest posts; when it is full,
// ConsoleInput stops reading the host until on_rx_space fires, which happens when the guest posts
// buffers (a notify on queue 0) that take bytes. Nothing is dropped.
//
// Threads: see VirtioDevice; ConsoleRxPort calls from the loop thread. mu_ guards the buffer
// and the host pointer; lock order mu_ -> transport lock. The hook runs without mu_.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "devices/byte_sink.h"
#include "devices/console_rx_port.h"
#include "devices/virtio_device.h"

namespace minivmm::devices {

struct VirtioConsoleStats {
  std::uint64_t tx_chains = 0, tx_bytes = 0;
  std::uint64_t rx_chains = 0, rx_bytes = 0;
  std::uint64_t rx_full = 0;  // times input was refused for a full buffer
};

class VirtioConsole final : public VirtioDevice, public ConsoleRxPort {
 public:
  static constexpr std::uint32_t kDeviceId = 3;
  static constexpr std::size_t kRxBuffer = 256;
  static constexpr std::size_t kReceiveQueue = 0, kTransmitQueue = 1;

  explicit VirtioConsole(ByteSink& out) noexcept : out_(out) {}

  // VirtioDevice
  std::string_view name() const noexcept override { return "console"; }
  std::uint32_t device_id() const noexcept override { return kDeviceId; }
  std::uint64_t device_features() const noexcept override { return 0; }
  std::size_t num_queues() const noexcept override { return 2; }
  std::uint16_t queue_max_size() const noexcept override { return 64; }
  void read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept override;
  void activate(VirtioQueueHost& host, std::uint64_t features) noexcept override;
  void queue_notify(std::size_t queue) noexcept override;
  void reset() noexcept override;

  // ConsoleRxPort
  std::size_t receive(std::span<const std::uint8_t> bytes) noexcept override;
  std::size_t rx_space() const noexcept override;
  void set_on_rx_space(std::function<void()> fn) override;

  VirtioConsoleStats stats() const;

 private:
  void transmit_locked(VirtioQueueHost& host) noexcept;
  // Moves buffered input into posted receive buffers; true if it made room.
  bool drain_rx_locked() noexcept;
  // Takes the hook if someone waits for room and there is some.
  std::function<void()> take_hook_locked() noexcept;

  ByteSink& out_;
  mutable std::mutex mu_;
  VirtioQueueHost* host_ = nullptr;  // guarded by mu_
  std::deque<std::uint8_t> rx_;      // guarded by mu_
  mutable bool rx_waiting_ = false;  // guarded by mu_
  std::function<void()> on_rx_space_;  // guarded by mu_
  DescriptorChain chain_;            // guarded by mu_
  VirtioConsoleStats stats_;         // guarded by mu_
};

}  // namespace minivmm::devices
