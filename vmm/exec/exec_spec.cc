#include "vmm/exec/exec_spec.h"

#include <cstring>
#include <string_view>

namespace minivmm::vmm::exec {
namespace {

bool wanted_variable(std::string_view name) {
  static constexpr std::string_view kNames[] = {"PATH", "HOME",     "USER", "LOGNAME",
                                                "TERM", "LANG",     "LANGUAGE", "TZ"};
  for (const auto n : kNames) {
    if (name == n) return true;
  }
  return name.substr(0, 3) == "LC_";
}

}  // namespace

std::vector<std::string> exec_environment(char** environ_in) {
  std::vector<std::string> out;
  bool have_path = false;
  for (char** e = environ_in; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos || !wanted_variable(kv.substr(0, eq))) continue;
    have_path = have_path || kv.substr(0, eq) == "PATH";
    out.emplace_back(kv);
  }
  if (!have_path) out.emplace_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  out.emplace_back("MINIVMM_EXEC=1");
  return out;
}

std::optional<std::vector<std::uint8_t>> encode_spec(const ExecSpec& spec, std::string& why) {
  std::vector<std::uint8_t> out;
  bool ok = true;
  const auto put = [&](const std::string& s) {
    ok = ok && s.find('\0') == std::string::npos;
    out.insert(out.end(), s.begin(), s.end());
    out.push_back(0);
  };
  if (spec.argv.empty()) {
    why = "no command";
    return std::nullopt;
  }
  for (const auto& a : spec.argv) put("arg"), put(a);
  for (const auto& e : spec.env) put("env"), put(e);
  put("cwd"), put(spec.cwd);
  put("root"), put(spec.root_tag);
  put("stdout"), put(spec.stdout_dev);
  put("stderr"), put(spec.stderr_dev);
  for (const auto& s : spec.shares) put("share"), put(s.tag), put(s.path), put(s.read_only ? "ro" : "rw");
  if (!ok) {
    why = "an argument, variable or path holds a NUL byte";
    return std::nullopt;
  }
  return out;
}

}  // namespace minivmm::vmm::exec
