#include "vmm/report/process_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace minivmm::vmm {

namespace {

// "VmRSS:\t    1234 kB" -> 1234 * 1024; nullopt for anything else.
std::optional<std::uint64_t> field_kib(std::string_view status, std::string_view key) noexcept {
  std::size_t pos = 0;
  while (pos < status.size()) {
    const std::size_t end = std::min(status.find('\n', pos), status.size());
    std::string_view line = status.substr(pos, end - pos);
    pos = end + 1;
    if (line.substr(0, key.size()) != key || line.size() <= key.size() || line[key.size()] != ':') {
      continue;
    }
    line.remove_prefix(key.size() + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    std::uint64_t kib = 0;
    const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc() || std::string_view(p, line.data() + line.size()) != " kB") {
      return std::nullopt;
    }
    if (kib > (UINT64_MAX >> 10)) return std::nullopt;
    return kib << 10;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ProcessMemory> parse_proc_status_memory(std::string_view status) noexcept {
  const auto rss = field_kib(status, "VmRSS");
  const auto hwm = field_kib(status, "VmHWM");
  const auto anon = field_kib(status, "RssAnon");
  if (!rss || !hwm || !anon) return std::nullopt;
  return ProcessMemory{*rss, *hwm, *anon, std::nullopt};
}

std::optional<std::uint64_t> parse_smaps_rollup_pss(std::string_view rollup) noexcept {
  return field_kib(rollup, "Pss");
}

std::optional<ProcessMemory> read_process_memory() noexcept {
  try {
    const auto slurp = [](const char* path) -> std::optional<std::string> {
      std::ifstream in(path);
      if (!in) return std::nullopt;
      std::ostringstream text;
      text << in.rdbuf();
      return text.str();
    };
    const auto status = slurp("/proc/self/status");
    if (!status) return std::nullopt;
    auto m = parse_proc_status_memory(*status);
    if (m) {
      if (const auto rollup = slurp("/proc/self/smaps_rollup")) {
        m->pss_bytes = parse_smaps_rollup_pss(*rollup);
      }
    }
    return m;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace minivmm::vmm
