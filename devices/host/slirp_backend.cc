#include "devices/host/slirp_backend.h"

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include "devices/log/log.h"

// The header only: the library itself is loaded at run time (slirp_library.h).
#if !__has_include(<slirp/libslirp.h>)
#error "libslirp's header is missing: scripts/setup.sh installs it (Debian: libslirp-dev)"
#endif
#include "devices/host/slirp_library.h"

namespace minivmm::devices {
namespace {

// libslirp's clock and DNS cache are process-wide.
std::atomic<bool> g_instance{false};

std::string dotted(std::uint32_t host_order) {
  in_addr a{};
  a.s_addr = htonl(host_order);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

}  // namespace

namespace {

// libslirp's timeouts are at most 1000 ms, and exactly 1000 when nothing is pending (no TCP
// connection, IP fragment or expiring socket): then no timer is armed.
constexpr std::uint32_t kIdleTimeoutMs = 1000;
// libslirp's clock (curtime) is refreshed before a guest frame after this much quiet, so a socket
// the frame creates does not expire at once against a stale clock.
constexpr timers::Nanos kClockRefresh{1'000'000'000};
// Output-only polls in a row that may each send a queued packet (flush_output); a longer queue
// (a 64 KiB datagram is 45 fragments) goes on at the loop's next turn.
constexpr std::size_t kOutputPollsPerTurn = 64;
// How often libslirp is polled while a socket it left out of the fill is still open (quiet_).
constexpr timers::Nanos kQuietPoll{250'000'000};

std::uint32_t interest_of(int slirp_events) {
  std::uint32_t interest = 0;
  // PRI is folded into readable: libslirp sets SO_OOBINLINE, so urgent data arrives in line.
  if ((slirp_events & (SLIRP_POLL_IN | SLIRP_POLL_PRI)) != 0) interest |= loop::kReadable;
  if ((slirp_events & SLIRP_POLL_OUT) != 0) interest |= loop::kWritable;
  return interest;
}

}  // namespace

struct SlirpBackend::Callbacks {
  static SlirpBackend& self(void* opaque) { return *static_cast<SlirpBackend*>(opaque); }

  static ssize_t send_packet(const void* buf, size_t len, void* opaque) {
    self(opaque).on_slirp_frame(std::span(static_cast<const std::uint8_t*>(buf), len));
    // Always "sent": a negative answer makes libslirp log a glib critical, and the frame was
    // either delivered, queued, or dropped and counted here.
    return static_cast<ssize_t>(len);
  }
  static void guest_error(const char* msg, void* opaque) {
    ++self(opaque).stats_.guest_errors;
    log::debug("net user: guest error: {}", msg != nullptr ? msg : "");
  }
  static int64_t clock_get_ns(void* opaque) {
    return static_cast<int64_t>(self(opaque).rt_.clock().now().count());
  }
  // libslirp's timers, as rt_clock timers; a timer fires once per timer_mod.
  static void* timer_new(SlirpTimerCb cb, void* cb_opaque, void* opaque) {
    SlirpBackend& s = self(opaque);
    timers::Timer& t = s.slirp_timers_.emplace_back(
        s.rt_, "slirp", [&s, cb, cb_opaque](const timers::Timer::Expiry&) {
          cb(cb_opaque);
          s.refill();
        });
    s.stats_.slirp_timers = s.slirp_timers_.size();
    return &t;
  }
  static void* timer_new_opaque(SlirpTimerId id, void* cb_opaque, void* opaque) {
    SlirpBackend& s = self(opaque);
    timers::Timer& t = s.slirp_timers_.emplace_back(
        s.rt_, "slirp", [&s, id, cb_opaque](const timers::Timer::Expiry&) {
          if (s.slirp_ != nullptr) s.lib_.slirp_handle_timer(s.slirp_, id, cb_opaque);
          s.refill();
        });
    s.stats_.slirp_timers = s.slirp_timers_.size();
    return &t;
  }
  static void timer_free(void* timer, void* opaque) {
    SlirpBackend& s = self(opaque);
    s.slirp_timers_.remove_if([timer](const timers::Timer& t) { return &t == timer; });
    s.stats_.slirp_timers = s.slirp_timers_.size();
  }
  static void timer_mod(void* timer, int64_t expire_ms, void* /*opaque*/) {
    // An absolute time in milliseconds of clock_get_ns's clock: the rt list's.
    static_cast<timers::Timer*>(timer)->arm_at(timers::Nanos{expire_ms * 1'000'000});
  }
  // A socket was created. Nothing to do: the next fill lists it (listeners are never announced
  // here, so the fill is the only complete list anyway).
  static void register_poll_fd(int /*fd*/, void* /*opaque*/) {}
  static void unregister_poll_fd(int fd, void* opaque) { self(opaque).forget_fd(fd); }
  // A TCP buffer toward the guest drained: the socket wants reading again. Every call into
  // libslirp ends with a fill, which picks that up.
  static void notify(void* /*opaque*/) {}
  // Called inside slirp_new, before it returns: timers may be created before then.
  static void init_completed(Slirp* slirp, void* opaque) { self(opaque).slirp_ = slirp; }

  static int add_poll(int fd, int events, void* opaque) {
    SlirpBackend& s = self(opaque);
    s.fill_.push_back(PollSlot{fd, events});
    return static_cast<int>(s.fill_.size() - 1);
  }
  static int get_revents(int idx, void* opaque) {
    SlirpBackend& s = self(opaque);
    if (idx < 0 || static_cast<std::size_t>(idx) >= s.fill_.size()) return 0;
    const PollSlot& slot = s.fill_[static_cast<std::size_t>(idx)];
    if (slot.fd != s.event_fd_) return 0;
    return s.event_bits_ & (slot.events | SLIRP_POLL_HUP | SLIRP_POLL_ERR);
  }

  // Must outlive the Slirp: libslirp keeps the pointer.
  static const SlirpCb table;
};

const SlirpCb SlirpBackend::Callbacks::table = {
    .send_packet = &SlirpBackend::Callbacks::send_packet,
    .guest_error = &SlirpBackend::Callbacks::guest_error,
    .clock_get_ns = &SlirpBackend::Callbacks::clock_get_ns,
    .timer_new = &SlirpBackend::Callbacks::timer_new,
    .timer_free = &SlirpBackend::Callbacks::timer_free,
    .timer_mod = &SlirpBackend::Callbacks::timer_mod,
#if SLIRP_CHECK_VERSION(4, 9, 0)
    // Renamed in 4.9; on Linux a slirp_os_socket is an int, so the slot is the same.
    .register_poll_socket = &SlirpBackend::Callbacks::register_poll_fd,
    .unregister_poll_socket = &SlirpBackend::Callbacks::unregister_poll_fd,
#else
    .register_poll_fd = &SlirpBackend::Callbacks::register_poll_fd,
    .unregister_poll_fd = &SlirpBackend::Callbacks::unregister_poll_fd,
#endif
    .notify = &SlirpBackend::Callbacks::notify,
    .init_completed = &SlirpBackend::Callbacks::init_completed,
    .timer_new_opaque = &SlirpBackend::Callbacks::timer_new_opaque,
};

std::unique_ptr<SlirpBackend> SlirpBackend::create(loop::EventLoop& loop, timers::TimerList& rt,
                                                   SlirpOptions options) {
  if (g_instance.exchange(true)) {
    throw NetBackendError("only one user-mode network per process (libslirp's state is "
                          "process-wide)");
  }
  std::unique_ptr<SlirpBackend> backend;
  try {
    const SlirpLibrary& lib = SlirpLibrary::load();
    backend.reset(new SlirpBackend(loop, rt, lib, std::move(options)));
  } catch (...) {
    g_instance = false;
    throw;
  }
  // From here the destructor gives the instance back.
  backend->start();
  return backend;
}

SlirpBackend::SlirpBackend(loop::EventLoop& loop, timers::TimerList& rt, const SlirpLibrary& lib,
                           SlirpOptions options)
    : loop_(loop),
      rt_(rt),
      lib_(lib),
      options_(std::move(options)),
      poll_timer_(rt, "slirp-timeout", [this](const timers::Timer::Expiry&) {
        ++stats_.timer_polls;
        flush_output();
        refill();
      }) {}

void SlirpBackend::start() {
  SlirpConfig cfg{};
  // 4: the fields up to disable_dhcp, and timer_new_opaque/init_completed in SlirpCb. libslirp
  // older than 4.7 refuses it (slirp_new returns NULL).
  cfg.version = 4;
  cfg.restricted = 0;
  cfg.in_enabled = true;
  cfg.vnetwork.s_addr = htonl(kNetwork);
  cfg.vnetmask.s_addr = htonl(kNetmask);
  cfg.vhost.s_addr = htonl(kGateway);
  cfg.vdhcp_start.s_addr = htonl(kGuest);
  cfg.vnameserver.s_addr = htonl(kDns);
  cfg.in6_enabled = options_.ipv6;
  if (options_.ipv6) {
    ::inet_pton(AF_INET6, "fec0::", &cfg.vprefix_addr6);
    cfg.vprefix_len = 64;
    ::inet_pton(AF_INET6, "fec0::2", &cfg.vhost6);
    ::inet_pton(AF_INET6, "fec0::3", &cfg.vnameserver6);
  }
  cfg.if_mtu = 0;  // 1500
  cfg.if_mru = 0;
  cfg.disable_host_loopback = false;  // 10.0.2.2 reaches the host's 127.0.0.1, as in QEMU
  cfg.enable_emu = false;             // libslirp says its protocol emulation is unsafe
  slirp_ = lib_.slirp_new(&cfg, &Callbacks::table, this);
  if (slirp_ == nullptr) {
    throw NetBackendError("libslirp " + lib_.version +
                          " refused the network configuration (libslirp 4.7 or later is needed)");
  }
  for (const HostForward& f : options_.forwards) {
    const std::uint32_t guest = ntohl(f.guest_addr.s_addr);
    if (guest != 0 && ((guest & kNetmask) != kNetwork || guest == kNetwork ||
                       guest == kGateway || guest == kDns || guest == (kNetwork | ~kNetmask))) {
      throw NetBackendError(f.spec + ": the guest address must be a guest's in " +
                            dotted(kNetwork) + "/24 (not .0, .2, .3 or .255)");
    }
    if (lib_.slirp_add_hostfwd(slirp_, f.udp ? 1 : 0, f.host_addr, f.host_port, f.guest_addr,
                               f.guest_port) < 0) {
      const int err = errno;
      throw NetBackendError(f.spec + ": cannot listen on " +
                            dotted(ntohl(f.host_addr.s_addr)) + ":" +
                            std::to_string(f.host_port) + "/" + (f.udp ? "udp" : "tcp") + " (" +
                            std::strerror(err) + ")");
    }
  }
  last_poll_ = rt_.clock().now();
  refill();
  log::info("net: user-mode network {}/24 (libslirp {}), {} host forward(s)", dotted(kNetwork),
            lib_.version, options_.forwards.size());
}

SlirpBackend::~SlirpBackend() {
  // Unregisters (and so unwatches) every socket that was in a fill and frees libslirp's timers.
  if (slirp_ != nullptr) lib_.slirp_cleanup(slirp_);
  slirp_ = nullptr;
  if (!watched_.empty()) {
    // A descriptor libslirp closed without saying so; its watch must not outlive this object.
    log::warn("net user: {} socket(s) still watched after libslirp's cleanup", watched_.size());
    for (const auto& [fd, w] : watched_) loop_.unwatch(fd);
    watched_.clear();
  }
  g_instance = false;
}

const std::string& SlirpBackend::version() const noexcept { return lib_.version; }

void SlirpBackend::attach(NetPeer* peer) { peer_ = peer; }

NetTxResult SlirpBackend::transmit(std::span<const std::uint8_t> frame) noexcept {
  if (rt_.clock().now() - last_poll_ > kClockRefresh) poll(false);
  // Copies the frame (or answers it: ARP, ICMP to the gateway, DHCP) before it returns; frames
  // for the guest arrive through send_packet meanwhile.
  lib_.slirp_input(slirp_, frame.data(), static_cast<int>(frame.size()));
  ++stats_.tx_frames;
  stats_.tx_bytes += frame.size();
  tx_since_poll_ = true;
  return NetTxResult::kSent;
}

void SlirpBackend::transmit_done() noexcept {
  if (!tx_since_poll_) return;
  tx_since_poll_ = false;
  // Once per run of guest frames: sends what waited for the guest's ARP answer (libslirp only
  // sends its queue when polled) and reads the socket set the frames changed.
  flush_output();
  refill();
}

bool SlirpBackend::poll(bool sockets) noexcept {
  const std::uint64_t before = frames_from_slirp_;
  // select_error = 1 runs libslirp's timers and output queue without looking at any socket.
  lib_.slirp_pollfds_poll(slirp_, sockets ? 0 : 1, &Callbacks::get_revents, this);
  ++stats_.polls;
  last_poll_ = rt_.clock().now();
  return frames_from_slirp_ != before;
}

void SlirpBackend::flush_output() noexcept {
  // libslirp's output queue (if_start) sends, per poll, every packet of its interactive flows
  // but only the first queued packet of each other flow, and packets pile up while it waits for
  // the guest's ARP answer: every fragment of a large datagram to a forward, say. A UDP socket
  // with more than four packets queued is left out of the fill, so nothing else would poll
  // again: a 20000-byte datagram before the guest's first answer left the forward deaf for good.
  // So an output-only poll that sent something is repeated until one sends nothing.
  output_pending_ = false;
  for (std::size_t i = 0; i < kOutputPollsPerTurn; ++i) {
    if (!poll(false)) return;
    if (i > 0) ++stats_.output_polls;
  }
  output_pending_ = true;  // refill() arms the timer for the loop's next turn
}

void SlirpBackend::refill() noexcept {
  if (slirp_ == nullptr) return;
  fill_.clear();
  std::uint32_t timeout = UINT32_MAX;
  // May close expired sockets, which unwatches them (forget_fd) before it returns.
  lib_.slirp_pollfds_fill(slirp_, &timeout, &Callbacks::add_poll, this);
  const std::uint64_t fill = ++stats_.fills;
  try {
    for (const PollSlot& slot : fill_) {
      const std::uint32_t interest = interest_of(slot.events);
      const auto it = watched_.find(slot.fd);
      if (it == watched_.end()) {
        const int fd = slot.fd;
        loop_.watch(fd, interest,
                    loop::FdHandlers{[this, fd] { on_socket_event(fd, SLIRP_POLL_IN); },
                                     [this, fd] { on_socket_event(fd, SLIRP_POLL_OUT); },
                                     [this, fd] {
                                       on_socket_event(fd, SLIRP_POLL_HUP | SLIRP_POLL_ERR);
                                     }});
        watched_.emplace(fd, Watched{interest, loop_.stats().iterations, fill});
        ++stats_.watch_changes;
      } else {
        if (it->second.interest != interest) {
          loop_.set_interest(slot.fd, interest);
          it->second.interest = interest;
          ++stats_.watch_changes;
        }
        it->second.fill = fill;
      }
      quiet_.erase(slot.fd);
    }
  } catch (const std::exception& e) {
    // The poller refused a socket (out of memory for epoll, say): libslirp will not hear of it.
    log::error("net user: cannot watch a socket: {}", e.what());
  }
  // Sockets that want nothing this time (a full buffer toward the guest, a UDP socket with
  // datagrams queued) leave the poller: a hang-up is reported whatever the interest, and
  // libslirp would not look at it, so the loop would spin.
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (it->second.fill == fill) {
      ++it;
      continue;
    }
    loop_.unwatch(it->first);
    ++stats_.watch_changes;
    quiet_.insert(it->first);
    it = watched_.erase(it);
  }
  stats_.sockets = watched_.size();
  if (stats_.sockets > stats_.sockets_max) stats_.sockets_max = stats_.sockets;
  stats_.quiet_sockets = quiet_.size();
  // A socket left out of the fill but still open may be waiting on libslirp's output queue. A
  // packet there that waited in vain for the guest's ARP answer expires after a second, but is
  // only dropped when libslirp is polled, one per flow per poll, and the next one then asks
  // again: so while a socket is quiet, poll every kQuietPoll. Nothing is quiet on an idle
  // network, which keeps costing no wakeup.
  const timers::Nanos now = rt_.clock().now();
  if (output_pending_) {
    poll_timer_.arm_at(now);
  } else if (timeout < kIdleTimeoutMs) {
    const timers::Nanos due = now + timers::Nanos{std::uint64_t{timeout} * 1'000'000};
    poll_timer_.arm_at(quiet_.empty() ? due : std::min(due, now + kQuietPoll));
  } else if (!quiet_.empty()) {
    poll_timer_.arm_at(now + kQuietPoll);
  } else {
    poll_timer_.cancel();
  }
}

void SlirpBackend::on_socket_event(int fd, int slirp_events) noexcept {
  const auto it = watched_.find(fd);
  if (it == watched_.end()) return;
  // Watched during this iteration's dispatch: the readiness came from the wait before, for
  // whatever had this number then.
  if (it->second.since >= loop_.stats().iterations) {
    ++stats_.stale_events;
    return;
  }
  ++stats_.socket_events;
  event_fd_ = fd;
  event_bits_ = slirp_events;
  poll(true);
  event_fd_ = -1;
  event_bits_ = 0;
  refill();
}

void SlirpBackend::forget_fd(int fd) noexcept {
  quiet_.erase(fd);  // closed: its number may come back as another socket
  stats_.quiet_sockets = quiet_.size();
  const auto it = watched_.find(fd);
  if (it == watched_.end()) return;
  loop_.unwatch(fd);
  ++stats_.watch_changes;
  watched_.erase(it);
  stats_.sockets = watched_.size();
}

void SlirpBackend::on_slirp_frame(std::span<const std::uint8_t> frame) noexcept {
  ++frames_from_slirp_;
  if (peer_ == nullptr) {
    ++stats_.rx_dropped_detached;
    return;
  }
  // Behind a backlog a frame waits its turn, so the guest sees them in order.
  if (backlog_.empty() && peer_->offer_frame(frame)) {
    ++stats_.rx_frames;
    stats_.rx_bytes += frame.size();
    return;
  }
  if (backlog_.size() >= options_.backlog_frames) {
    ++stats_.rx_backlog_drops;
    return;
  }
  backlog_.emplace_back(frame.begin(), frame.end());
  ++stats_.rx_backlogged;
  if (backlog_.size() > stats_.rx_backlog_max) stats_.rx_backlog_max = backlog_.size();
}

void SlirpBackend::rx_space() noexcept {
  while (!backlog_.empty() && peer_ != nullptr) {
    if (!peer_->offer_frame(backlog_.front())) return;
    ++stats_.rx_frames;
    stats_.rx_bytes += backlog_.front().size();
    backlog_.pop_front();
  }
}

void SlirpBackend::report(ReportWriter& out) const {
  out.text("libslirp", lib_.version);
  out.text("network", dotted(kNetwork) + "/24");
  out.count("host_forwards", options_.forwards.size());
  out.count("tx_frames", stats_.tx_frames);
  out.count("tx_bytes", stats_.tx_bytes);
  out.count("rx_frames", stats_.rx_frames);
  out.count("rx_bytes", stats_.rx_bytes);
  out.count("rx_backlogged", stats_.rx_backlogged);
  out.count("rx_backlog_drops", stats_.rx_backlog_drops);
  out.count("rx_backlog_max", stats_.rx_backlog_max);
  out.count("rx_dropped_detached", stats_.rx_dropped_detached);
  out.count("polls", stats_.polls);
  out.count("socket_events", stats_.socket_events);
  out.count("stale_events", stats_.stale_events);
  out.count("timer_polls", stats_.timer_polls);
  out.count("output_polls", stats_.output_polls);
  out.count("fills", stats_.fills);
  out.count("watch_changes", stats_.watch_changes);
  out.count("sockets", stats_.sockets);
  out.count("sockets_max", stats_.sockets_max);
  out.count("quiet_sockets", stats_.quiet_sockets);
  out.count("slirp_timers", stats_.slirp_timers);
  out.count("guest_errors", stats_.guest_errors);
}


}  // namespace minivmm::devices
