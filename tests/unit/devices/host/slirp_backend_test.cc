// SlirpBackend against the real libslirp, in process, in a real EventLoop: ARP, DHCP and ping
// answered by the stack itself, a UDP host forward on loopback carried both ways through the
// loop's poller, the backlog while the guest has no buffers, and the set-up errors. Skipped, with
// the reason, where libslirp.so.0 cannot be loaded.
#include "devices/host/slirp_backend.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/map_report_writer.h"
#include "tests/unit/devices/host/net_test_frames.h"
#include "tests/unit/devices/host/net_test_loop.h"

namespace {

using minivmm::devices::HostForward;
using minivmm::devices::NetBackendError;
using minivmm::devices::NetTxResult;
using minivmm::devices::parse_host_forward;
using minivmm::devices::SlirpBackend;
using minivmm::devices::SlirpOptions;
using minivmm::testing::NetTestLoop;
using minivmm::testing::RecordingPeer;
namespace net = minivmm::testing::net;

constexpr std::uint32_t kGuest = SlirpBackend::kGuest, kGateway = SlirpBackend::kGateway;
constexpr net::Mac kGatewayMac{0x52, 0x55, 0x0a, 0x00, 0x02, 0x02};  // libslirp's, for .2

class SlirpBackendTest : public ::testing::Test {
 protected:
  // Creates the back-end, or skips the test when libslirp is not installed.
  std::unique_ptr<SlirpBackend> make(SlirpOptions options = {}) {
    try {
      auto b = SlirpBackend::create(l.loop(), l.rt(), std::move(options));
      b->attach(&peer);
      return b;
    } catch (const NetBackendError& e) {
      if (std::string(e.what()).find("libslirp.so.0") != std::string::npos) {
        skipped_ = e.what();
        return nullptr;
      }
      throw;
    }
  }
  // The guest says who it is (libslirp learns its MAC from the request) and asks for the
  // gateway's MAC.
  void arp_for_gateway(SlirpBackend& b) {
    EXPECT_EQ(b.transmit(net::ethernet(net::kBroadcastMac, net::kGuestMac, net::kEtherArp,
                                       net::arp(net::kArpRequest, net::kGuestMac, kGuest, {},
                                                kGateway))),
              NetTxResult::kSent);
    b.transmit_done();
  }
  // A free UDP or TCP port on 127.0.0.1, for a forward (the kernel's pick, then released).
  static std::uint16_t free_port(int type) {
    const int s = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(s);
    return ntohs(a.sin_port);
  }

  NetTestLoop l;
  RecordingPeer peer;
  std::string skipped_;
};

#define MAKE_OR_SKIP(var, ...)                                 \
  auto var = make(__VA_ARGS__);                                \
  if (!var) {                                                  \
    GTEST_SKIP() << "libslirp is not available: " << skipped_; \
  }                                                            \
  static_assert(true)

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST_F(SlirpBackendTest, AnswersArpForTheGatewayFromInsideTransmit) {
  const std::size_t threads = thread_count();
  MAKE_OR_SKIP(b);
  EXPECT_EQ(thread_count(), threads);  // libslirp and glib start no thread
  EXPECT_FALSE(b->version().empty());
  arp_for_gateway(*b);
  EXPECT_EQ(thread_count(), threads);
  ASSERT_EQ(peer.frames.size(), 1u);  // before transmit returned: no loop turn needed
  const auto a = net::parse_arp(peer.frames[0]);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->op, net::kArpReply);
  EXPECT_EQ(a->spa, kGateway);
  EXPECT_EQ(a->sha, kGatewayMac);
  EXPECT_EQ(a->tpa, kGuest);
  EXPECT_EQ(a->tha, net::kGuestMac);
  EXPECT_EQ(b->stats().tx_frames, 1u);
  EXPECT_EQ(b->stats().rx_frames, 1u);
}

TEST_F(SlirpBackendTest, OffersTheFirstLeaseForADhcpDiscover) {
  MAKE_OR_SKIP(b);
  b->transmit(net::dhcp_discover(net::kGuestMac, 0x12345678));
  b->transmit_done();
  auto offer = [&]() -> std::optional<net::UdpView> {
    for (const auto& f : peer.frames) {
      const auto u = net::parse_udp(f);
      if (u && u->sport == 67 && u->dport == 68) return u;
    }
    return std::nullopt;
  };
  ASSERT_TRUE(l.spin_until([&] { return offer().has_value(); }));
  const auto u = *offer();
  ASSERT_GE(u.payload.size(), 244u);
  EXPECT_EQ(u.payload[0], 2);                        // BOOTREPLY
  EXPECT_EQ(net::get32(u.payload, 4), 0x12345678u);  // our transaction
  EXPECT_EQ(net::get32(u.payload, 16), kGuest);      // yiaddr: 10.0.2.15
  EXPECT_EQ(net::get32(u.payload, 236), 0x63825363u);
  EXPECT_EQ(u.payload[240], 53);  // the first option: the message type...
  EXPECT_EQ(u.payload[242], 2);   // ...DHCPOFFER
}

TEST_F(SlirpBackendTest, AnswersAPingToTheGateway) {
  MAKE_OR_SKIP(b);
  arp_for_gateway(*b);
  const char data[] = "minivmm-ping";
  b->transmit(net::ethernet(kGatewayMac, net::kGuestMac, net::kEtherIpv4,
                            net::ip_packet(net::kProtoIcmp, kGuest, kGateway,
                                           net::icmp_echo(net::kIcmpEchoRequest, 0x4242, 7,
                                                          net::text_bytes(data, 12)))));
  b->transmit_done();
  auto reply = [&]() -> std::optional<net::Ipv4View> {
    for (const auto& f : peer.frames) {
      const auto ip = net::parse_ipv4(f);
      if (ip && ip->proto == net::kProtoIcmp && ip->payload[0] == net::kIcmpEchoReply) return ip;
    }
    return std::nullopt;
  };
  ASSERT_TRUE(l.spin_until([&] { return reply().has_value(); }));
  const auto ip = *reply();
  EXPECT_EQ(ip.src, kGateway);
  EXPECT_EQ(ip.dst, kGuest);
  EXPECT_EQ(net::get16(ip.payload, 4), 0x4242);
  EXPECT_EQ(net::get16(ip.payload, 6), 7);
  EXPECT_EQ(std::string(ip.payload.begin() + 8, ip.payload.end()), std::string(data, 12));
  EXPECT_EQ(net::checksum(ip.payload), 0);  // a valid checksum sums to zero
}

// hostfwd=udp:127.0.0.1:P-:7: a host datagram to P reaches the guest's port 7 through the
// loop's poller (libslirp's listening socket is watched there), and the guest's answer goes
// back to the sender through libslirp's socket.
TEST_F(SlirpBackendTest, CarriesAUdpHostForwardBothWaysThroughTheLoop) {
  const std::uint16_t port = free_port(SOCK_DGRAM);
  SlirpOptions o;
  o.forwards.push_back(parse_host_forward("udp:127.0.0.1:" + std::to_string(port) + "-:7"));
  const std::size_t before = l.loop().poller().size();
  MAKE_OR_SKIP(b, std::move(o));
  EXPECT_EQ(l.loop().poller().size(), before + 1);  // the forward's socket
  EXPECT_EQ(b->stats().sockets, 1u);
  EXPECT_FALSE(b->poll_timer_armed());  // idle: no wakeup at all
  arp_for_gateway(*b);
  peer.frames.clear();

  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::sendto(s, "ping-7", 6, 0, reinterpret_cast<sockaddr*>(&to), sizeof to), 6);

  std::optional<net::UdpView> in;
  ASSERT_TRUE(l.spin_until([&] {
    for (const auto& f : peer.frames) {
      const auto u = net::parse_udp(f);
      if (u && u->dst == kGuest && u->dport == 7) in = u;
    }
    return in.has_value();
  }));
  EXPECT_EQ(std::string(in->payload.begin(), in->payload.end()), "ping-7");
  EXPECT_EQ(in->src, kGateway);  // the host, as the guest sees it
  EXPECT_GE(b->stats().socket_events, 1u);

  // The guest echoes it (UDP port 7), to whoever sent it.
  b->transmit(net::ethernet(kGatewayMac, net::kGuestMac, net::kEtherIpv4,
                            net::ip_packet(net::kProtoUdp, kGuest, in->src,
                                           net::udp(7, in->sport, in->payload))));
  b->transmit_done();
  char buf[16] = {};
  ssize_t got = -1;
  ASSERT_TRUE(l.spin_until([&] {
    got = ::recv(s, buf, sizeof buf, 0);
    return got >= 0;
  }));
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(got)), "ping-7");
  // The forward's socket carried both ways and never expires: still nothing to wake up for.
  EXPECT_FALSE(b->poll_timer_armed());
  ::close(s);
}

// A datagram to a forward before libslirp knows the guest's MAC waits, fragment by fragment, for
// the guest's answer to libslirp's ARP request; libslirp then sends one queued packet per flow per
// poll, and stops watching the forward's socket while more than four wait. A 20000-byte datagram
// (14 fragments) once left 13 of them queued and the forward deaf for good: nothing polled again.
TEST_F(SlirpBackendTest, AManyFragmentDatagramQueuedForArpReachesTheGuestWhole) {
  const std::uint16_t port = free_port(SOCK_DGRAM);
  SlirpOptions o;
  o.forwards.push_back(parse_host_forward("udp:127.0.0.1:" + std::to_string(port) + "-:7"));
  MAKE_OR_SKIP(b, std::move(o));
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::vector<char> big(20000, 'f');
  ASSERT_EQ(::sendto(s, big.data(), big.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(big.size()));
  // libslirp asks who has the guest's address; the guest answers (and so says who it is).
  ASSERT_TRUE(l.spin_until([&] {
    for (const auto& f : peer.frames) {
      const auto a = net::parse_arp(f);
      if (a && a->op == net::kArpRequest && a->tpa == kGuest) return true;
    }
    return false;
  }));
  peer.frames.clear();
  b->transmit(net::ethernet(kGatewayMac, net::kGuestMac, net::kEtherArp,
                            net::arp(net::kArpReply, net::kGuestMac, kGuest, kGatewayMac,
                                     kGateway)));
  b->transmit_done();
  // Every fragment reaches the guest: 20000 bytes of data behind an 8-byte UDP header.
  auto carried = [&] {
    std::size_t bytes = 0;
    for (const auto& f : peer.frames) {
      if (const auto ip = net::parse_ipv4(f); ip && ip->proto == net::kProtoUdp) {
        bytes += ip->payload.size();
      }
    }
    return bytes;
  };
  EXPECT_TRUE(l.spin_until([&] { return carried() == big.size() + 8; })) << carried();
  // And the forward listens again: the next datagram comes through.
  peer.frames.clear();
  ASSERT_EQ(::sendto(s, "after", 5, 0, reinterpret_cast<sockaddr*>(&to), sizeof to), 5);
  EXPECT_TRUE(l.spin_until([&] {
    for (const auto& f : peer.frames) {
      const auto u = net::parse_udp(f);
      if (u && u->dport == 7 && u->payload.size() == 5) return true;
    }
    return false;
  }));
  EXPECT_EQ(b->stats().sockets, 1u);
  EXPECT_FALSE(b->poll_timer_armed());  // nothing left queued: idle again
  ::close(s);
}

// The same with a guest that never answers: five datagrams queue for ARP and the forward's socket
// is left out of the fill. The first expires after libslirp's second of waiting; polls every
// 250 ms while the socket is out drop it and let the socket back in, instead of leaving the
// forward deaf until the guest speaks. Real time: a second and a bit.
TEST_F(SlirpBackendTest, AForwardWhoseGuestNeverAnswersArpListensAgainAfterTheQueueExpires) {
  const std::uint16_t port = free_port(SOCK_DGRAM);
  SlirpOptions o;
  o.forwards.push_back(parse_host_forward("udp:127.0.0.1:" + std::to_string(port) + "-:7"));
  MAKE_OR_SKIP(b, std::move(o));
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(::sendto(s, "q", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to), 1);
  }
  ASSERT_TRUE(l.spin_until([&] { return b->stats().quiet_sockets == 1; }));
  EXPECT_EQ(b->stats().sockets, 0u);
  EXPECT_TRUE(b->poll_timer_armed());
  ASSERT_TRUE(l.spin_until([&] { return b->stats().sockets == 1; },
                           std::chrono::milliseconds(3000)));
  EXPECT_EQ(b->stats().quiet_sockets, 0u);
  ::close(s);
}

// The NAT the other way: a guest datagram to 10.0.2.2:Q leaves from a new socket of libslirp's
// to 127.0.0.1:Q, the answer comes back through it, and the flow's expiry (libslirp's timeout)
// is an rt_clock timer of the loop's.
TEST_F(SlirpBackendTest, AGuestUdpFlowToTheHostGoesOutThroughANewSocketThatExpires) {
  MAKE_OR_SKIP(b);
  arp_for_gateway(*b);
  peer.frames.clear();
  const int host = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(host, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(host, reinterpret_cast<sockaddr*>(&a), &len);
  const std::uint16_t port = ntohs(a.sin_port);

  b->transmit(net::ethernet(kGatewayMac, net::kGuestMac, net::kEtherIpv4,
                            net::ip_packet(net::kProtoUdp, kGuest, kGateway,
                                           net::udp(5000, port, net::text_bytes("out", 3)))));
  b->transmit_done();
  EXPECT_EQ(b->stats().sockets, 1u);
  EXPECT_TRUE(b->poll_timer_armed());

  char buf[16] = {};
  sockaddr_in from{};
  socklen_t from_len = sizeof from;
  ssize_t got = -1;
  ASSERT_TRUE(l.spin_until([&] {
    got = ::recvfrom(host, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    return got >= 0;
  }));
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(got)), "out");
  ASSERT_EQ(::sendto(host, "back", 4, 0, reinterpret_cast<sockaddr*>(&from), from_len), 4);
  std::optional<net::UdpView> in;
  ASSERT_TRUE(l.spin_until([&] {
    for (const auto& f : peer.frames) {
      const auto u = net::parse_udp(f);
      if (u && u->dport == 5000) in = u;
    }
    return in.has_value();
  }));
  EXPECT_EQ(in->src, kGateway);
  EXPECT_EQ(in->sport, port);
  EXPECT_EQ(std::string(in->payload.begin(), in->payload.end()), "back");
  ::close(host);
}

TEST_F(SlirpBackendTest, AForwardOnAPortInUseIsAnErrorThatSaysSo) {
  for (const int type : {SOCK_DGRAM, SOCK_STREAM}) {
    const int taken = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    if (type == SOCK_STREAM) {
      ASSERT_EQ(::listen(taken, 1), 0);
    }
    socklen_t len = sizeof a;
    ::getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len);
    const std::string value = std::string(type == SOCK_DGRAM ? "udp" : "tcp") + ":127.0.0.1:" +
                              std::to_string(ntohs(a.sin_port)) + "-:7";
    SlirpOptions o;
    o.forwards.push_back(parse_host_forward(value));
    try {
      auto b = make(std::move(o));
      if (!b) {
        GTEST_SKIP() << "libslirp is not available: " << skipped_;
      }
      ADD_FAILURE() << value << " was accepted";
    } catch (const NetBackendError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("hostfwd=" + value + ": cannot listen on 127.0.0.1:", 0), 0u) << what;
      EXPECT_NE(what.find("Address already in use"), std::string::npos) << what;
    }
    ::close(taken);
  }
  // Nothing was left behind: the next one starts.
  MAKE_OR_SKIP(b);
}

TEST_F(SlirpBackendTest, AForwardToAnAddressOutsideTheGuestNetworkIsRefused) {
  for (const char* guest : {"10.0.3.15", "10.0.2.2", "10.0.2.3", "10.0.2.255"}) {
    SlirpOptions o;
    o.forwards.push_back(
        parse_host_forward("udp:127.0.0.1:" + std::to_string(free_port(SOCK_DGRAM)) + "-" +
                           guest + ":7"));
    try {
      auto b = make(std::move(o));
      if (!b) {
        GTEST_SKIP() << "libslirp is not available: " << skipped_;
      }
      ADD_FAILURE() << guest << " was accepted";
    } catch (const NetBackendError& e) {
      EXPECT_NE(std::string(e.what()).find("must be a guest's in 10.0.2.0/24"), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(SlirpBackendTest, OnlyOneAtATime) {
  MAKE_OR_SKIP(first);
  EXPECT_THROW(SlirpBackend::create(l.loop(), l.rt()), NetBackendError);
  first.reset();
  MAKE_OR_SKIP(second);
}

// The guest has no receive buffer: libslirp's frames wait in the backlog, in order, and go to
// the guest when it posts some; past the backlog's size they are dropped and counted.
TEST_F(SlirpBackendTest, FramesWaitInABoundedBacklogWhileTheGuestHasNoBuffer) {
  SlirpOptions o;
  o.backlog_frames = 2;
  MAKE_OR_SKIP(b, std::move(o));
  peer.accept = false;
  for (int i = 0; i < 3; ++i) arp_for_gateway(*b);
  EXPECT_EQ(peer.offers, 1);  // refused once; the others queued behind it, not offered
  EXPECT_EQ(b->stats().rx_backlogged, 2u);
  EXPECT_EQ(b->stats().rx_backlog_drops, 1u);
  peer.accept = true;
  b->rx_space();
  EXPECT_EQ(peer.frames.size(), 2u);
  EXPECT_EQ(b->stats().rx_frames, 2u);
  arp_for_gateway(*b);  // the backlog is empty again: straight through
  EXPECT_EQ(peer.frames.size(), 3u);
}

TEST_F(SlirpBackendTest, WithNoDeviceAttachedFramesAreDroppedAndCounted) {
  MAKE_OR_SKIP(b);
  b->attach(nullptr);
  arp_for_gateway(*b);
  EXPECT_TRUE(peer.frames.empty());
  EXPECT_EQ(b->stats().rx_dropped_detached, 1u);
}

// IPv6 brings libslirp's router-advertisement timer; it lives on the loop's rt_clock list, and
// goes when the stack does.
TEST_F(SlirpBackendTest, LibslirpsOwnTimersAreRtClockTimers) {
  SlirpOptions o;
  o.ipv6 = true;
  {
    MAKE_OR_SKIP(b, std::move(o));
    EXPECT_EQ(b->stats().slirp_timers, 1u);
    EXPECT_TRUE(l.rt().next_deadline().has_value());
  }
  EXPECT_FALSE(l.rt().next_deadline().has_value());
}

TEST_F(SlirpBackendTest, ReportsItsCounters) {
  MAKE_OR_SKIP(b);
  arp_for_gateway(*b);
  minivmm::testing::MapReportWriter w;
  b->report(w);
  EXPECT_EQ(std::get<std::string>(w.values().at("network")), "10.0.2.0/24");
  EXPECT_EQ(w.counter("tx_frames"), 1u);
  EXPECT_EQ(w.counter("rx_frames"), 1u);
  for (const char* key : {"rx_backlog_drops", "polls", "socket_events", "stale_events",
                          "timer_polls", "output_polls", "sockets", "sockets_max", "quiet_sockets",
                          "guest_errors"}) {
    EXPECT_TRUE(w.has(key)) << key;
  }
}

}  // namespace
