// TapBackend: frames both ways with the vnet header stripped and added, reading paused while the
// device has no buffer, write back-pressure, hang-up. First over a SOCK_SEQPACKET socket pair
// (a packet descriptor that, unlike a TAP, can be made to refuse writes), then against real TAP
// interfaces in a private network namespace, where root can create them; elsewhere those tests
// skip and say why.
#include "devices/host/tap_backend.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "tests/unit/devices/host/net_test_frames.h"
#include "tests/unit/devices/host/net_test_loop.h"

namespace {

using minivmm::devices::NetBackendError;
using minivmm::devices::NetTxResult;
using minivmm::devices::TapBackend;
using minivmm::testing::NetTestLoop;
using minivmm::testing::RecordingPeer;
namespace net = minivmm::testing::net;

net::Bytes test_frame(std::size_t n, int seed) {
  net::Bytes f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(seed));
  return f;
}

struct SocketPair {
  int vmm = -1, host = -1;  // the back-end's end, the "kernel's" end
  SocketPair() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
      vmm = sv[0];
      host = sv[1];
    }
  }
  ~SocketPair() {
    if (host >= 0) ::close(host);
  }
  void put(const net::Bytes& b) const {
    ASSERT_EQ(::write(host, b.data(), b.size()), static_cast<ssize_t>(b.size()));
  }
  net::Bytes get() const {
    net::Bytes b(70000);
    const ssize_t n = ::recv(host, b.data(), b.size(), MSG_DONTWAIT);
    b.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return b;
  }
};

net::Bytes with_header(const net::Bytes& frame, std::uint8_t flags = 0) {
  net::Bytes b(12 + frame.size(), 0);
  b[0] = flags;
  std::memcpy(b.data() + 12, frame.data(), frame.size());
  return b;
}

TEST(TapBackendTest, ReadsFramesAndStripsTheVnetHeader) {
  NetTestLoop l;
  SocketPair p;
  ASSERT_GE(p.vmm, 0);
  TapBackend tap(l.loop(), p.vmm, 12, "pair");
  RecordingPeer peer;
  tap.attach(&peer);
  const net::Bytes a = test_frame(60, 1), b = test_frame(1514, 2);
  p.put(with_header(a, /*DATA_VALID*/ 2));  // a flag the kernel may set: not the guest's business
  p.put(with_header(b));
  ASSERT_TRUE(l.spin_until([&] { return peer.frames.size() == 2; }));
  EXPECT_EQ(peer.frames[0], a);
  EXPECT_EQ(peer.frames[1], b);
  EXPECT_EQ(tap.stats().rx_frames, 2u);
  EXPECT_EQ(tap.stats().rx_bytes, 60u + 1514u);
}

TEST(TapBackendTest, WritesAZeroVnetHeaderBeforeEachFrame) {
  NetTestLoop l;
  SocketPair p;
  TapBackend tap(l.loop(), p.vmm, 12, "pair");
  RecordingPeer peer;
  tap.attach(&peer);
  const net::Bytes f = test_frame(100, 3);
  EXPECT_EQ(tap.transmit(f), NetTxResult::kSent);
  EXPECT_EQ(p.get(), with_header(f));
  EXPECT_EQ(tap.stats().tx_frames, 1u);
  EXPECT_EQ(tap.stats().tx_bytes, 100u);
}

TEST(TapBackendTest, WithoutAVnetHeaderFramesGoAsTheyAre) {
  NetTestLoop l;
  SocketPair p;
  TapBackend tap(l.loop(), p.vmm, 0, "pair");
  RecordingPeer peer;
  tap.attach(&peer);
  const net::Bytes f = test_frame(64, 4);
  EXPECT_EQ(tap.transmit(f), NetTxResult::kSent);
  EXPECT_EQ(p.get(), f);
  p.put(f);
  ASSERT_TRUE(l.spin_until([&] { return peer.frames.size() == 1; }));
  EXPECT_EQ(peer.frames[0], f);
}

TEST(TapBackendTest, AReadShorterThanTheHeaderIsCountedAndSkipped) {
  NetTestLoop l;
  SocketPair p;
  TapBackend tap(l.loop(), p.vmm, 12, "pair");
  RecordingPeer peer;
  tap.attach(&peer);
  p.put(net::Bytes(5, 0));
  p.put(with_header(test_frame(60, 5)));
  ASSERT_TRUE(l.spin_until([&] { return peer.frames.size() == 1; }));
  EXPECT_EQ(tap.stats().rx_runts, 1u);
}

// The device has no receive buffer: the frame stays here, reading stops (the fd is not polled
// for input, so the loop does not spin on it), and both frames arrive, in order, after
// rx_space().
TEST(TapBackendTest, ARefusedFrameIsHeldAndReadingWaitsForRxSpace) {
  NetTestLoop l;
  SocketPair p;
  TapBackend tap(l.loop(), p.vmm, 12, "pair");
  RecordingPeer peer;
  peer.accept = false;
  tap.attach(&peer);
  const net::Bytes a = test_frame(60, 6), b = test_frame(70, 7);
  p.put(with_header(a));
  p.put(with_header(b));
  ASSERT_TRUE(l.spin_until([&] { return peer.offers == 1; }));
  const auto dispatches = l.loop().stats().fd_dispatches;
  l.spin(5);
  EXPECT_EQ(peer.offers, 1);
  EXPECT_EQ(l.loop().stats().fd_dispatches, dispatches);  // b is readable, nobody asks
  EXPECT_EQ(tap.stats().rx_pauses, 1u);

  peer.accept = true;
  tap.rx_space();
  ASSERT_EQ(peer.frames.size(), 1u);
  EXPECT_EQ(peer.frames[0], a);
  ASSERT_TRUE(l.spin_until([&] { return peer.frames.size() == 2; }));
  EXPECT_EQ(peer.frames[1], b);
}

// A full host queue: transmit says kWouldBlock (nothing sent, nothing dropped), and once the
// reader drained it the device hears tx_ready() from the loop.
TEST(TapBackendTest, AFullQueueSaysWouldBlockAndTxReadyFollowsWhenWritable) {
  NetTestLoop l;
  SocketPair p;
  const int small = 4096;
  ASSERT_EQ(::setsockopt(p.vmm, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  TapBackend tap(l.loop(), p.vmm, 12, "pair");
  RecordingPeer peer;
  tap.attach(&peer);
  const net::Bytes f = test_frame(1000, 8);
  int sent = 0;
  NetTxResult r = NetTxResult::kSent;
  for (int i = 0; i < 10000 && r == NetTxResult::kSent; ++i) {
    r = tap.transmit(f);
    if (r == NetTxResult::kSent) ++sent;
  }
  ASSERT_EQ(r, NetTxResult::kWouldBlock);
  EXPECT_GT(sent, 0);
  EXPECT_EQ(tap.stats().tx_eagain, 1u);
  EXPECT_EQ(tap.stats().tx_dropped_error, 0u);
  l.spin(3);
  EXPECT_EQ(peer.tx_ready_calls, 0);  // still full

  int drained = 0;
  while (!p.get().empty()) ++drained;
  EXPECT_EQ(drained, sent);  // every frame the back-end said it sent arrived
  ASSERT_TRUE(l.spin_until([&] { return peer.tx_ready_calls == 1; }));
  EXPECT_EQ(tap.transmit(f), NetTxResult::kSent);
  l.spin(3);
  EXPECT_EQ(peer.tx_ready_calls, 1);  // writable interest was dropped again
}

TEST(TapBackendTest, AHangUpStopsTheBackEndForGoodWithoutSpinning) {
  NetTestLoop l;
  SocketPair p;
  TapBackend tap(l.loop(), p.vmm, 12, "pair");
  RecordingPeer peer;
  tap.attach(&peer);
  const std::size_t watched = l.loop().poller().size();
  ::close(p.host);
  p.host = -1;
  ASSERT_TRUE(l.spin_until([&] { return tap.dead(); }));
  EXPECT_EQ(l.loop().poller().size(), watched - 1);  // unwatched: a hung-up fd would spin
  EXPECT_EQ(tap.transmit(test_frame(60, 9)), NetTxResult::kDropped);
  EXPECT_EQ(tap.stats().hangups, 1u);
  EXPECT_EQ(tap.stats().tx_dropped_error, 1u);
}

TEST(TapBackendTest, DetachingStopsWatchingTheDescriptor) {
  NetTestLoop l;
  SocketPair p;
  TapBackend tap(l.loop(), p.vmm, 12, "pair");
  RecordingPeer peer;
  const std::size_t before = l.loop().poller().size();
  tap.attach(&peer);
  EXPECT_EQ(l.loop().poller().size(), before + 1);
  tap.attach(nullptr);
  EXPECT_EQ(l.loop().poller().size(), before);
}

TEST(TapBackendTest, AdoptRefusesADescriptorThatIsNotATap) {
  NetTestLoop l;
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ::close(fds[1]);
  try {
    TapBackend::adopt(l.loop(), fds[0]);
    FAIL() << "a pipe was adopted";
  } catch (const NetBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a TAP descriptor"), std::string::npos) << e.what();
  }
  EXPECT_EQ(::fcntl(fds[0], F_GETFD), -1);  // closed, as promised
  EXPECT_THROW(TapBackend::adopt(l.loop(), 1000), NetBackendError);
}

TEST(TapBackendTest, OpenRefusesBadNamesBeforeTouchingAnything) {
  NetTestLoop l;
  for (const std::string& name : {std::string(), std::string("a/b"), std::string(16, 'x')}) {
    try {
      TapBackend::open(l.loop(), name);
      FAIL() << "opened '" << name << "'";
    } catch (const NetBackendError& e) {
      EXPECT_NE(std::string(e.what()).find("bad TAP interface name"), std::string::npos);
    }
  }
}

// --- Real TAP interfaces, in a network namespace of the test's own.

// Runs `body` on a thread moved into a fresh network namespace (unshare(CLONE_NEWNET) moves only
// the calling thread): the interfaces it creates vanish with the namespace and the host's are
// never touched. Returns why it could not, or "".
std::string in_private_netns(const std::function<void()>& body) {
  std::string why;
  std::thread t([&] {
    if (::access("/dev/net/tun", R_OK | W_OK) != 0) {
      why = std::string("/dev/net/tun: ") + std::strerror(errno);
      return;
    }
    if (::unshare(CLONE_NEWNET) != 0) {
      why = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno) +
            " (needs root or CAP_SYS_ADMIN)";
      return;
    }
    body();
  });
  t.join();
  return why;
}

// A macro so that GTEST_SKIP returns from the test itself; variadic for the lambda's commas.
#define RUN_IN_PRIVATE_NETNS(...)                                                            \
  do {                                                                                       \
    const std::string why = in_private_netns(__VA_ARGS__);                                   \
    if (!why.empty()) GTEST_SKIP() << "no private network namespace with TAP devices: " << why; \
  } while (0)

// What `ip tuntap add dev NAME mode tap|tun` does: a persistent interface with no owner.
void create_persistent(const char* name, short kind) {
  const int fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  ifr.ifr_flags = static_cast<short>(kind | IFF_NO_PI);
  ASSERT_EQ(::ioctl(fd, TUNSETIFF, &ifr), 0) << std::strerror(errno);
  ASSERT_EQ(::ioctl(fd, TUNSETPERSIST, 1ul), 0) << std::strerror(errno);
  ::close(fd);
}

// `ip addr add ADDR/24 dev NAME; ip link set NAME up`; returns the interface's MAC.
net::Mac configure(const char* name, std::uint32_t addr) {
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(s, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  auto* sin = reinterpret_cast<sockaddr_in*>(&ifr.ifr_addr);
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = htonl(addr);
  EXPECT_EQ(::ioctl(s, SIOCSIFADDR, &ifr), 0) << std::strerror(errno);
  sin->sin_addr.s_addr = htonl(0xffffff00);
  EXPECT_EQ(::ioctl(s, SIOCSIFNETMASK, &ifr), 0) << std::strerror(errno);
  EXPECT_EQ(::ioctl(s, SIOCGIFFLAGS, &ifr), 0);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  EXPECT_EQ(::ioctl(s, SIOCSIFFLAGS, &ifr), 0) << std::strerror(errno);
  EXPECT_EQ(::ioctl(s, SIOCGIFHWADDR, &ifr), 0);
  net::Mac mac{};
  std::memcpy(mac.data(), ifr.ifr_hwaddr.sa_data, 6);
  ::close(s);
  return mac;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const NetBackendError& e) {
    return e.what();
  }
  return "";
}

// The kernel on one side, the back-end standing in for the guest on the other: the kernel asks
// for the guest's MAC (ARP through the TAP), gets it, sends its datagram; the guest's echo comes
// back to the host socket.
TEST(TapBackendTest, CarriesFramesBothWaysThroughARealTap) {
  RUN_IN_PRIVATE_NETNS([] {
    constexpr std::uint32_t kTapHost = net::ipv4(10, 9, 9, 1), kTapGuest = net::ipv4(10, 9, 9, 2);
    create_persistent("mvtap0", IFF_TAP);
    const net::Mac host_mac = configure("mvtap0", kTapHost);
    NetTestLoop l;
    auto tap = TapBackend::open(l.loop(), "mvtap0");
    EXPECT_EQ(tap->vnet_header_bytes(), 12u);
    RecordingPeer peer;
    tap->attach(&peer);

    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(s, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(7);
    to.sin_addr.s_addr = htonl(kTapGuest);
    ASSERT_EQ(::sendto(s, "hello", 5, 0, reinterpret_cast<sockaddr*>(&to), sizeof to), 5);
    sockaddr_in from{};
    socklen_t len = sizeof from;
    ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&from), &len), 0);
    const std::uint16_t host_port = ntohs(from.sin_port);

    auto find_arp = [&] {
      for (const auto& f : peer.frames) {
        const auto a = net::parse_arp(f);
        if (a && a->op == net::kArpRequest && a->tpa == kTapGuest) return true;
      }
      return false;
    };
    ASSERT_TRUE(l.spin_until(find_arp)) << peer.frames.size() << " frames, no ARP request";

    const net::Bytes reply = net::ethernet(
        host_mac, net::kGuestMac, net::kEtherArp,
        net::arp(net::kArpReply, net::kGuestMac, kTapGuest, host_mac, kTapHost));
    EXPECT_EQ(tap->transmit(reply), NetTxResult::kSent);
    auto find_udp = [&] {
      for (const auto& f : peer.frames) {
        const auto u = net::parse_udp(f);
        if (u && u->dst == kTapGuest && u->dport == 7 && u->payload.size() == 5 &&
            std::memcmp(u->payload.data(), "hello", 5) == 0) {
          return true;
        }
      }
      return false;
    };
    ASSERT_TRUE(l.spin_until(find_udp));

    const net::Bytes echo = net::ethernet(
        host_mac, net::kGuestMac, net::kEtherIpv4,
        net::ip_packet(net::kProtoUdp, kTapGuest, kTapHost,
                       net::udp(7, host_port, net::text_bytes("hello", 5))));
    EXPECT_EQ(tap->transmit(echo), NetTxResult::kSent);
    char buf[16] = {};
    ssize_t got = -1;
    ASSERT_TRUE(l.spin_until([&] {
      got = ::recv(s, buf, sizeof buf, 0);
      return got >= 0;
    }));
    EXPECT_EQ(std::string(buf, static_cast<std::size_t>(got)), "hello");
    EXPECT_EQ(tap->stats().tx_frames, 2u);
    EXPECT_GE(tap->stats().rx_frames, 2u);
    ::close(s);
  });
}

TEST(TapBackendTest, OpenRefusesWhatIsNotAnExistingFreeTapAndCreatesNothing) {
  RUN_IN_PRIVATE_NETNS([] {
    NetTestLoop l;
    std::string e = error_of([&] { TapBackend::open(l.loop(), "nosuch0"); });
    EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
    EXPECT_EQ(::if_nametoindex("nosuch0"), 0u);  // root's TUNSETIFF would have created it

    e = error_of([&] { TapBackend::open(l.loop(), "lo"); });
    EXPECT_NE(e.find("is not a single-queue TAP"), std::string::npos) << e;

    create_persistent("mvtun0", IFF_TUN);
    e = error_of([&] { TapBackend::open(l.loop(), "mvtun0"); });
    EXPECT_NE(e.find("is not a single-queue TAP"), std::string::npos) << e;

    create_persistent("mvtap1", IFF_TAP);
    auto first = TapBackend::open(l.loop(), "mvtap1");
    e = error_of([&] { TapBackend::open(l.loop(), "mvtap1"); });
    EXPECT_NE(e.find("is in use by another process"), std::string::npos) << e;
  });
}

TEST(TapBackendTest, AdoptTakesAnAttachedTapDescriptor) {
  RUN_IN_PRIVATE_NETNS([] {
    NetTestLoop l;
    create_persistent("mvtap2", IFF_TAP);
    auto attach_fd = [](short flags) {
      const int fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
      ifreq ifr{};
      std::strncpy(ifr.ifr_name, "mvtap2", IFNAMSIZ - 1);
      ifr.ifr_flags = flags;
      EXPECT_EQ(::ioctl(fd, TUNSETIFF, &ifr), 0) << std::strerror(errno);
      return fd;
    };
    {
      auto tap = TapBackend::adopt(l.loop(), attach_fd(IFF_TAP | IFF_NO_PI | IFF_VNET_HDR));
      EXPECT_EQ(tap->name(), "mvtap2");
      EXPECT_EQ(tap->vnet_header_bytes(), 12u);
      EXPECT_NE(::fcntl(tap->fd(), F_GETFL) & O_NONBLOCK, 0);
    }
    {
      auto tap = TapBackend::adopt(l.loop(), attach_fd(IFF_TAP | IFF_NO_PI));
      EXPECT_EQ(tap->vnet_header_bytes(), 0u);
    }
    const int unattached = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    std::string e = error_of([&] { TapBackend::adopt(l.loop(), unattached); });
    EXPECT_NE(e.find("not attached"), std::string::npos) << e;

    create_persistent("mvtun1", IFF_TUN);
    const int tun = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "mvtun1", IFNAMSIZ - 1);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    ASSERT_EQ(::ioctl(tun, TUNSETIFF, &ifr), 0);
    e = error_of([&] { TapBackend::adopt(l.loop(), tun); });
    EXPECT_NE(e.find("is a TUN"), std::string::npos) << e;
  });
}

}  // namespace
