// The TAP back-end: guest frames to and from an existing TAP interface, read when readable and
// written with back-pressure, on the loop thread.
//
// Opening (open() by name, adopt() for a descriptor passed in) never creates an interface: the
// name must exist in the caller's network namespace first (if_nametoindex: /sys may show another
// namespace), TUNSETIFF then refuses what is not a single-queue TAP (EINVAL) or is attached
// elsewhere (EBUSY), and the device must be persistent afterwards (TUNGETIFF): one that is not was
// just created by TUNSETIFF itself, in a race with its removal, and is closed again (it vanishes
// with the descriptor). Root can attach without creating anything; a TAP without owner or group
// needs no capability at all.
//
// The descriptor is opened IFF_TAP | IFF_NO_PI | IFF_VNET_HDR with a 12-byte vnet header
// (TUNSETVNETHDRSZ) and no offloads (TUNSETOFFLOAD 0: a previous user may have left TSO on, and
// the guest negotiated none). The header carries nothing while no offload is on, but keeps the
// layout QEMU uses and the path to checksum and TSO offloads open. Reads strip it (the kernel may
// set DATA_VALID there, and older kernels leave num_buffers unwritten: the device writes its own
// header for the guest anyway); writes prepend a zeroed one. A passed descriptor without
// IFF_VNET_HDR works too, frames without header.
//
// Receive: on readable, up to kRxFramesPerTurn frames are read into one bounce buffer and offered
// to the device; level-triggered polling brings the rest on the next iteration. A frame the device
// refuses (no guest buffer) is held here and reading stops (the readable interest is dropped: the
// kernel keeps queueing, and drops past the TAP's txqueuelen, counted in `ip -s link`) until the
// device calls rx_space().
//
// Transmit: one writev per frame. EAGAIN (possible only with a small TUNSETSNDBUF, or a socket in
// tests) answers kWouldBlock and adds the writable interest; when the descriptor is writable the
// device gets tx_ready(). EIO (the interface is down) and other errors drop the frame, counted.
//
// A hang-up or error on the descriptor (the interface was deleted: EBADFD) stops the back-end for
// good, said once: it stops watching the descriptor (a hung-up fd is reported whatever the
// interest, which would spin the loop), transmits are dropped and counted.
//
// Threads: the loop thread, every method; construct and destroy there too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "devices/host/net_backend.h"
#include "loop/event_loop.h"

namespace minivmm::devices {

struct TapBackendStats {
  std::uint64_t rx_frames = 0, rx_bytes = 0;  // read and taken by the device
  std::uint64_t rx_pauses = 0;       // reading stopped: the guest had no receive buffer
  std::uint64_t rx_runts = 0;        // reads shorter than the vnet header, ignored
  std::uint64_t rx_errors = 0;       // read errors other than EAGAIN
  std::uint64_t tx_frames = 0, tx_bytes = 0;
  std::uint64_t tx_eagain = 0;       // writes refused for a full queue (the device waits)
  std::uint64_t tx_dropped_down = 0;  // EIO: the interface is down
  std::uint64_t tx_dropped_error = 0;  // other write errors, and writes after a hang-up
  std::uint64_t hangups = 0;
};

class TapBackend final : public NetBackend {
 public:
  static constexpr std::size_t kVnetHeaderBytes = 12;
  // Frames read per readable event before the loop gets its turn back.
  static constexpr std::size_t kRxFramesPerTurn = 64;

  // Attaches to the existing TAP interface `ifname`. Throws NetBackendError with a one-line
  // message: a bad name, no such interface, not a TAP, in use, no permission, no /dev/net/tun.
  static std::unique_ptr<TapBackend> open(loop::EventLoop& loop, const std::string& ifname);
  // Takes over `fd`, a TAP descriptor already attached to an interface (a parent's
  // `--net tap,fd=N`): TUNGETIFF must say IFF_TAP. Closed by the back-end from now on, also when
  // this throws NetBackendError.
  static std::unique_ptr<TapBackend> adopt(loop::EventLoop& loop, int fd);

  // Any packet descriptor, owned from now on and made non-blocking: each read is one frame, each
  // write one frame, `vnet_header_bytes` (0 or 12) of header before it. For open() and adopt(),
  // and for tests with a SOCK_SEQPACKET socket pair, which, unlike a TAP, can be made to refuse
  // writes. Throws NetBackendError if the descriptor cannot be made non-blocking.
  TapBackend(loop::EventLoop& loop, int fd, std::size_t vnet_header_bytes, std::string name);
  ~TapBackend() override;
  TapBackend(const TapBackend&) = delete;
  TapBackend& operator=(const TapBackend&) = delete;

  // NetBackend
  std::string_view kind() const noexcept override { return "tap"; }
  void attach(NetPeer* peer) override;
  NetTxResult transmit(std::span<const std::uint8_t> frame) noexcept override;
  void rx_space() noexcept override;
  void report(ReportWriter& out) const override;

  const std::string& name() const noexcept { return name_; }
  int fd() const noexcept { return fd_; }
  std::size_t vnet_header_bytes() const noexcept { return vnet_header_bytes_; }
  bool dead() const noexcept { return dead_; }
  const TapBackendStats& stats() const noexcept { return stats_; }

 private:
  void on_readable() noexcept;
  void on_writable() noexcept;
  void on_hangup() noexcept;
  // Offers the held frame; true when the device took it (or there was none).
  bool offer_held() noexcept;
  void update_interest() noexcept;

  loop::EventLoop& loop_;
  const int fd_;
  const std::size_t vnet_header_bytes_;
  const std::string name_;
  NetPeer* peer_ = nullptr;
  bool watching_ = false;
  bool reading_ = true;        // false while a refused frame waits for rx_space()
  bool want_writable_ = false;  // a transmit would have blocked
  bool dead_ = false;
  std::vector<std::uint8_t> rx_buf_;  // vnet header + one frame
  std::size_t held_bytes_ = 0;        // a refused frame's length in rx_buf_, after the header
  TapBackendStats stats_;
};

}  // namespace minivmm::devices
