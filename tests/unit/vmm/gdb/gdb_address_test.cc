// --gdb's address (vmm/gdb/gdb_stub.h): what the command line accepts, before any socket.
#include <gtest/gtest.h>

#include "vmm/gdb/gdb_stub.h"

namespace minivmm::vmm::gdb {
namespace {

TEST(GdbAddressTest, TcpDefaultsToLoopback) {
  const auto a = parse_gdb_address("tcp::1234");
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->unix_socket);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 1234);
  EXPECT_EQ(parse_gdb_address("tcp:localhost:0")->host, "127.0.0.1");
  EXPECT_EQ(parse_gdb_address("tcp:0.0.0.0:65535")->port, 65535);
}

TEST(GdbAddressTest, UnixPath) {
  const auto a = parse_gdb_address("unix:/tmp/g.sock");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->unix_socket);
  EXPECT_EQ(a->path, "/tmp/g.sock");
}

TEST(GdbAddressTest, RefusesWhatIsNotAnAddress) {
  for (const char* bad : {"", "1234", ":1234", "tcp:", "tcp:1234", "tcp::", "tcp::65536",
                          "tcp::-1", "tcp::12a", "tcp::999999", "tcp:example.com:1",
                          "tcp:1.2.3:4", "unix:", "udp::1", "tcp::1234 "}) {
    EXPECT_FALSE(parse_gdb_address(bad)) << bad;
  }
  EXPECT_FALSE(parse_gdb_address("unix:" + std::string(200, 'x')));  // longer than sun_path
}

}  // namespace
}  // namespace minivmm::vmm::gdb
