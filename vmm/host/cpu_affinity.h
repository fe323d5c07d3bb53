// Where minivmm's threads may run: `--cpu-affinity loop=0,vcpu=1` pins the loop thread and the
// vCPU threads to host CPUs, so a user can keep them (and the kernel workers they wake, which
// run on the waker's CPU) apart or together. Not pinning is the default: the scheduler places
// them.
#pragma once

#include <pthread.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minivmm::vmm {

struct CpuAffinity {
  std::vector<int> loop;  // empty: not pinned
  std::vector<int> vcpu;  // every vCPU thread; empty: not pinned
};

// The CPUs this process may run on now (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();

// Parses "loop=LIST,vcpu=LIST" (either key may be left out, each at most once), where LIST is a
// CPU number or a range "a-b". Every CPU must be in `allowed`. On error returns nullopt and sets
// `error` to a one-line reason.
std::optional<CpuAffinity> parse_cpu_affinity(std::string_view text,
                                              const std::vector<int>& allowed,
                                              std::string& error);

// Pins `thread` to `cpus` (no-op when empty). Throws VmmError(kHostFailure) when the kernel
// refuses, naming `what`.
void pin_thread(pthread_t thread, const std::vector<int>& cpus, std::string_view what);

// The CPUs `thread` may run on, ascending (for tests and the report).
std::vector<int> thread_cpus(pthread_t thread);

}  // namespace minivmm::vmm
