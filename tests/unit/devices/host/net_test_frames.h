// Ethernet frames a guest would send, built and read byte by byte, for the back-end tests: ARP,
// IPv4 with UDP or ICMP echo, a DHCP discover. Multi-byte fields are big-endian (network order);
// addresses are given in host order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace minivmm::testing::net {

using Bytes = std::vector<std::uint8_t>;
using Mac = std::array<std::uint8_t, 6>;

inline constexpr Mac kGuestMac{0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
inline constexpr Mac kBroadcastMac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
inline constexpr std::uint16_t kEtherArp = 0x0806, kEtherIpv4 = 0x0800;
inline constexpr std::uint8_t kProtoIcmp = 1, kProtoUdp = 17;

constexpr std::uint32_t ipv4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  return std::uint32_t{a} << 24 | std::uint32_t{b} << 16 | std::uint32_t{c} << 8 | d;
}

inline void put16(Bytes& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v >> 8);
  b[at + 1] = static_cast<std::uint8_t>(v);
}
inline void put32(Bytes& b, std::size_t at, std::uint32_t v) {
  put16(b, at, static_cast<std::uint16_t>(v >> 16));
  put16(b, at + 2, static_cast<std::uint16_t>(v));
}
inline std::uint16_t get16(std::span<const std::uint8_t> b, std::size_t at) {
  return static_cast<std::uint16_t>(b[at] << 8 | b[at + 1]);
}
inline std::uint32_t get32(std::span<const std::uint8_t> b, std::size_t at) {
  return std::uint32_t{get16(b, at)} << 16 | get16(b, at + 2);
}
inline void put_mac(Bytes& b, std::size_t at, const Mac& m) {
  for (std::size_t i = 0; i < 6; ++i) b[at + i] = m[i];
}
inline Mac get_mac(std::span<const std::uint8_t> b, std::size_t at) {
  Mac m{};
  for (std::size_t i = 0; i < 6; ++i) m[i] = b[at + i];
  return m;
}

// The Internet checksum (RFC 1071) of `b`.
inline std::uint16_t checksum(std::span<const std::uint8_t> b) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i + 1 < b.size(); i += 2) sum += static_cast<std::uint32_t>(b[i] << 8 | b[i + 1]);
  if (b.size() % 2 != 0) sum += static_cast<std::uint32_t>(b.back() << 8);
  while (sum >> 16 != 0) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

inline Bytes ethernet(const Mac& dst, const Mac& src, std::uint16_t type,
                      std::span<const std::uint8_t> payload) {
  Bytes f(14);
  put_mac(f, 0, dst);
  put_mac(f, 6, src);
  put16(f, 12, type);
  f.insert(f.end(), payload.begin(), payload.end());
  return f;
}

inline constexpr std::uint16_t kArpRequest = 1, kArpReply = 2;

inline Bytes arp(std::uint16_t op, const Mac& sha, std::uint32_t spa, const Mac& tha,
                 std::uint32_t tpa) {
  Bytes a(28);
  put16(a, 0, 1);       // Ethernet
  put16(a, 2, 0x0800);  // IPv4
  a[4] = 6;
  a[5] = 4;
  put16(a, 6, op);
  put_mac(a, 8, sha);
  put32(a, 14, spa);
  put_mac(a, 18, tha);
  put32(a, 24, tpa);
  return a;
}

inline Bytes ip_packet(std::uint8_t proto, std::uint32_t src, std::uint32_t dst,
                       std::span<const std::uint8_t> payload, std::uint16_t id = 1) {
  Bytes p(20);
  p[0] = 0x45;
  put16(p, 2, static_cast<std::uint16_t>(20 + payload.size()));
  put16(p, 4, id);
  p[8] = 64;
  p[9] = proto;
  put32(p, 12, src);
  put32(p, 16, dst);
  put16(p, 10, checksum(p));
  p.insert(p.end(), payload.begin(), payload.end());
  return p;
}

// UDP with checksum 0 ("none", allowed over IPv4).
inline Bytes udp(std::uint16_t sport, std::uint16_t dport, std::span<const std::uint8_t> payload) {
  Bytes u(8);
  put16(u, 0, sport);
  put16(u, 2, dport);
  put16(u, 4, static_cast<std::uint16_t>(8 + payload.size()));
  u.insert(u.end(), payload.begin(), payload.end());
  return u;
}

inline constexpr std::uint8_t kIcmpEchoReply = 0, kIcmpEchoRequest = 8;

inline Bytes icmp_echo(std::uint8_t type, std::uint16_t id, std::uint16_t seq,
                       std::span<const std::uint8_t> data) {
  Bytes m(8);
  m[0] = type;
  put16(m, 4, id);
  put16(m, 6, seq);
  m.insert(m.end(), data.begin(), data.end());
  put16(m, 2, checksum(m));
  return m;
}

// A BOOTP/DHCP DISCOVER from `mac` (RFC 2131): 0.0.0.0:68 -> 255.255.255.255:67.
inline Bytes dhcp_discover(const Mac& mac, std::uint32_t xid) {
  Bytes d(240);
  d[0] = 1;  // BOOTREQUEST
  d[1] = 1;  // Ethernet
  d[2] = 6;
  put32(d, 4, xid);
  put_mac(d, 28, mac);
  put32(d, 236, 0x63825363);  // the magic cookie
  const std::uint8_t options[] = {53, 1, 1, 255};  // DHCPDISCOVER, end
  d.insert(d.end(), std::begin(options), std::end(options));
  const Bytes u = udp(68, 67, d);
  const Bytes ip = ip_packet(kProtoUdp, 0, 0xffffffff, u);
  return ethernet(kBroadcastMac, mac, kEtherIpv4, ip);
}

struct EthernetView {
  Mac dst{}, src{};
  std::uint16_t type = 0;
  std::span<const std::uint8_t> payload;
};
inline std::optional<EthernetView> parse_ethernet(std::span<const std::uint8_t> f) {
  if (f.size() < 14) return std::nullopt;
  return EthernetView{get_mac(f, 0), get_mac(f, 6), get16(f, 12), f.subspan(14)};
}

struct Ipv4View {
  std::uint8_t proto = 0;
  std::uint32_t src = 0, dst = 0;
  std::span<const std::uint8_t> payload;
};
inline std::optional<Ipv4View> parse_ipv4(std::span<const std::uint8_t> frame) {
  const auto e = parse_ethernet(frame);
  if (!e || e->type != kEtherIpv4 || e->payload.size() < 20) return std::nullopt;
  const auto p = e->payload;
  const std::size_t ihl = (p[0] & 0xfu) * 4u;
  const std::size_t total = get16(p, 2);
  if (ihl < 20 || total < ihl || total > p.size()) return std::nullopt;
  return Ipv4View{p[9], get32(p, 12), get32(p, 16), p.subspan(ihl, total - ihl)};
}

struct UdpView {
  std::uint32_t src = 0, dst = 0;
  std::uint16_t sport = 0, dport = 0;
  std::span<const std::uint8_t> payload;
};
inline std::optional<UdpView> parse_udp(std::span<const std::uint8_t> frame) {
  const auto ip = parse_ipv4(frame);
  if (!ip || ip->proto != kProtoUdp || ip->payload.size() < 8) return std::nullopt;
  const auto u = ip->payload;
  const std::size_t len = get16(u, 4);
  if (len < 8 || len > u.size()) return std::nullopt;
  return UdpView{ip->src, ip->dst, get16(u, 0), get16(u, 2), u.subspan(8, len - 8)};
}

struct ArpView {
  std::uint16_t op = 0;
  Mac sha{}, tha{};
  std::uint32_t spa = 0, tpa = 0;
};
inline std::optional<ArpView> parse_arp(std::span<const std::uint8_t> frame) {
  const auto e = parse_ethernet(frame);
  if (!e || e->type != kEtherArp || e->payload.size() < 28) return std::nullopt;
  const auto a = e->payload;
  return ArpView{get16(a, 6), get_mac(a, 8), get_mac(a, 18), get32(a, 14), get32(a, 24)};
}

inline std::span<const std::uint8_t> text_bytes(const char* s, std::size_t n) {
  return {reinterpret_cast<const std::uint8_t*>(s), n};
}

}  // namespace minivmm::testing::net
