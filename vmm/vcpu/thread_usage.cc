#include "vmm/vcpu/thread_usage.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstring>

namespace minivmm::vmm {

ContextSwitches this_thread_context_switches() noexcept {
  rusage ru{};
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return {};
  return {static_cast<std::uint64_t>(ru.ru_nvcsw), static_cast<std::uint64_t>(ru.ru_nivcsw)};
}

std::optional<ContextSwitches> thread_context_switches(pid_t tid) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/status", static_cast<int>(tid));
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return std::nullopt;
  ContextSwitches out;
  int found = 0;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long v = 0;
    if (std::sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1) {
      out.voluntary = v;
      ++found;
    } else if (std::sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1) {
      out.involuntary = v;
      ++found;
    }
  }
  std::fclose(f);
  if (found != 2) return std::nullopt;
  return out;
}

}  // namespace minivmm::vmm
