// The seccomp-BPF sandbox (issue #12, docs/reliability.md "Seccomp sandbox"): each thread, once
// it has finished its set-up, installs a filter that allows exactly the syscalls its steady
// state makes (seccomp_allow_lists.h) and nothing else.
//
// Install order. A seccomp filter belongs to the thread that loads it and is inherited by the
// threads it creates later; filters stack, and a syscall must pass every one. So no thread may
// be created after a filter is in place, or it would carry its creator's list on top of its
// own: every thread of a run is started before the main thread enters its loop (virtio-blk
// workers and the signal thread in Machine's constructor, the vCPUs at the top of run()), each
// loads its own filter as it enters steady state (before its first KVM_RUN for a vCPU), and
// the main thread loads the loop's list last, after it has started them all. Every thread then
// runs under exactly one filter: its own.
//
// A forbidden syscall (mode on) is SCMP_ACT_TRAP: the kernel sends SIGSYS to the thread that
// made it, and the handler installed here writes one line naming the thread kind and the
// syscall ("minivmm: seccomp: the vcpu thread made forbidden syscall 110 (getppid)"), gives
// the terminal back and _exits with kSeccompViolation. Not SCMP_ACT_KILL_PROCESS: that dies
// without a word, with the terminal left raw in --interactive. The handler only calls write,
// ioctl(TCSETS) and exit_group, which every list allows, so it cannot trap in turn. SIGSYS that
// is not a seccomp trap goes to the handler that was there before (crash_signals.h).
//
// Threads: construct on the main thread before any other thread exists (it installs the
// SIGSYS handler and resolves syscall names, which the handler cannot do: it may not
// allocate). enter()/try_enter() from each thread, for itself; the rest from any thread.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "vmm/sandbox/seccomp_mode.h"
#include "vmm/sandbox/syscall_allow_list.h"

namespace minivmm::vmm {

struct SeccompKindStats {
  std::uint64_t filters = 0;  // threads of this kind that loaded their filter
  std::uint64_t rules = 0;    // rules in that filter (the largest, should two differ)
};

struct SeccompStats {
  SeccompMode mode = SeccompMode::kOff;
  std::array<SeccompKindStats, static_cast<std::size_t>(ThreadKind::kCount)> kinds{};
};

class SeccompSandbox {
 public:
  // `selftest`: the thread kind that calls a forbidden syscall (getppid) right after loading
  // its filter: the hidden --seccomp-selftest option, which the tests use to prove that each
  // kind of thread is filtered. Throws std::system_error if SIGSYS cannot be handled.
  explicit SeccompSandbox(SeccompMode mode, std::optional<ThreadKind> selftest = std::nullopt);
  SeccompSandbox(const SeccompSandbox&) = delete;
  SeccompSandbox& operator=(const SeccompSandbox&) = delete;

  // The calling thread's filter: `list`, plus what the trap report needs. Does nothing with
  // mode off. Throws std::system_error when libseccomp or the kernel refuses.
  void enter(ThreadKind kind, const SyscallAllowList& list);
  // enter() for threads that cannot throw: a failure is logged and kept for failure(), and the
  // caller gets false (its thread must not go on unfiltered). Either way the thread counts as
  // entered for wait_entered().
  bool try_enter(ThreadKind kind, const SyscallAllowList& list) noexcept;
  // Blocks until `count` threads of `kind` have been through try_enter(): the main thread
  // knows every other thread is filtered (or has failed) before the guest runs.
  void wait_entered(ThreadKind kind, std::uint64_t count);
  // The first try_enter() failure, if any.
  std::optional<std::string> failure() const;

  SeccompMode mode() const noexcept { return mode_; }
  SeccompStats stats() const noexcept;

  // The syscall a selftest makes: in no list, and made by no sanitizer runtime.
  static long selftest_syscall() noexcept;

 private:
  struct KindCounters {
    std::atomic<std::uint64_t> filters{0};
    std::atomic<std::uint64_t> rules{0};
  };

  const SeccompMode mode_;
  const std::optional<ThreadKind> selftest_;
  std::array<KindCounters, static_cast<std::size_t>(ThreadKind::kCount)> counters_{};

  mutable std::mutex mu_;
  std::condition_variable entered_cv_;
  std::array<std::uint64_t, static_cast<std::size_t>(ThreadKind::kCount)> entered_{};  // mu_
  std::optional<std::string> failure_;  // guarded by mu_
};

}  // namespace minivmm::vmm
