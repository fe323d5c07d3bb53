// User-mode networking through libslirp (`--net user`): a NAT to the host's network with DHCP,
// a DNS proxy and host forwards, no root and no TAP. QEMU's addresses: the network 10.0.2.0/24,
// the gateway (the host itself) 10.0.2.2, DNS 10.0.2.3, the guest's DHCP address 10.0.2.15.
//
// libslirp has no thread and no alarm of its own here: it runs inside minivmm's loop.
//  - Its sockets join the loop's poller (EventLoop::watch/set_interest/unwatch). After every
//    call into libslirp the socket set is read again (slirp_pollfds_fill) and the difference
//    applied: sockets come and go, change interest, and their numbers are reused. A socket is
//    unwatched inside libslirp's unregister callback, while its descriptor is still open.
//  - A socket's readiness is handed to libslirp (slirp_pollfds_poll) only fresh and only for
//    that socket: several of its sockets are blocking, and a made-up or stale "readable" would
//    block the loop in recvfrom. Readiness of a descriptor that was (re)watched after the wait
//    that reported it (its number reused within one loop iteration) is ignored (stale_events).
//  - Its timeouts (TCP's fast and slow timers, expiring UDP sockets) become one rt_clock timer;
//    its own timers (IPv6 router advertisements) rt_clock timers too. When libslirp has nothing
//    pending, no timer is armed at all: an idle user-mode network costs no wakeup. libslirp's
//    clock only moves when it is polled, so a guest frame after more than a second of quiet
//    first polls it (with no socket work) to bring that clock up to date.
//  - libslirp sends what it queued for the guest only when polled, one packet per flow per poll
//    (if_start): an output-only poll that sent something is repeated until one sends nothing,
//    and while a socket is left out of the fill (a UDP socket with packets queued) libslirp is
//    polled every 250 ms, so packets that waited in vain for the guest's ARP answer expire.
//  - Frames libslirp sends the guest arrive inside its calls; they are offered to the device at
//    once, and while the guest has no receive buffer kept in a bounded backlog
//    (backlog_frames, then dropped and counted: TCP retransmits).
//
// libslirp keeps process-wide state (its clock, the DNS cache), so only one SlirpBackend may
// exist at a time. It is loaded on first use (SlirpLibrary); the build needs libslirp's header
// only (Debian's libslirp-dev, which scripts/setup.sh installs).
//
// Threads: the loop thread, every method, construction and destruction included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "devices/host/host_forward.h"
#include "devices/host/net_backend.h"
#include "loop/event_loop.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

struct Slirp;

namespace minivmm::devices {

struct SlirpLibrary;

struct SlirpOptions {
  std::vector<HostForward> forwards;
  // IPv6 too (fec0::/64, as QEMU). Off by default: the guests here speak IPv4, and IPv6 brings
  // libslirp's only timer (router advertisements every 200 to 600 s).
  bool ipv6 = false;
  // Frames kept for a guest without receive buffers; 128 full-size frames are under 200 KiB.
  std::size_t backlog_frames = 128;
};

struct SlirpBackendStats {
  std::uint64_t tx_frames = 0, tx_bytes = 0;  // guest frames handed to libslirp
  std::uint64_t rx_frames = 0, rx_bytes = 0;  // libslirp's frames taken by the device
  std::uint64_t rx_backlogged = 0;    // frames that had to wait for receive buffers
  std::uint64_t rx_backlog_drops = 0;  // ... and those the full backlog dropped
  std::uint64_t rx_backlog_max = 0;   // the longest the backlog was
  std::uint64_t rx_dropped_detached = 0;  // frames with no device attached
  std::uint64_t polls = 0;          // slirp_pollfds_poll calls
  std::uint64_t socket_events = 0;  // socket readiness handed to libslirp
  std::uint64_t stale_events = 0;   // readiness from before a descriptor was watched, ignored
  std::uint64_t timer_polls = 0;    // polls for libslirp's timeouts
  std::uint64_t output_polls = 0;   // polls repeated because the one before sent a queued frame
  std::uint64_t fills = 0;          // slirp_pollfds_fill calls
  std::uint64_t watch_changes = 0;  // watch, set_interest and unwatch calls on the loop
  std::uint64_t sockets = 0;        // descriptors watched now
  std::uint64_t sockets_max = 0;
  std::uint64_t quiet_sockets = 0;  // open sockets libslirp left out of its last fill
  std::uint64_t slirp_timers = 0;   // libslirp's own timers alive now
  std::uint64_t guest_errors = 0;   // libslirp's complaints about the guest's packets
};

class SlirpBackend final : public NetBackend {
 public:
  // QEMU's network, in host byte order.
  static constexpr std::uint32_t kNetwork = 0x0a000200;   // 10.0.2.0
  static constexpr std::uint32_t kNetmask = 0xffffff00;   // /24
  static constexpr std::uint32_t kGateway = 0x0a000202;   // 10.0.2.2, the host
  static constexpr std::uint32_t kDns = 0x0a000203;       // 10.0.2.3
  static constexpr std::uint32_t kGuest = 0x0a00020f;     // 10.0.2.15, first DHCP lease

  // Loads libslirp, starts the stack and opens the host forwards (binds and listens now, before
  // any seccomp filter). Throws NetBackendError with one line: no libslirp, a second instance,
  // a forward to an address outside the network, a port in use. `rt` is the loop's rt_clock list.
  static std::unique_ptr<SlirpBackend> create(loop::EventLoop& loop, timers::TimerList& rt,
                                              SlirpOptions options = {});
  ~SlirpBackend() override;
  SlirpBackend(const SlirpBackend&) = delete;
  SlirpBackend& operator=(const SlirpBackend&) = delete;

  // NetBackend
  std::string_view kind() const noexcept override { return "user"; }
  void attach(NetPeer* peer) override;
  NetTxResult transmit(std::span<const std::uint8_t> frame) noexcept override;
  void transmit_done() noexcept override;
  void rx_space() noexcept override;
  void report(ReportWriter& out) const override;

  const std::string& version() const noexcept;
  const SlirpBackendStats& stats() const noexcept { return stats_; }
  // The deadline of the rt_clock timer that carries libslirp's timeouts, if armed.
  bool poll_timer_armed() const { return poll_timer_.pending(); }

 private:
  struct Callbacks;  // libslirp's C callbacks (slirp_backend.cc)

  SlirpBackend(loop::EventLoop& loop, timers::TimerList& rt, const SlirpLibrary& lib,
               SlirpOptions options);
  void start();

  // One slirp_pollfds_poll. `sockets`: hand it the pending socket event (else no socket work).
  // Whether libslirp sent the guest a frame meanwhile.
  bool poll(bool sockets) noexcept;
  // Output-only polls until one sends nothing (libslirp sends a queued packet per flow per poll).
  void flush_output() noexcept;
  // Reads the socket set and the timeout again and applies them to the loop.
  void refill() noexcept;
  void on_socket_event(int fd, int slirp_events) noexcept;
  void forget_fd(int fd) noexcept;
  void on_slirp_frame(std::span<const std::uint8_t> frame) noexcept;

  loop::EventLoop& loop_;
  timers::TimerList& rt_;
  const SlirpLibrary& lib_;
  const SlirpOptions options_;
  ::Slirp* slirp_ = nullptr;
  NetPeer* peer_ = nullptr;

  // The last fill: index -> {fd, SLIRP_POLL_* events}.
  struct PollSlot {
    int fd;
    int events;
  };
  std::vector<PollSlot> fill_;
  struct Watched {
    std::uint32_t interest;
    std::uint64_t since;  // the loop's iteration count when watched
    std::uint64_t fill;   // the last fill that asked for it
  };
  std::unordered_map<int, Watched> watched_;
  // Sockets that were watched, are still open, and were left out of the latest fills (a full
  // buffer toward the guest, a UDP socket with packets queued): polled every 250 ms meanwhile.
  std::unordered_set<int> quiet_;
  // The one socket event a poll hands over.
  int event_fd_ = -1;
  int event_bits_ = 0;

  timers::Timer poll_timer_;
  timers::Nanos last_poll_{0};
  bool tx_since_poll_ = false;
  bool output_pending_ = false;         // flush_output stopped at its cap with more to send
  std::uint64_t frames_from_slirp_ = 0;  // send_packet calls, for poll()'s answer
  std::list<timers::Timer> slirp_timers_;  // libslirp's own (a list: Timer cannot move)

  std::deque<std::vector<std::uint8_t>> backlog_;
  SlirpBackendStats stats_;
};

}  // namespace minivmm::devices
