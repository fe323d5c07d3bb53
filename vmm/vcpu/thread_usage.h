// Context switches of one thread, voluntary (it blocked) and involuntary (it was preempted)
// apart: the per-thread figures that tell which thread something preempts each guest tick.
// The process-wide getrusage(RUSAGE_SELF) sums every thread and cannot.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace minivmm::vmm {

struct ContextSwitches {
  std::uint64_t voluntary = 0;
  std::uint64_t involuntary = 0;
};

// The calling thread's (getrusage RUSAGE_THREAD).
ContextSwitches this_thread_context_switches() noexcept;

// Another thread of this process, by kernel thread id (/proc/self/task/TID/status); nullopt
// once it has exited or when /proc cannot be read.
std::optional<ContextSwitches> thread_context_switches(pid_t tid) noexcept;

}  // namespace minivmm::vmm
