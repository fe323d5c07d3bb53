// The seccomp sandbox without KVM: what each thread kind's list allows and refuses, and real
// filters loaded in forked children (a forbidden syscall ends the child with the report and
// exit code 14; an ioctl is allowed on its fd only; log mode allows).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "vmm/host/crash_signals.h"
#include "vmm/exit_code.h"
#include "vmm/sandbox/seccomp_allow_lists.h"
#include "vmm/sandbox/seccomp_mode.h"
#include "vmm/sandbox/seccomp_sandbox.h"
#include "vmm/sandbox/syscall_allow_list.h"

namespace minivmm::vmm {
namespace {

constexpr int kVmFd = 11;    // made-up fds: the lists only compare them
constexpr int kVcpuFd = 12;

SeccompFacts facts() {
  SeccompFacts f;
  f.vm_fd = kVmFd;
#ifdef MINIVMM_SANITIZER_RUNTIME
  f.sanitizer_runtime = true;  // the forked children below run the sanitizer's code too
#endif
  return f;
}

TEST(SeccompModeTest, ParsesTheThreeModesAndNothingElse) {
  EXPECT_EQ(parse_seccomp_mode("on"), SeccompMode::kOn);
  EXPECT_EQ(parse_seccomp_mode("off"), SeccompMode::kOff);
  EXPECT_EQ(parse_seccomp_mode("log"), SeccompMode::kLog);
  EXPECT_FALSE(parse_seccomp_mode("On"));
  EXPECT_FALSE(parse_seccomp_mode(""));
  EXPECT_FALSE(parse_seccomp_mode("trap"));
  for (const SeccompMode m : {SeccompMode::kOn, SeccompMode::kOff, SeccompMode::kLog}) {
    EXPECT_EQ(parse_seccomp_mode(seccomp_mode_name(m)), m);
  }
  for (const ThreadKind k : kThreadKinds) EXPECT_EQ(parse_thread_kind(thread_kind_name(k)), k);
  EXPECT_FALSE(parse_thread_kind("main"));
}

TEST(SyscallAllowListTest, IoctlAndFcntlOnlyPerRequest) {
  SyscallAllowList l;
  EXPECT_THROW(l.allow(SYS_ioctl), std::logic_error);
  EXPECT_THROW(l.allow(SYS_fcntl), std::logic_error);
  l.allow_ioctl(5, KVM_RUN);
  l.allow_ioctl(SyscallAllowList::kAnyFd, TCGETS);
  l.allow_fcntl(F_GETFL);
  EXPECT_TRUE(l.allows_ioctl(5, KVM_RUN));
  EXPECT_FALSE(l.allows_ioctl(6, KVM_RUN));
  EXPECT_TRUE(l.allows_ioctl(6, TCGETS));
  EXPECT_TRUE(l.allows_with(SYS_fcntl, 3, F_GETFL));
  EXPECT_FALSE(l.allows_with(SYS_fcntl, 3, F_SETFD));
  EXPECT_FALSE(l.allows(SYS_ioctl));
  EXPECT_EQ(l.rule_count(), 3u);
}

// ACPI S3 (docs/acpi-pm.md) on the loop thread, with no control socket: the pause reads each
// vCPU's kvmclock MSR, the wake sets the vCPUs' registers and MP state; only on vCPU fds.
TEST(SeccompAllowListsTest, TheLoopMayPutVcpusToSleepAndWakeThemWithoutASocket) {
  SeccompFacts f = facts();
  f.vcpu_fds = {kVcpuFd};
  const SyscallAllowList loop = loop_allow_list(f);
  for (const unsigned long req : {KVM_GET_SREGS, KVM_SET_SREGS, KVM_SET_REGS, KVM_SET_MP_STATE}) {
    EXPECT_TRUE(loop.allows_ioctl(kVcpuFd, req)) << req;
    EXPECT_FALSE(loop.allows_ioctl(kVmFd, req)) << req;
  }
  EXPECT_FALSE(loop.allows_ioctl(kVcpuFd, KVM_RUN));
}

// The loop gives up the drives' locks at the end of a run (Machine::release_drives), and may take
// or change none.
TEST(SeccompAllowListsTest, TheLoopMayOnlyUnlockAFile) {
  const SyscallAllowList loop = loop_allow_list(facts());
  EXPECT_TRUE(loop.allows_with(SYS_flock, 9, LOCK_UN));
  EXPECT_FALSE(loop.allows_with(SYS_flock, 9, LOCK_EX));
  EXPECT_FALSE(loop.allows_with(SYS_flock, 9, LOCK_SH | LOCK_NB));
  EXPECT_FALSE(loop.allows(SYS_flock));
}

// KVM_RUN belongs to the vCPU thread, on its own fd: not another vCPU's, not the VM's, and no
// other thread kind may run a vCPU at all.
TEST(SeccompAllowListsTest, OnlyTheVcpuThreadRunsItsOwnVcpu) {
  const SyscallAllowList vcpu = vcpu_allow_list(facts(), kVcpuFd);
  EXPECT_TRUE(vcpu.allows_ioctl(kVcpuFd, KVM_RUN));
  EXPECT_FALSE(vcpu.allows_ioctl(kVcpuFd + 1, KVM_RUN));
  EXPECT_FALSE(vcpu.allows_ioctl(kVmFd, KVM_RUN));
  EXPECT_TRUE(vcpu.allows_ioctl(kVmFd, KVM_IRQ_LINE_STATUS));
  // Set-up ioctls are over once a thread is filtered.
  EXPECT_FALSE(vcpu.allows_ioctl(kVcpuFd, KVM_SET_REGS));
  EXPECT_FALSE(vcpu.allows_ioctl(kVmFd, KVM_CREATE_VCPU));
  EXPECT_FALSE(vcpu.allows_ioctl(kVmFd, KVM_SET_USER_MEMORY_REGION));
  for (const auto& other : {loop_allow_list(facts()), signals_allow_list(facts()),
                            blk_worker_allow_list(facts())}) {
    for (const auto& r : other.arg_rules()) {
      EXPECT_FALSE(r.nr == SYS_ioctl && r.arg1 == static_cast<std::uint32_t>(KVM_RUN));
    }
  }
}

// What no thread does once running, in a normal build: start programs, make sockets or
// threads, open files (but the loop: the stats file and /proc), change its own filter.
TEST(SeccompAllowListsTest, NoThreadMayExecConnectOrSpawn) {
  SeccompFacts f = facts();
  f.sanitizer_runtime = false;
  f.control_socket = true;
  f.pit_tick_host_kernel = true;
  f.pit_tick_vcpu = true;
  const SyscallAllowList lists[] = {loop_allow_list(f), vcpu_allow_list(f, kVcpuFd),
                                    signals_allow_list(f), blk_worker_allow_list(f)};
  for (const SyscallAllowList& l : lists) {
    for (const long nr : {SYS_execve, SYS_execveat, SYS_fork, SYS_vfork, SYS_clone, SYS_clone3,
                          SYS_socket, SYS_connect, SYS_bind, SYS_ptrace, SYS_seccomp,
                          SYS_prctl, SYS_mount, SYS_setuid, SYS_getppid}) {
      EXPECT_FALSE(l.allows(nr)) << "syscall " << nr;
    }
    EXPECT_FALSE(l.allows(SeccompSandbox::selftest_syscall()));
  }
  EXPECT_TRUE(lists[0].allows(SYS_openat));
  EXPECT_FALSE(lists[1].allows(SYS_openat));
  EXPECT_FALSE(lists[2].allows(SYS_openat));
  EXPECT_FALSE(lists[3].allows(SYS_openat));
  // Only the signal thread stops the process for job control.
  EXPECT_TRUE(lists[2].allows(SYS_kill));
  EXPECT_FALSE(lists[0].allows(SYS_kill));
  EXPECT_FALSE(lists[1].allows(SYS_kill));
}

// A syscall made only with an option is allowed only with that option.
TEST(SeccompAllowListsTest, OptionalPathsOnlyWithTheirOption) {
  SeccompFacts f = facts();
  f.sanitizer_runtime = false;
  EXPECT_FALSE(vcpu_allow_list(f, kVcpuFd).allows(SYS_io_submit));
  EXPECT_FALSE(loop_allow_list(f).allows(SYS_io_getevents));
  EXPECT_FALSE(vcpu_allow_list(f, kVcpuFd).allows(SYS_timer_settime));
  EXPECT_FALSE(loop_allow_list(f).allows(SYS_accept4));
  EXPECT_FALSE(loop_allow_list(f).allows(SYS_ppoll));
  EXPECT_FALSE(loop_allow_list(f).allows(SYS_epoll_pwait2));
  f.pit_tick_host_kernel = true;
  f.pit_tick_vcpu = true;
  f.control_socket = true;
  f.poll_ppoll = true;
  f.poll_epoll = true;
  EXPECT_TRUE(vcpu_allow_list(f, kVcpuFd).allows(SYS_io_submit));
  EXPECT_TRUE(vcpu_allow_list(f, kVcpuFd).allows_ioctl(kVmFd, KVM_IRQFD));
  EXPECT_TRUE(loop_allow_list(f).allows(SYS_io_getevents));
  EXPECT_TRUE(vcpu_allow_list(f, kVcpuFd).allows(SYS_timer_settime));
  EXPECT_TRUE(loop_allow_list(f).allows(SYS_accept4));
  EXPECT_TRUE(loop_allow_list(f).allows_with(SYS_fcntl, 7, F_SETFL));
  EXPECT_TRUE(loop_allow_list(f).allows(SYS_ppoll));
  EXPECT_TRUE(loop_allow_list(f).allows(SYS_epoll_pwait2));
}

// Runs `body` in a forked child with stderr on a pipe; returns the wait status and stderr.
struct ChildResult {
  int status = 0;
  std::string err;
};

template <typename Body>
ChildResult in_child(Body body) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    body();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  ChildResult r;
  char buf[512];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) {
    r.err.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  EXPECT_EQ(::waitpid(pid, &r.status, 0), pid);
  return r;
}

bool exited_with(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }

// The start of the one line a violation prints.
std::string violation_report(const std::string& thread, long nr, const std::string& name) {
  return "minivmm: seccomp: the " + thread + " thread made forbidden syscall " +
         std::to_string(nr) + " (" + name + ")";
}

TEST(SeccompSandboxTest, ForbiddenSyscallEndsTheProcessWithOneLineNamingThreadAndSyscall) {
  const ChildResult r = in_child([] {
    SeccompSandbox sandbox(SeccompMode::kOn);
    sandbox.enter(ThreadKind::kSignals, signals_allow_list(facts()));
    ::syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);  // in no list, sanitizer builds' included
    ::_exit(0);
  });
  EXPECT_TRUE(exited_with(r.status, to_int(ExitCode::kSeccompViolation))) << r.status << r.err;
  EXPECT_EQ(r.err.rfind(violation_report("signals", SYS_socket, "socket") +
                            "; exiting with code 14",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

// A crash in a filtered thread is reported as that crash: crash_signals.h's handler and
// abort() may still hand the signal back and raise it, instead of trapping on the way.
TEST(SeccompSandboxTest, ACrashInAFilteredThreadIsStillThatCrash) {
  const ChildResult r = in_child([] {
    install_crash_signal_handlers();
    SeccompSandbox sandbox(SeccompMode::kOn);
    sandbox.enter(ThreadKind::kVcpu, vcpu_allow_list(facts(), kVcpuFd));
    ::abort();
  });
  EXPECT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT) << r.status << r.err;
  EXPECT_EQ(r.err.find("seccomp"), std::string::npos) << r.err;
}

TEST(SeccompSandboxTest, AllowedSyscallsStillWork) {
  const ChildResult r = in_child([] {
    SeccompSandbox sandbox(SeccompMode::kOn);
    sandbox.enter(ThreadKind::kBlkWorker, blk_worker_allow_list(facts()));
    if (::syscall(SYS_gettid) <= 0) ::_exit(3);
    if (::write(STDERR_FILENO, "fine\n", 5) != 5) ::_exit(4);
    ::_exit(0);
  });
  EXPECT_TRUE(exited_with(r.status, 0)) << r.status << r.err;
  EXPECT_EQ(r.err, "fine\n");
}

// The ioctl rule is for one fd: the same request on another fd traps.
TEST(SeccompSandboxTest, IoctlIsAllowedOnItsFdOnly) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const ChildResult r = in_child([&] {
    SeccompSandbox sandbox(SeccompMode::kOn);
    SyscallAllowList l = signals_allow_list(facts());
    l.allow_ioctl(fds[0], FIONREAD);
    sandbox.enter(ThreadKind::kVcpu, l);
    int n = 0;
    if (::ioctl(fds[0], FIONREAD, &n) != 0) ::_exit(3);
    if (::write(STDERR_FILENO, "allowed\n", 8) != 8) ::_exit(4);
    ::ioctl(fds[1], FIONREAD, &n);
    ::_exit(0);
  });
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_TRUE(exited_with(r.status, to_int(ExitCode::kSeccompViolation))) << r.status << r.err;
  EXPECT_EQ(r.err.rfind("allowed\n" + violation_report("vcpu", SYS_ioctl, "ioctl"), 0), 0u)
      << r.err;
}

TEST(SeccompSandboxTest, LogModeAllowsAndOffInstallsNothing) {
  const ChildResult logged = in_child([] {
    SeccompSandbox sandbox(SeccompMode::kLog);
    sandbox.enter(ThreadKind::kLoop, loop_allow_list(facts()));
    if (sandbox.stats().kinds[0].filters != 1) ::_exit(3);
    if (::syscall(SYS_getppid) <= 0) ::_exit(4);  // allowed, written to the audit log
    ::_exit(0);
  });
  EXPECT_TRUE(exited_with(logged.status, 0)) << logged.status << logged.err;
  const ChildResult off = in_child([] {
    SeccompSandbox sandbox(SeccompMode::kOff);
    sandbox.enter(ThreadKind::kLoop, loop_allow_list(facts()));
    if (sandbox.stats().kinds[0].filters != 0) ::_exit(3);
    if (::syscall(SYS_getppid) <= 0) ::_exit(4);
    ::_exit(0);
  });
  EXPECT_TRUE(exited_with(off.status, 0)) << off.status << off.err;
}

TEST(SeccompSandboxTest, CountsFiltersAndRulesPerKind) {
  const ChildResult r = in_child([] {
    SeccompSandbox sandbox(SeccompMode::kOn);
    const SyscallAllowList l = signals_allow_list(facts());
    sandbox.enter(ThreadKind::kSignals, l);
    const SeccompStats s = sandbox.stats();
    const auto& k = s.kinds[static_cast<std::size_t>(ThreadKind::kSignals)];
    // Its list plus what the report needs (write, exit_group, the terminal's two ioctls), some
    // of which the list already has.
    if (k.filters != 1 || k.rules < l.rule_count() || k.rules > l.rule_count() + 4) ::_exit(3);
    if (s.kinds[static_cast<std::size_t>(ThreadKind::kLoop)].filters != 0) ::_exit(4);
    if (s.mode != SeccompMode::kOn) ::_exit(5);
    ::_exit(0);
  });
  EXPECT_TRUE(exited_with(r.status, 0)) << r.status << r.err;
}

}  // namespace
}  // namespace minivmm::vmm
