// `--net` specs (vmm/machine/net_spec.h): every form, and one clear line for each mistake.
#include "vmm/machine/net_spec.h"

#include <gtest/gtest.h>

#include <string>

namespace minivmm::vmm {
namespace {

NetSpec parse_ok(const std::string& spec) {
  std::string why;
  const auto n = parse_net_spec(spec, why);
  EXPECT_TRUE(n.has_value()) << spec << ": " << why;
  return n.value_or(NetSpec{});
}

std::string parse_error(const std::string& spec) {
  std::string why;
  EXPECT_FALSE(parse_net_spec(spec, why).has_value()) << spec;
  EXPECT_EQ(why.find('\n'), std::string::npos);
  return why;
}

TEST(NetSpecTest, TheThreeBackEnds) {
  const NetSpec tap = parse_ok("tap=tap0");
  EXPECT_EQ(tap.kind, NetSpec::Kind::kTap);
  EXPECT_EQ(tap.ifname, "tap0");
  EXPECT_FALSE(tap.mac.has_value());
  const NetSpec fd = parse_ok("tap-fd=7,mac=52:54:00:ab:cd:ef");
  EXPECT_EQ(fd.kind, NetSpec::Kind::kTapFd);
  EXPECT_EQ(fd.fd, 7);
  ASSERT_TRUE(fd.mac.has_value());
  EXPECT_EQ((*fd.mac)[3], 0xab);
  const NetSpec user = parse_ok("user,hostfwd=udp::5555-:7,hostfwd=tcp:127.0.0.1:2222-:22");
  EXPECT_EQ(user.kind, NetSpec::Kind::kUser);
  ASSERT_EQ(user.forwards.size(), 2u);
  EXPECT_TRUE(user.forwards[0].udp);
  EXPECT_EQ(user.forwards[0].host_port, 5555);
  EXPECT_FALSE(user.forwards[1].udp);
}

TEST(NetSpecTest, MistakesAreOneLineEach) {
  EXPECT_NE(parse_error("").find("unknown network back-end"), std::string::npos);
  EXPECT_NE(parse_error("bridge=br0").find("unknown network back-end"), std::string::npos);
  EXPECT_NE(parse_error("tap=").find("1 to 15 characters"), std::string::npos);
  EXPECT_NE(parse_error("tap=a-name-longer-than-15").find("1 to 15"), std::string::npos);
  EXPECT_NE(parse_error("tap=../x").find("no '/'"), std::string::npos);
  EXPECT_NE(parse_error("tap-fd=").find("descriptor number"), std::string::npos);
  EXPECT_NE(parse_error("tap-fd=-1").find("descriptor number"), std::string::npos);
  EXPECT_NE(parse_error("tap-fd=3x").find("descriptor number"), std::string::npos);
  EXPECT_NE(parse_error("user,mac=52:54:00:12:34").find("not a MAC"), std::string::npos);
  EXPECT_NE(parse_error("user,mac=zz:54:00:12:34:56").find("not a MAC"), std::string::npos);
  EXPECT_NE(parse_error("user,mac=01:00:5e:00:00:01").find("multicast"), std::string::npos);
  EXPECT_NE(parse_error("user,hostfwd=udp::5555-:7x").find("7x"), std::string::npos);
  EXPECT_NE(parse_error("tap=tap0,hostfwd=udp::1-:7").find("unknown option"), std::string::npos);
  EXPECT_NE(parse_error("user,,").find("unknown option"), std::string::npos);
}

TEST(NetSpecTest, MacAddressesParseOnlyWhole) {
  EXPECT_TRUE(parse_mac("52:54:00:12:34:56").has_value());
  EXPECT_TRUE(parse_mac("52:54:00:AB:cd:EF").has_value());
  EXPECT_FALSE(parse_mac("52-54-00-12-34-56").has_value());
  EXPECT_FALSE(parse_mac("52:54:00:12:34:5").has_value());
  EXPECT_FALSE(parse_mac("52:54:00:12:34:567").has_value());
}

}  // namespace
}  // namespace minivmm::vmm
