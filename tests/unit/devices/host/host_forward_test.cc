// parse_host_forward: QEMU's hostfwd= spelling, and one clear line for each way of getting it
// wrong.
#include "devices/host/host_forward.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

#include "devices/host/net_backend.h"

namespace {

using minivmm::devices::HostForward;
using minivmm::devices::NetBackendError;
using minivmm::devices::parse_host_forward;

std::uint32_t host_order(in_addr a) { return ntohl(a.s_addr); }

TEST(HostForwardTest, ReadsQemusSpelling) {
  const HostForward f = parse_host_forward("udp::5555-:7");
  EXPECT_TRUE(f.udp);
  EXPECT_EQ(host_order(f.host_addr), INADDR_ANY);  // every interface, as QEMU
  EXPECT_EQ(f.host_port, 5555);
  EXPECT_EQ(host_order(f.guest_addr), 0u);  // the guest's DHCP address
  EXPECT_EQ(f.guest_port, 7);
  EXPECT_EQ(f.spec, "hostfwd=udp::5555-:7");
}

TEST(HostForwardTest, ReadsAddressesAndTheDefaultProtocol) {
  const HostForward f = parse_host_forward("tcp:127.0.0.1:2222-10.0.2.15:22");
  EXPECT_FALSE(f.udp);
  EXPECT_EQ(host_order(f.host_addr), 0x7f000001u);
  EXPECT_EQ(f.host_port, 2222);
  EXPECT_EQ(host_order(f.guest_addr), 0x0a00020fu);
  EXPECT_EQ(f.guest_port, 22);
  const HostForward g = parse_host_forward(":127.0.0.1:65535-:1");  // empty protocol: tcp
  EXPECT_FALSE(g.udp);
  EXPECT_EQ(g.host_port, 65535);
  EXPECT_EQ(g.guest_port, 1);
}

// Each malformed forward, and the words its one-line message must contain.
struct Bad {
  const char* value;
  const char* says;
};

TEST(HostForwardTest, RefusesEachMalformedForwardWithOneLineThatSaysWhy) {
  const Bad cases[] = {
      {"", "no protocol field"},
      {"udp", "no protocol field"},
      {"sctp::1-:2", "unknown protocol 'sctp'"},
      {"UDP::1-:2", "unknown protocol 'UDP'"},
      {"udp::5555", "no '-'"},
      {"udp:5555-:7", "no ':' before the host port"},
      {"udp::5555-7", "no ':' before the guest port"},
      {"udp::-:7", "bad host port ''"},
      {"udp::0-:7", "bad host port '0'"},
      {"udp::65536-:7", "bad host port '65536'"},
      {"udp::5555-:7x", "bad guest port '7x'"},
      {"udp::+5-:7", "bad host port '+5'"},
      {"udp::5555-:", "bad guest port ''"},
      {"udp::0005555-:7", "bad host port '0005555'"},
      {"udp:localhost:5555-:7", "bad host address 'localhost'"},
      {"udp:1.2.3:5555-:7", "bad host address '1.2.3'"},
      {"udp::5555-10.0.2.256:7", "bad guest address '10.0.2.256'"},
      {"udp::1:2-:3", "bad host address ':1'"},
      {"tcp::22-:22-:3", "bad guest address ':22-'"},
  };
  for (const Bad& c : cases) {
    try {
      parse_host_forward(c.value);
      ADD_FAILURE() << "accepted '" << c.value << "'";
    } catch (const NetBackendError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(std::string("hostfwd=") + c.value + ": ", 0), 0u) << what;
      EXPECT_NE(what.find(c.says), std::string::npos) << c.value << " -> " << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

}  // namespace
