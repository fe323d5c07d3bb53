// `--net user` attacked (issue 31, item 8): host forwards that cannot all be had, and hostile
// traffic at forwarded ports of a guest with no network stack. All of it held at 940c2c5;
// these pin it (docs/reliability.md, "The attack on `minivmm test` and `--net`").
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

// A TCP port on 0.0.0.0 that this process listens on (so nobody else can), and its number.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 4) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
  }
  ~Listener() {
    if (fd >= 0) ::close(fd);
  }
};

// A port free a moment ago (bound, then closed).
int free_port() {
  Listener l;
  return l.port;
}

TEST(BootNetAttackTest, ForwardsThatCannotAllBeHadAreAUsageErrorInOneLine) {
  SKIP_WITHOUT_KVM();
  Listener taken;
  ASSERT_GT(taken.port, 0);
  const std::string p = std::to_string(free_port()), t = std::to_string(taken.port);
  struct Case {
    std::vector<std::string> net;
    const char* error;
  };
  const std::vector<Case> cases{
      {{"user,hostfwd=tcp::" + p + "-:22,hostfwd=tcp::" + p + "-:23"}, "Address already in use"},
      {{"user,hostfwd=tcp::" + t + "-:22"}, "Address already in use"},
      {{"user,hostfwd=tcp::" + p + "-:22", "user"}, "at most one user-mode network"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args{"run", "--kernel", guest_image(), "--cmdline",
                                  "timer=pit hz=250 ticks=5", "--no-console-input"};
    for (const auto& n : c.net) args.insert(args.end(), {"--net", n});
    const RunResult r = run_minivmm(args, false, 30);
    EXPECT_EQ(r.exit_code, kUsage) << c.net[0] << "\n" << r.err;
    EXPECT_TRUE(has(r.err, c.error)) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Connects, garbage, datagrams and resets at forwarded ports of a guest that answers none of
// them: libslirp refuses or drops them, and the VMM runs to its --duration.
TEST(BootNetAttackTest, HostileTrafficAtForwardedPortsLeavesTheVmmRunning) {
  SKIP_WITHOUT_KVM();
  const int tcp = free_port(), udp = free_port();
  Child child = start_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                               "timer=pit hz=250 ticks=0", "--net",
                               "user,hostfwd=tcp::" + std::to_string(tcp) +
                                   "-:22,hostfwd=udp::" + std::to_string(udp) + "-:53",
                               "--duration", "4", "--no-console-input"},
                              true, true);
  // The forwards listen before the guest runs: its banner says they are there.
  ASSERT_TRUE(wait_for_console(child, "minivmm-guest:", 30));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::mt19937 rng(31);
  std::vector<char> junk(65536);
  for (char& c : junk) c = static_cast<char>(rng());
  for (int i = 0; i < 100; ++i) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    to.sin_port = htons(static_cast<std::uint16_t>(tcp));
    if (::connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
      if (i % 2 == 0) {
        [[maybe_unused]] const ssize_t n =
            ::send(s, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      } else {
        const linger rst{1, 0};  // closed with a reset
        ::setsockopt(s, SOL_SOCKET, SO_LINGER, &rst, sizeof rst);
      }
    }
    ::close(s);
  }
  const int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  to.sin_port = htons(static_cast<std::uint16_t>(udp));
  for (int i = 0; i < 2000; ++i) {
    ::sendto(u, junk.data() + (i % 1000), 1400, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  }
  ::close(u);
  const RunResult r = finish_minivmm(child, 30);
  EXPECT_EQ(r.term_signal, 0) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  EXPECT_EQ((*r.stats)["exit"]["reason"], "--duration expired");
}

}  // namespace
}  // namespace minivmm::testing
