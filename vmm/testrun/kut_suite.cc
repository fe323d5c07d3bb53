#include "vmm/testrun/kut_suite.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>

#include "vmm/testrun/qemu_args.h"

namespace minivmm::testrun {
namespace {

std::vector<std::string> split_blanks(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

Verdict skip(std::string why) { return {Outcome::kSkip, std::move(why)}; }

// The digits a version field starts with ("44-fc" -> "44"), as the suite's ${x%%[!0-9]*}.
std::string leading_digits(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
  return std::string(s.substr(0, n));
}

struct KernelVersion {
  std::string version, patchlevel, sublevel, extraversion;
};

// "6.18.44-fc-v1098" -> 6, 18, 44 and the digits after the first '-' (none here).
KernelVersion split_release(std::string_view release) {
  KernelVersion v;
  const auto dot1 = release.find('.');
  v.version = std::string(release.substr(0, dot1));
  if (dot1 == std::string_view::npos) return v;
  std::string_view rest = release.substr(dot1 + 1);
  const auto dot2 = rest.find('.');
  v.patchlevel = std::string(rest.substr(0, dot2));
  if (dot2 == std::string_view::npos) return v;
  rest = rest.substr(dot2 + 1);
  const auto dash = rest.find('-');
  v.sublevel = leading_digits(rest.substr(0, dash));
  if (dash != std::string_view::npos) v.extraversion = leading_digits(rest.substr(dash + 1));
  return v;
}

bool numeric(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

long num(const std::string& s) { return numeric(s) ? std::stol(s) : 0; }

// Whether the running kernel is at least `minver` (env_generate_errata's comparison: an
// absent sublevel or extraversion on either side counts as satisfied unless the other side
// asks for a non-zero one). nullopt: `minver` is not a version.
std::optional<bool> kernel_at_least(const KernelVersion& k, std::string_view minver) {
  const KernelVersion m = split_release(minver);
  // split_release cut the digits; the suite requires the first two fields to be numbers.
  const auto dot1 = minver.find('.');
  const std::string v(minver.substr(0, dot1));
  std::string p;
  if (dot1 != std::string_view::npos) {
    const std::string_view rest = minver.substr(dot1 + 1);
    p = std::string(rest.substr(0, rest.find('.')));
  }
  if (!numeric(v) || !numeric(p)) return std::nullopt;
  const long kv = num(k.version), kp = num(k.patchlevel);
  if (kv > num(v) || (kv == num(v) && kp > num(p))) return true;
  if (kv != num(v) || kp != num(p)) return false;
  const bool ks = numeric(k.sublevel), ms = numeric(m.sublevel);
  if (ks && ms) {
    if (num(k.sublevel) > num(m.sublevel)) return true;
    if (num(k.sublevel) < num(m.sublevel)) return false;
    const bool kx = numeric(k.extraversion), mx = numeric(m.extraversion);
    if (kx && mx) return num(k.extraversion) >= num(m.extraversion);
    return !(mx && num(m.extraversion) != 0);
  }
  return !(ms && num(m.sublevel) != 0);
}

}  // namespace

std::string kut_kernel_path(const KutEntry& e, const KutHost& host) {
  return e.file.empty() ? std::string() : host.test_dir + "/" + e.file;
}

Selection select_kut_entry(const KutEntry& e, const KutSelection& sel, const KutHost& host) {
  if (e.name.empty()) return {};
  if (!sel.names.empty() && std::find(sel.names.begin(), sel.names.end(), e.name) == sel.names.end()) {
    return {};
  }
  if (!sel.group.empty() && !find_word(sel.group, e.groups)) return {};
  auto skip_for = [](std::string why) { return Selection{Selected::kSkip, std::move(why)}; };
  // Protected-virtualization hosts are s390x's; no x86 host has the tool.
  if (find_word("pv-host", e.groups)) return skip_for("no gen-se-header available for pv-host test");
  // Any -g turns the nodefault rule off, as in the suite.
  if (sel.group.empty() && find_word("nodefault", e.groups) && !sel.all) {
    return skip_for("test marked as manual run only");
  }
  if (!e.arch.empty() && e.arch != host.arch) return skip_for(e.arch + " only");
  // machine and accel are compared with the suite's MACHINE and ACCEL, which minivmm test does
  // not take: the accelerator is KVM's, checked when the test is prepared.
  if (!e.disabled_if.empty() && host.disabled && host.disabled(e.disabled_if)) {
    return skip_for("disabled because: " + e.disabled_if);
  }
  for (const std::string& item : split_blanks(e.check)) {
    // path=value, split at the first '='; an item without one is compared with itself.
    const auto eq = item.find('=');
    const std::string path = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? item : item.substr(eq + 1);
    const auto contents = host.read_file ? host.read_file(path) : std::nullopt;
    if (!contents || *contents != value) return skip_for(path + " not equal to " + value);
  }
  const std::string kernel = kut_kernel_path(e, host);
  if (kernel.empty() || !host.is_file || !host.is_file(kernel)) {
    return skip_for("Test file '" + kernel + "' not found");
  }
  return {Selected::kRun, ""};
}

std::variant<KutLaunch, Verdict> prepare_kut_run(const KutEntry& e, const KutHost& host,
                                                 const ShellContext& shell,
                                                 const std::string& suite_dir,
                                                 const std::string& env_path,
                                                 const std::string& env_error) {
  // x86/run's accelerator: the cfg's (its first comma field; the rest are properties), or
  // KVM where /dev/kvm is a character device, else TCG.
  const auto comma = e.accel.find(',');
  std::string accel = e.accel.substr(0, comma);
  const std::string props = comma == std::string::npos ? "" : e.accel.substr(comma);
  if (accel == "kvm" && !host.kvm_available) return skip("KVM is needed, but not available on this host");
  if (accel == "hvf") return skip("HVF is needed, but not available on this host");
  if (accel.empty()) accel = host.kvm_available ? "kvm" : "tcg";
  if (!env_error.empty()) return skip(env_error);

  std::string error;
  const auto words = shell_words(kut_command_text(e), shell, error);
  if (!words) return skip("cannot split the cfg's values into words: " + error);

  // x86/run's own options first, then the entry's words, then the environment, as it builds
  // its QEMU command line.
  std::vector<std::string> qemu{"--no-reboot", "-nodefaults", "-global",
                                "kvm-pit.lost_tick_policy=discard", "-device", "pc-testdev",
                                "-device", "isa-debug-exit,iobase=0xf4,iosize=0x4", "-display",
                                "none", "-serial", "stdio", "-machine", "accel=" + accel + props,
                                "-kernel", suite_dir + "/" + kut_kernel_path(e, host)};
  qemu.insert(qemu.end(), words->begin(), words->end());
  if (!env_path.empty()) qemu.insert(qemu.end(), {"-initrd", env_path});
  const auto mapped = map_qemu_args(qemu, error);
  if (!mapped) return skip(error);
  KutLaunch launch{mapped->guest.run_args(), ""};
  for (const auto& w : mapped->warnings) launch.warnings += w + "\n";
  return launch;
}

std::string kut_timeout_text(const KutEntry& e, const std::optional<std::string>& override_text) {
  if (override_text && !override_text->empty()) return *override_text;
  return e.timeout.empty() ? "90s" : e.timeout;
}

std::optional<double> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double unit = 1;
  switch (text.back()) {
    case 's': text.remove_suffix(1); break;
    case 'm': unit = 60; text.remove_suffix(1); break;
    case 'h': unit = 3600; text.remove_suffix(1); break;
    case 'd': unit = 86400; text.remove_suffix(1); break;
    default: break;
  }
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text.front())) || text.front() == '.')) {
    return std::nullopt;  // no sign: a negative duration is not one
  }
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  return v * unit;
}

std::optional<std::string> kut_environment(const KutEnvInputs& in, std::string& error) {
  const KernelVersion k = split_release(in.kernel_release);
  // The order and names of scripts/arch-run.bash's env_params. minivmm answers as the QEMU
  // version its kvm-unit-tests support is written against.
  std::vector<std::pair<std::string, std::string>> vars{
      {"TARGET", ""},
      {"QEMU_ACCEL", "kvm"},
      {"QEMU_VERSION_STRING", "QEMU emulator version 7.2.0 (minivmm test)"},
      {"QEMU_MAJOR", "7"},
      {"QEMU_MINOR", "2"},
      {"QEMU_MICRO", "0"},
      {"KERNEL_VERSION_STRING", in.kernel_release},
      {"KERNEL_VERSION", k.version},
      {"KERNEL_PATCHLEVEL", k.patchlevel},
      {"KERNEL_SUBLEVEL", k.sublevel},
      {"KERNEL_EXTRAVERSION", k.extraversion}};
  auto has = [&](std::string_view name) {
    return std::any_of(vars.begin(), vars.end(), [&](const auto& v) { return v.first == name; });
  };
  // The user's own module (KVM_UNIT_TESTS_ENV): its NAME=value lines not already set.
  std::string_view user = in.user_env;
  while (!user.empty()) {
    const auto nl = user.find('\n');
    std::string_view line = user.substr(0, nl);
    user = nl == std::string_view::npos ? std::string_view() : user.substr(nl + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    const auto eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    const std::string name(line.substr(0, eq));
    if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) continue;
    if (!std::all_of(name.begin(), name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        })) {
      continue;
    }
    if (!has(name)) vars.emplace_back(name, std::string(line.substr(eq + 1)));
  }

  // Errata: the runner's own ERRATA_* first (they win), -a's ERRATA_FORCE, then one per
  // errata.txt line, y when this kernel has the fix.
  std::map<std::string, std::string> errata;
  for (const auto& kv : in.environ_errata) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) errata.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (in.errata_force) errata["ERRATA_FORCE"] = "y";
  // No ERRATATXT in config.mak: no errata to generate; one that names a missing file: the
  // suite's error, for every test.
  if (!in.errata_path.empty() && !in.errata_txt) {
    error = in.errata_path + " not found. (ERRATATXT=" + in.errata_path + ")";
    return std::nullopt;
  }
  std::string_view txt = in.errata_txt ? std::string_view(*in.errata_txt) : std::string_view();
  while (!txt.empty()) {
    const auto nl = txt.find('\n');
    std::string line(txt.substr(0, nl));
    txt = nl == std::string_view::npos ? std::string_view() : txt.substr(nl + 1);
    if (!line.empty() && line.front() == '#') continue;
    std::erase_if(line, [](char c) { return c == ' ' || c == '\t'; });
    const auto c1 = line.find(':');
    if (c1 == std::string::npos || c1 == 0) continue;
    const std::string commit = line.substr(0, c1);
    const std::string rest = line.substr(c1 + 1);
    const std::string minver = rest.substr(0, rest.find(':'));
    const std::string name = "ERRATA_" + commit;
    if (errata.count(name)) continue;
    const auto have = kernel_at_least(k, minver);
    if (!have) {
      error = "Bad minimum kernel version in " + in.errata_path + ", " + minver;
      return std::nullopt;
    }
    errata[name] = *have ? "y" : "n";
  }

  std::string out;
  for (const auto& [name, value] : vars) out += name + "=" + value + "\n";
  // std::map: sorted by name, as the suite sorts them.
  for (const auto& [name, value] : errata) {
    if (!has(name)) out += name + "=" + value + "\n";
  }
  if (errata.empty()) out += "\n";
  return out;
}

}  // namespace minivmm::testrun
