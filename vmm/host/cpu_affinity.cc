#include "vmm/host/cpu_affinity.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <system_error>

#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

std::vector<int> cpus_of(const cpu_set_t& set) {
  std::vector<int> out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(static_cast<std::size_t>(cpu), &set)) out.push_back(cpu);
  }
  return out;
}

std::optional<int> parse_cpu(std::string_view s) {
  int v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v >= CPU_SETSIZE) {
    return std::nullopt;
  }
  return v;
}

// "3" or "0-1".
std::optional<std::vector<int>> parse_list(std::string_view s) {
  const auto dash = s.find('-');
  const auto first = parse_cpu(s.substr(0, dash));
  if (!first) return std::nullopt;
  if (dash == std::string_view::npos) return std::vector<int>{*first};
  const auto last = parse_cpu(s.substr(dash + 1));
  if (!last || *last < *first) return std::nullopt;
  std::vector<int> out;
  for (int c = *first; c <= *last; ++c) out.push_back(c);
  return out;
}

}  // namespace

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return {};
  return cpus_of(set);
}

std::optional<CpuAffinity> parse_cpu_affinity(std::string_view text,
                                              const std::vector<int>& allowed,
                                              std::string& error) {
  CpuAffinity out;
  bool seen_loop = false;
  bool seen_vcpu = false;
  if (text.empty()) {
    error = "empty; expected loop=CPU,vcpu=CPU (a CPU number or a range a-b)";
    return std::nullopt;
  }
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) {
      error = "trailing ','";
      return std::nullopt;
    }
    const auto eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    if (eq == std::string_view::npos || (key != "loop" && key != "vcpu")) {
      error = "'" + std::string(item) + "': expected loop=CPU or vcpu=CPU";
      return std::nullopt;
    }
    bool& seen = key == "loop" ? seen_loop : seen_vcpu;
    if (seen) {
      error = "'" + std::string(key) + "' given twice";
      return std::nullopt;
    }
    seen = true;
    const std::string_view value = item.substr(eq + 1);
    auto cpus = parse_list(value);
    if (!cpus) {
      error = "'" + std::string(value) + "' is not a CPU number or a range a-b";
      return std::nullopt;
    }
    for (int c : *cpus) {
      if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
        error = "CPU " + std::to_string(c) + " is not one this process may use";
        return std::nullopt;
      }
    }
    (key == "loop" ? out.loop : out.vcpu) = std::move(*cpus);
  }
  return out;
}

void pin_thread(pthread_t thread, const std::vector<int>& cpus, std::string_view what) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(static_cast<std::size_t>(c), &set);
  if (const int err = pthread_setaffinity_np(thread, sizeof set, &set); err != 0) {
    throw VmmError(ExitCode::kHostFailure,
                   "cannot pin the " + std::string(what) + " thread: " + std::strerror(err));
  }
}

std::vector<int> thread_cpus(pthread_t thread) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(thread, sizeof set, &set) != 0) return {};
  return cpus_of(set);
}

}  // namespace minivmm::vmm
