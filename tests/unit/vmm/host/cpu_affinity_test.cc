// --cpu-affinity parsing and pinning, and the per-thread context-switch counts the report
// shows next to it. Real threads, no KVM.
#include "vmm/host/cpu_affinity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "vmm/vcpu/thread_usage.h"

namespace minivmm::vmm {
namespace {

const std::vector<int> kTwoCpus = {0, 1};

TEST(CpuAffinityTest, ParsesEachKeyAsACpuOrARange) {
  std::string why;
  auto a = parse_cpu_affinity("loop=0,vcpu=1", kTwoCpus, why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->loop, std::vector<int>{0});
  EXPECT_EQ(a->vcpu, std::vector<int>{1});
  a = parse_cpu_affinity("vcpu=0-1", kTwoCpus, why);
  ASSERT_TRUE(a) << why;
  EXPECT_TRUE(a->loop.empty());
  EXPECT_EQ(a->vcpu, (std::vector<int>{0, 1}));
}

TEST(CpuAffinityTest, RejectsMalformedDuplicateAndForeignCpus) {
  for (const char* bad : {"", "loop", "loop=", "loop=x", "loop=-1", "loop=1-0", "loop=0,",
                          "loop=0,loop=1", "vcpu=0,,loop=1", "disk=0", "loop=2", "vcpu=0-5",
                          "loop=99999999999", "loop=0 ", "loop=1,vcpu=0-"}) {
    std::string why;
    EXPECT_FALSE(parse_cpu_affinity(bad, kTwoCpus, why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
    EXPECT_EQ(why.find('\n'), std::string::npos) << bad;
  }
}

TEST(CpuAffinityTest, AllowedCpusAreThisProcesssAndPinningSticks) {
  const std::vector<int> allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  std::vector<int> seen;
  std::thread t([&] {
    pin_thread(pthread_self(), {allowed.back()}, "test");
    seen = thread_cpus(pthread_self());
  });
  t.join();
  EXPECT_EQ(seen, std::vector<int>{allowed.back()});
  // An empty list pins nothing.
  std::thread u([&] {
    pin_thread(pthread_self(), {}, "test");
    seen = thread_cpus(pthread_self());
  });
  u.join();
  EXPECT_EQ(seen, allowed);
}

// The kernel's state letter of one of this process's threads ('S': blocked in a syscall).
char thread_state(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", static_cast<int>(tid));
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return '?';
  char buf[512] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* paren = std::strrchr(buf, ')');  // the name may hold spaces and parentheses
  return (n > 0 && paren != nullptr && paren[1] == ' ') ? paren[2] : '?';
}

TEST(ThreadUsageTest, EachBlockingReadIsOneVoluntarySwitchSeenFromOutside) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::atomic<pid_t> tid{0};
  constexpr int kRounds = 10;
  std::thread t([&] {
    tid = ::gettid();
    char c;
    for (int i = 0; i <= kRounds; ++i) {  // the last read waits to be let go
      if (::read(fds[0], &c, 1) != 1) return;
    }
  });
  while (tid == 0) std::this_thread::yield();
  for (int i = 0; i < kRounds; ++i) {
    // Write only once the reader is blocked: then every read is a voluntary switch.
    while (thread_state(tid) != 'S') std::this_thread::yield();
    ASSERT_EQ(::write(fds[1], "x", 1), 1);
  }
  while (thread_state(tid) != 'S') std::this_thread::yield();
  const auto c = thread_context_switches(tid);
  ASSERT_EQ(::write(fds[1], "x", 1), 1);
  t.join();
  ASSERT_TRUE(c.has_value());
  EXPECT_GE(c->voluntary, static_cast<std::uint64_t>(kRounds));
  EXPECT_FALSE(thread_context_switches(tid).has_value());  // gone with the thread
  ::close(fds[0]);
  ::close(fds[1]);
  // The calling thread's own count agrees with what /proc shows of it.
  const ContextSwitches self = this_thread_context_switches();
  const auto self_proc = thread_context_switches(::gettid());
  ASSERT_TRUE(self_proc.has_value());
  EXPECT_GE(self_proc->voluntary, self.voluntary);
  EXPECT_GE(self_proc->involuntary, self.involuntary);
}

}  // namespace
}  // namespace minivmm::vmm
