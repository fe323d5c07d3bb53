#include "devices/host/tap_backend.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Closes a descriptor unless released: the openers' error paths throw.
class FdGuard {
 public:
  explicit FdGuard(int fd) noexcept : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// No offloads, and a 12-byte header: what the device negotiates (see the header comment).
void set_vnet_header(int fd, const std::string& what) {
  int size = static_cast<int>(TapBackend::kVnetHeaderBytes);
  if (::ioctl(fd, TUNSETVNETHDRSZ, &size) != 0) {
    throw NetBackendError(what + ": cannot set the vnet header size (TUNSETVNETHDRSZ: " +
                          errno_text(errno) + ")");
  }
  // TUNSETOFFLOAD takes its flags by value.
  if (::ioctl(fd, TUNSETOFFLOAD, 0ul) != 0) {
    throw NetBackendError(what + ": cannot turn offloads off (TUNSETOFFLOAD: " +
                          errno_text(errno) + ")");
  }
}

void set_nonblocking(int fd, const std::string& what) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    throw NetBackendError(what + ": cannot make it non-blocking (" + errno_text(errno) + ")");
  }
}

}  // namespace

std::unique_ptr<TapBackend> TapBackend::open(loop::EventLoop& loop, const std::string& ifname) {
  const std::string what = "TAP interface '" + ifname + "'";
  if (ifname.empty() || ifname.size() >= IFNAMSIZ || ifname.find('/') != std::string::npos) {
    throw NetBackendError("bad TAP interface name '" + ifname + "' (1 to " +
                          std::to_string(IFNAMSIZ - 1) + " characters, no '/')");
  }
  // Checked first because TUNSETIFF by root would create a missing interface.
  if (::if_nametoindex(ifname.c_str()) == 0) {
    throw NetBackendError(what + " does not exist in this network namespace (create it first: "
                          "ip tuntap add dev " + ifname + " mode tap user $USER)");
  }
  FdGuard fd(::open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    throw NetBackendError("cannot open /dev/net/tun for " + what + ": " + errno_text(errno));
  }
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
  ifr.ifr_flags = static_cast<short>(IFF_TAP | IFF_NO_PI | IFF_VNET_HDR);
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) != 0) {
    const int err = errno;
    switch (err) {
      case EINVAL:
        throw NetBackendError(what + " is not a single-queue TAP device (a TUN device, a "
                              "multi-queue TAP, or not a tun/tap interface at all)");
      case EBUSY:
        throw NetBackendError(what + " is in use by another process");
      case EPERM:
        throw NetBackendError(what + ": permission denied (its owner or group is another "
                              "user's; `ip tuntap add ... user $USER` makes it yours)");
      default:
        throw NetBackendError(what + ": TUNSETIFF failed: " + errno_text(err));
    }
  }
  // A persistent TAP we could attach to stays persistent; without the flag, TUNSETIFF just
  // created the interface (it vanished after the if_nametoindex check). Closing removes it.
  ifreq got{};
  if (::ioctl(fd.get(), TUNGETIFF, &got) != 0 || (got.ifr_flags & IFF_PERSIST) == 0) {
    throw NetBackendError(what + " disappeared while it was being opened; not creating one");
  }
  set_vnet_header(fd.get(), what);
  log::info("net: attached to {}", what);
  return std::make_unique<TapBackend>(loop, fd.release(), kVnetHeaderBytes, ifname);
}

std::unique_ptr<TapBackend> TapBackend::adopt(loop::EventLoop& loop, int raw_fd) {
  FdGuard fd(raw_fd);
  const std::string what = "fd " + std::to_string(raw_fd);
  if (::fcntl(fd.get(), F_GETFD) < 0) {
    throw NetBackendError(what + " is not an open descriptor");
  }
  ifreq ifr{};
  if (::ioctl(fd.get(), TUNGETIFF, &ifr) != 0) {
    const int err = errno;
    if (err == EBADFD) throw NetBackendError(what + " is a tun/tap descriptor not attached to any interface");
    throw NetBackendError(what + " is not a TAP descriptor (TUNGETIFF: " + errno_text(err) + ")");
  }
  if ((ifr.ifr_flags & IFF_TAP) == 0) {
    throw NetBackendError(what + " is a TUN (IP) device, not a TAP (Ethernet) device");
  }
  if ((ifr.ifr_flags & IFF_NO_PI) == 0) {
    // Each frame would carry a 4-byte packet-information prefix we would have to strip.
    throw NetBackendError(what + " was opened without IFF_NO_PI");
  }
  std::string name(ifr.ifr_name, ::strnlen(ifr.ifr_name, IFNAMSIZ));
  const std::string label = what + " (" + name + ")";
  std::size_t header = 0;
  if ((ifr.ifr_flags & IFF_VNET_HDR) != 0) {
    set_vnet_header(fd.get(), label);
    header = kVnetHeaderBytes;
  }
  log::info("net: attached to TAP interface '{}' through {}", name, what);
  return std::make_unique<TapBackend>(loop, fd.release(), header, std::move(name));
}

TapBackend::TapBackend(loop::EventLoop& loop, int fd, std::size_t vnet_header_bytes,
                       std::string name)
    : loop_(loop),
      fd_(fd),
      vnet_header_bytes_(vnet_header_bytes),
      name_(std::move(name)),
      rx_buf_(vnet_header_bytes + kMaxFrameBytes) {
  // A blocking read or write would stop the whole loop (a test's socket, a parent's fd).
  try {
    set_nonblocking(fd_, "TAP '" + name_ + "'");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

TapBackend::~TapBackend() {
  if (watching_) loop_.unwatch(fd_);
  ::close(fd_);
}

void TapBackend::attach(NetPeer* peer) {
  peer_ = peer;
  if (peer_ != nullptr && !watching_ && !dead_) {
    loop_.watch(fd_, loop::kReadable,
                loop::FdHandlers{[this] { on_readable(); }, [this] { on_writable(); },
                                 [this] { on_hangup(); }});
    watching_ = true;
    reading_ = held_bytes_ == 0;
    update_interest();
  } else if (peer_ == nullptr && watching_) {
    loop_.unwatch(fd_);
    watching_ = false;
  }
}

void TapBackend::update_interest() noexcept {
  if (!watching_) return;
  const std::uint32_t interest =
      (reading_ ? loop::kReadable : 0u) | (want_writable_ ? loop::kWritable : 0u);
  loop_.set_interest(fd_, interest);
}

bool TapBackend::offer_held() noexcept {
  if (held_bytes_ == 0) return true;
  if (peer_ == nullptr) return false;
  const auto frame = std::span(rx_buf_).subspan(vnet_header_bytes_, held_bytes_);
  if (!peer_->offer_frame(frame)) return false;
  ++stats_.rx_frames;
  stats_.rx_bytes += held_bytes_;
  held_bytes_ = 0;
  return true;
}

void TapBackend::on_readable() noexcept {
  for (std::size_t i = 0; i < kRxFramesPerTurn && peer_ != nullptr && !dead_; ++i) {
    const ssize_t n = ::read(fd_, rx_buf_.data(), rx_buf_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      ++stats_.rx_errors;
      if (errno == EBADFD || errno == EIO) on_hangup();  // the interface went away
      return;
    }
    // Never a TAP frame: a socket peer that closed (its hang-up follows) or an empty datagram.
    if (n == 0) return;
    if (static_cast<std::size_t>(n) <= vnet_header_bytes_) {
      ++stats_.rx_runts;
      continue;
    }
    held_bytes_ = static_cast<std::size_t>(n) - vnet_header_bytes_;
    if (!offer_held()) {
      // The device has no receive buffer: stop reading, keep this one, wait for rx_space().
      ++stats_.rx_pauses;
      reading_ = false;
      update_interest();
      return;
    }
  }
}

void TapBackend::rx_space() noexcept {
  if (dead_ || !offer_held()) return;
  if (!reading_) {
    reading_ = true;
    update_interest();
  }
}

NetTxResult TapBackend::transmit(std::span<const std::uint8_t> frame) noexcept {
  if (dead_) {
    ++stats_.tx_dropped_error;
    return NetTxResult::kDropped;
  }
  // A zeroed header: no checksum or segmentation to do (none negotiated, TUNSETOFFLOAD 0).
  static constexpr std::array<std::uint8_t, kVnetHeaderBytes> kHeader{};
  std::array<iovec, 2> iov{};
  iov[0] = iovec{const_cast<std::uint8_t*>(kHeader.data()), vnet_header_bytes_};
  iov[1] = iovec{const_cast<std::uint8_t*>(frame.data()), frame.size()};
  const bool with_header = vnet_header_bytes_ != 0;
  const iovec* first = with_header ? iov.data() : iov.data() + 1;
  const int count = with_header ? 2 : 1;
  const std::size_t total = vnet_header_bytes_ + frame.size();
  for (;;) {
    const ssize_t n = ::writev(fd_, first, count);
    if (n >= 0 && static_cast<std::size_t>(n) == total) {
      ++stats_.tx_frames;
      stats_.tx_bytes += frame.size();
      return NetTxResult::kSent;
    }
    if (n >= 0) {
      // A packet descriptor takes a frame whole or not at all; count the oddity and move on.
      ++stats_.tx_dropped_error;
      return NetTxResult::kDropped;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      ++stats_.tx_eagain;
      if (!want_writable_) {
        want_writable_ = true;
        update_interest();
      }
      return NetTxResult::kWouldBlock;
    }
    if (errno == EIO) {
      ++stats_.tx_dropped_down;
      return NetTxResult::kDropped;
    }
    log::debug("net: write to TAP '{}' failed: {}", name_, std::strerror(errno));
    ++stats_.tx_dropped_error;
    return NetTxResult::kDropped;
  }
}

void TapBackend::on_writable() noexcept {
  if (!want_writable_) return;
  want_writable_ = false;
  update_interest();
  if (peer_ != nullptr) peer_->tx_ready();
}

void TapBackend::on_hangup() noexcept {
  if (dead_) return;
  dead_ = true;
  ++stats_.hangups;
  log::warn("net: TAP '{}' hung up (the interface was deleted?); its frames are dropped from "
            "now on",
            name_);
  if (watching_) {
    loop_.unwatch(fd_);
    watching_ = false;
  }
  // A device waiting for writability would wait for good; let it transmit (and be dropped).
  if (want_writable_) {
    want_writable_ = false;
    if (peer_ != nullptr) peer_->tx_ready();
  }
}

void TapBackend::report(ReportWriter& out) const {
  out.text("interface", name_);
  out.count("vnet_header_bytes", vnet_header_bytes_);
  out.count("rx_frames", stats_.rx_frames);
  out.count("rx_bytes", stats_.rx_bytes);
  out.count("rx_pauses", stats_.rx_pauses);
  out.count("rx_runts", stats_.rx_runts);
  out.count("rx_errors", stats_.rx_errors);
  out.count("tx_frames", stats_.tx_frames);
  out.count("tx_bytes", stats_.tx_bytes);
  out.count("tx_eagain", stats_.tx_eagain);
  out.count("tx_dropped_down", stats_.tx_dropped_down);
  out.count("tx_dropped_error", stats_.tx_dropped_error);
  out.count("hangups", stats_.hangups);
  out.flag("hung_up", dead_);
}

}  // namespace minivmm::devices
