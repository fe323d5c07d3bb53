// What `--seccomp` asks for, and the kinds of thread that each get an allow-list of their own
// (docs/reliability.md, "Seccomp sandbox").
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace minivmm::vmm {

// kOn: a syscall outside the thread's list ends the process with a one-line report (exit code
// kSeccompViolation). kLog: the kernel allows it and writes it to its audit log (dmesg), for
// finding what a new code path needs. kOff: no filter at all.
enum class SeccompMode { kOn, kOff, kLog };

inline std::optional<SeccompMode> parse_seccomp_mode(std::string_view s) noexcept {
  if (s == "on") return SeccompMode::kOn;
  if (s == "off") return SeccompMode::kOff;
  if (s == "log") return SeccompMode::kLog;
  return std::nullopt;
}

inline std::string_view seccomp_mode_name(SeccompMode m) noexcept {
  switch (m) {
    case SeccompMode::kOn: return "on";
    case SeccompMode::kOff: return "off";
    case SeccompMode::kLog: return "log";
  }
  return "?";
}

// Every thread a run has. kLoop is the main thread (set-up, the event loop, teardown); each
// vCPU thread is a kVcpu; kSignals is StopSignals' sigwaitinfo thread; kBlkWorker is each
// virtio-blk drive's I/O thread; kNinepWorker is each virtio-9p share's (--share) server thread.
enum class ThreadKind : std::size_t { kLoop, kVcpu, kSignals, kBlkWorker, kNinepWorker, kCount };

inline constexpr std::array<ThreadKind, static_cast<std::size_t>(ThreadKind::kCount)>
    kThreadKinds = {ThreadKind::kLoop, ThreadKind::kVcpu, ThreadKind::kSignals,
                    ThreadKind::kBlkWorker, ThreadKind::kNinepWorker};

inline std::string_view thread_kind_name(ThreadKind k) noexcept {
  switch (k) {
    case ThreadKind::kLoop: return "loop";
    case ThreadKind::kVcpu: return "vcpu";
    case ThreadKind::kSignals: return "signals";
    case ThreadKind::kBlkWorker: return "blk";
    case ThreadKind::kNinepWorker: return "9p";
    case ThreadKind::kCount: break;
  }
  return "?";
}

inline std::optional<ThreadKind> parse_thread_kind(std::string_view s) noexcept {
  for (const ThreadKind k : kThreadKinds) {
    if (s == thread_kind_name(k)) return k;
  }
  return std::nullopt;
}

}  // namespace minivmm::vmm
