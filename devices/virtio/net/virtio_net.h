// virtio-net (device id 1, virtio 1.2 section 5.1): one receive queue (0) and one transmit queue
// (1) between the guest and a NetBackend (a TAP interface, or libslirp).
//
// Features: VIRTIO_NET_F_MAC (the MAC below, in config space) and VIRTIO_NET_F_STATUS (the link
// always reads up), plus what the transport adds (VERSION_1, INDIRECT_DESC, EVENT_IDX). No
// offloads (CSUM, GUEST_CSUM, TSO/UFO), no MRG_RXBUF, no control queue, no multiqueue, no MTU.
// Why, in docs/network.md: without offloads every frame fits a 1526-byte buffer, so one chain per
// frame with num_buffers = 1 is all the guest needs, and libslirp could not take partial
// checksums or GSO frames anyway. The 12-byte header is written as {0, ..., num_buffers = 1} on
// receive and checked on transmit (a frame asking for an offload is refused and counted).
//
// Receive: the back-end offers frames (NetPeer::offer_frame). Each takes the next receive chain;
// with none posted the frame is refused and the back-end keeps it (a TAP stops reading; libslirp
// queues a bounded backlog) until the guest posts buffers and notifies queue 0, when the device
// calls NetBackend::rx_space(). A frame larger than the posted chain is dropped and counted, and
// the chain is kept for the next frame. While no driver is live (before DRIVER_OK, after reset,
// with a broken queue) offered frames are dropped and counted, like a NIC whose link is down.
//
// Transmit: a turn pops transmit chains, copies each frame out of guest RAM (the guest may change
// its buffers at any time) and hands it to the back-end. kWouldBlock keeps the frame and its chain
// and stops the turn until the back-end calls tx_ready(); nothing is dropped. A turn handles at
// most kTxFramesPerTurn chains and schedules the rest as a loop bottom half, so a guest that keeps
// the queue full cannot hold the loop. Chains are returned with length 0, once the back-end has
// the frame.
//
// Bad guest input (a writable transmit buffer, no header, a runt or oversized frame, a header that
// asks for an offload, a readable or tiny receive buffer) is counted and the chain returned; the
// walker's own errors (loops, buffers outside RAM) break the queue through the transport.
//
// Threads. The back-end runs on the loop thread, so the device moves its work there: construct it
// on the loop thread; queue_notify(), activate() and reset() may come from a vCPU thread (status
// and notify writes that exit to user space), and then only record what is due and hand a call to
// `run_on_loop` (EventLoop::schedule). On the loop thread they act at once. mu_ guards the
// transport pointer, the receive side and the counters; it is never held while the back-end is
// called, so the back-end may offer frames from inside transmit(). reset() returns at once: a
// transmit chain popped before it is not completed after it (a generation count tells), and the
// receive chain held is forgotten. Lock order: mu_ -> transport lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devices/bus/report_writer.h"
#include "devices/host/net_backend.h"
#include "devices/virtio/net/virtio_net_frame.h"
#include "devices/virtio/virtio_device.h"

namespace minivmm::devices {

using MacAddress = std::array<std::uint8_t, 6>;

struct VirtioNetOptions {
  // QEMU's default (locally administered, 52:54:00 prefix): a guest configured for QEMU works.
  MacAddress mac{0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
};

struct VirtioNetStats {
  // Guest -> host.
  std::uint64_t tx_frames = 0, tx_bytes = 0;  // handed to the back-end and sent
  std::uint64_t tx_dropped_backend = 0;  // the back-end dropped them (its report says why)
  std::uint64_t tx_malformed = 0;        // writable buffer, no header, runt frame
  std::uint64_t tx_oversized = 0;        // frame longer than kMaxFrameBytes
  std::uint64_t tx_offload_refused = 0;  // header asked for a checksum or GSO never offered
  std::uint64_t tx_stalls = 0;           // turns stopped by a back-end that would block
  std::uint64_t tx_dropped_reset = 0;    // a frame held for a blocked back-end when reset came
  std::uint64_t tx_capped = 0;           // turns that stopped at kTxFramesPerTurn
  std::uint64_t tx_resumes = 0;          // the turns that continued them
  // Host -> guest.
  std::uint64_t rx_frames = 0, rx_bytes = 0;  // written into receive buffers
  std::uint64_t rx_no_buffer = 0;        // frames refused: no receive buffer posted (shortage)
  std::uint64_t rx_dropped_too_big = 0;  // frame longer than the posted chain
  std::uint64_t rx_dropped_not_ready = 0;  // no live driver, or the queue is broken
  std::uint64_t rx_bad_chains = 0;       // receive chains returned unused (readable, < 12 bytes)
  std::uint64_t rx_dropped_bad_chains = 0;  // frames dropped after too many bad chains in a row
  // From a vCPU thread, moved to the loop.
  std::uint64_t deferred_calls = 0;
};

class VirtioNet final : public VirtioDevice, private NetPeer {
 public:
  static constexpr std::uint32_t kDeviceId = 1;
  static constexpr std::size_t kReceiveQueue = 0, kTransmitQueue = 1;
  // Feature bits (5.1.3).
  static constexpr std::uint64_t kFMac = 1ull << 5;
  static constexpr std::uint64_t kFStatus = 1ull << 16;
  static constexpr std::uint16_t kStatusLinkUp = 1;
  // Config space (5.1.4): mac[6], status (le16). Fields of features not offered are absent.
  static constexpr std::uint64_t kConfigMac = 0, kConfigStatus = 6, kConfigBytes = 8;
  // 256 entries a queue: Linux's default ring for virtio-net, and the transport's maximum.
  static constexpr std::uint16_t kQueueSize = 256;
  // A turn's worth of transmit chains. A TAP write is a syscall of a few microseconds, so a turn
  // stays well under a millisecond; the next turn costs one bottom half (an eventfd write).
  static constexpr std::size_t kTxFramesPerTurn = 64;
  // Bad receive chains skipped for one frame before the frame is dropped: a guest that posts
  // nothing but bad chains cannot keep the loop walking them.
  static constexpr std::size_t kRxBadChainsPerFrame = 16;

  // Hands `fn` to the loop thread (EventLoop::schedule). Called from a vCPU thread, and from the
  // loop thread when a transmit turn stopped at its cap.
  using LoopScheduler = std::function<void(std::function<void()>)>;

  // Construct on the loop thread. Attaches itself to `backend`, which must outlive it. Work
  // handed to `run_on_loop` that runs after the device is gone does nothing. A null scheduler
  // runs every call on the thread that makes it, and a capped turn waits for the next notify:
  // for single-threaded users (the fuzzer).
  VirtioNet(NetBackend& backend, LoopScheduler run_on_loop, VirtioNetOptions options = {});
  ~VirtioNet() override;
  VirtioNet(const VirtioNet&) = delete;
  VirtioNet& operator=(const VirtioNet&) = delete;

  // VirtioDevice
  std::string_view name() const noexcept override { return "net"; }
  std::uint32_t device_id() const noexcept override { return kDeviceId; }
  std::uint64_t device_features() const noexcept override { return kFMac | kFStatus; }
  std::size_t num_queues() const noexcept override { return 2; }
  std::uint16_t queue_max_size() const noexcept override { return kQueueSize; }
  void read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept override;
  void activate(VirtioQueueHost& host, std::uint64_t features) noexcept override;
  void queue_notify(std::size_t queue) noexcept override;
  void reset() noexcept override;
  // Snapshots (virtio_net_state.cc): quiesce() hands a held receive buffer, and a transmit
  // chain a blocked back-end did not take, back to their rings (the next activate pops them
  // again); the record is the counters (the MAC is the constructor's).
  void quiesce() override;
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

  // Its counters, inside its transport's object in the report (the slot names it,
  // "virtio_net0": a virtio device has no report key of its own). Loop thread.
  void report(ReportWriter& out) const override;

  VirtioNetStats stats() const;
  const MacAddress& mac() const noexcept { return options_.mac; }

 private:
  // NetPeer (loop thread).
  bool offer_frame(std::span<const std::uint8_t> frame) noexcept override;
  void tx_ready() noexcept override;

  // What a call from another thread leaves for the loop.
  enum Pending : std::uint32_t { kPendingTx = 1, kPendingRx = 2 };
  // Runs the work in `pending` now on the loop thread, or hands it there.
  void kick(std::uint32_t pending) noexcept;
  void run_pending() noexcept;
  void transmit_turn() noexcept;
  void rx_kick() noexcept;
  // Completes `head` if the driver that posted it is still the live one.
  void complete_locked(std::size_t queue, std::uint16_t head, std::uint32_t len,
                       std::uint64_t generation) noexcept;
  bool on_loop_thread() const noexcept { return std::this_thread::get_id() == loop_thread_; }

  NetBackend& backend_;
  const LoopScheduler run_on_loop_;
  const VirtioNetOptions options_;
  const std::thread::id loop_thread_;
  // Work handed to the loop holds a weak_ptr to this: it outlives the device only as a no-op.
  std::shared_ptr<VirtioNet*> self_;
  std::atomic<std::uint32_t> pending_{0};
  std::atomic<bool> pending_scheduled_{false};

  mutable std::mutex mu_;
  VirtioQueueHost* host_ = nullptr;  // guarded by mu_; null while no driver is live
  std::uint64_t generation_ = 0;     // guarded by mu_; moves at every activate and reset
  bool rx_waiting_ = false;          // guarded by mu_: a frame was refused, rx_space() owed
  DescriptorChain rx_chain_;         // guarded by mu_: popped, not yet used (if rx_held_)
  bool rx_held_ = false;             // guarded by mu_
  VirtioNetStats stats_;             // guarded by mu_

  // Transmit side: loop thread only.
  std::vector<std::uint8_t> tx_buf_;  // one frame, kMaxFrameBytes
  DescriptorChain tx_chain_;
  struct HeldTx {
    bool held = false;
    std::uint16_t head = 0;
    std::uint64_t generation = 0;
    std::size_t bytes = 0;
  };
  HeldTx tx_held_;             // the frame in tx_buf_ a blocked back-end did not take
  bool tx_blocked_ = false;    // waiting for tx_ready()
  bool tx_resume_scheduled_ = false;
};

}  // namespace minivmm::devices
