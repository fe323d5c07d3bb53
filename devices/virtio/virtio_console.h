// virtio-console (device id 3, virtio 1.2 section 5.3) with one port and no features (no
// MULTIPORT, no SIZE, no EMERG_WRITE): queue 0 (receiveq) carries host input to the guest, queue
// 1 (transmitq) guest output to a ByteSink (stdout).
//
// Input back-pressure follows the UART's rules (ConsoleRxPort): host bytes go into a bounded
// buffer (kRxBuffer) that drains into the receive buffers the guest posts; when it is full,
// ConsoleInput stops reading the host until on_rx_space fires, which happens when the guest posts
// buffers (a notify on queue 0) that take bytes. Nothing is dropped.
//
// Output is handled in turns of at most kTxBytesPerTurn bytes and kTxDescriptorsPerTurn
// descriptors, copied out of guest RAM and handed to the sink in one write: a guest that posts
// a huge buffer or keeps the transmitq full cannot hold the notifying thread (the loop, through
// the ioeventfd) for longer than one bounded sink write. A turn that stops at the cap with work
// left calls the on_tx_pending hook, which schedules resume_transmit() (the VMM: a bottom half
// on the loop), so other fds and timers run in between. A buffer split across turns keeps its
// place (the chain is held, and completed once its last byte went out), so output is neither
// lost nor reordered. A turn always hands the sink at least one byte or returns at least one
// chain, and the hook fires only when a turn stopped at the cap, so the device never spins:
// once the queue is empty it waits for the next notify. When stdout is full the sink waits
// (StdoutSink: bounded, then drops and counts), once per turn. Without a hook, the rest waits
// for the next notify or resume_transmit().
//
// Threads: see VirtioDevice; ConsoleRxPort calls from the loop thread; resume_transmit() from
// any thread (the loop). mu_ guards the buffers, the held chain and the host pointer; lock order
// mu_ -> transport lock. The hooks run without mu_.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "devices/bus/byte_sink.h"
#include "devices/bus/console_rx_port.h"
#include "devices/virtio/virtio_device.h"

namespace minivmm::devices {

struct VirtioConsoleStats {
  std::uint64_t tx_chains = 0, tx_bytes = 0;
  std::uint64_t rx_chains = 0, rx_bytes = 0;
  std::uint64_t rx_full = 0;  // times input was refused for a full buffer
  std::uint64_t tx_capped = 0;   // transmit turns that stopped at the cap with work left
  std::uint64_t tx_resumes = 0;  // resume_transmit() calls that found a device to run
};

class VirtioConsole final : public VirtioDevice, public ConsoleRxPort {
 public:
  static constexpr std::uint32_t kDeviceId = 3;
  static constexpr std::size_t kRxBuffer = 256;
  static constexpr std::size_t kReceiveQueue = 0, kTransmitQueue = 1;
  // 16 KiB: a screenful of boot log goes out in one write, and a blocking write of it to a slow
  // reader (a terminal) takes milliseconds. The descriptor cap bounds the walking a guest can
  // ask for with empty buffers; it is checked between chains, so a turn walks at most one chain
  // (at most the queue size plus one indirect table) past it.
  static constexpr std::size_t kTxBytesPerTurn = 16 * 1024;
  static constexpr std::size_t kTxDescriptorsPerTurn = 256;
  // 1 MiB at exit: more than any console shows, and a queue that holds more (a hostile guest
  // can describe gigabytes with indirect tables over the same RAM) cannot stall the exit.
  static constexpr std::size_t kTxFlushTurns = 64;

  explicit VirtioConsole(ByteSink& out);

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
  // Snapshots (virtio_console_state.cc): quiesce() flushes the transmitq (a chain still held
  // after kTxFlushTurns goes back to the ring); the record is the host input not yet delivered
  // and the counters.
  void quiesce() override;
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

  // ConsoleRxPort
  std::size_t receive(std::span<const std::uint8_t> bytes) noexcept override;
  std::size_t rx_space() const noexcept override;
  void set_on_rx_space(std::function<void()> fn) override;

  // Called, without the device lock, on the thread whose turn stopped at the cap (a vCPU or the
  // loop); it must only schedule a call to resume_transmit() (the device must outlive that
  // call). Set it before the guest runs.
  void set_on_tx_pending(std::function<void()> fn);
  // Runs the next transmit turn (for on_tx_pending). A no-op after reset.
  void resume_transmit() noexcept;
  // Runs turns until the transmitq is empty, or kTxFlushTurns of them. The VMM calls it at exit
  // once the vCPUs have stopped (so the guest cannot refill the queue), as it flushes the UART.
  void flush_transmit() noexcept;

  VirtioConsoleStats stats() const;
  // stats() as the report's "data" object (the port's traffic), beside the transport's
  // counters.
  void report(ReportWriter& out) const override;

 private:
  // One turn; true if it stopped at the cap with work left (then the caller calls the hook).
  bool transmit_locked(VirtioQueueHost& host) noexcept;
  // After a turn: the hook to call once mu_ is released, if the turn was capped.
  std::function<void()> tx_hook_locked(bool capped) noexcept;
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
  DescriptorChain chain_;            // guarded by mu_ (receive side)
  std::function<void()> on_tx_pending_;  // guarded by mu_
  bool tx_scheduled_ = false;        // guarded by mu_: the hook fired, resume not run yet
  // The transmit chain split across turns (guarded by mu_): its next descriptor and the offset
  // into it. Dropped by reset.
  DescriptorChain tx_chain_;
  bool tx_held_ = false;
  std::size_t tx_desc_ = 0;
  std::uint64_t tx_offset_ = 0;
  std::vector<std::uint8_t> tx_buf_;  // guarded by mu_; one turn's bytes, kTxBytesPerTurn
  std::vector<std::uint16_t> tx_done_;  // guarded by mu_; chains a turn finished
  VirtioConsoleStats stats_;         // guarded by mu_
};

}  // namespace minivmm::devices
