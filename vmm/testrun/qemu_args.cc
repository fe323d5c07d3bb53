#include "vmm/testrun/qemu_args.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace minivmm::testrun {
namespace {

constexpr unsigned kMaxCpus = 16;
// The largest guest minivmm builds: below the 32-bit MMIO hole.
constexpr unsigned long long kMaxMemoryMib = 3072;

std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> parts;
  if (s.empty()) return parts;  // bash's `read -a` of an empty line: no fields
  while (true) {
    const auto comma = s.find(',');
    parts.push_back(s.substr(0, comma));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return parts;
}

std::string_view first_field(std::string_view s) { return s.substr(0, s.find(',')); }

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

std::string warning(const std::string& what) { return "minivmm test: warning: " + what; }

}  // namespace

std::optional<unsigned long long> qemu_memory_mib(std::string_view value) {
  std::string_view v = first_field(value);
  if (v.substr(0, 5) == "size=") v.remove_prefix(5);
  std::size_t digits = 0;
  while (digits < v.size() && std::isdigit(static_cast<unsigned char>(v[digits]))) ++digits;
  if (digits == 0 || digits > 12) return std::nullopt;
  const unsigned long long n = std::stoull(std::string(v.substr(0, digits)));
  std::string_view unit = v.substr(digits);
  char u = 'm';
  if (!unit.empty() && std::string_view("kKmMgGtT").find(unit.front()) != std::string_view::npos) {
    u = static_cast<char>(std::tolower(static_cast<unsigned char>(unit.front())));
    unit.remove_prefix(1);
  }
  if (unit == "b" || unit == "B") unit.remove_prefix(1);
  if (!unit.empty()) return std::nullopt;
  switch (u) {
    case 'k': return (n + 1023) / 1024;
    case 'g': return n * 1024;
    case 't': return n * 1024 * 1024;
    default: return n;
  }
}

std::optional<std::string> cpuid_mask_name(std::string_view f) {
  if (f == "tsc-deadline") return "tsc_deadline_timer";
  if (f == "sse4.1" || f == "sse4-1") return "sse4_1";
  if (f == "sse4.2" || f == "sse4-2") return "sse4_2";
  // Features vmm/vcpu/cpuid_policy.cc can hide, spelt as QEMU spells them.
  static constexpr std::array<std::string_view, 35> kSame = {
      "sse3",  "pclmulqdq", "ssse3",  "fma",   "cx16",    "x2apic", "movbe", "popcnt", "aes",
      "xsave", "avx",       "f16c",   "rdrand", "pge",    "mtrr",   "pat",   "fsgsbase", "bmi1",
      "avx2",  "smep",      "bmi2",   "erms",  "invpcid", "avx512f", "rdseed", "smap",  "umip",
      "pku",   "la57",      "rdpid",  "nx",    "pdpe1gb", "rdtscp", "sse4_1", "sse4_2"};
  if (std::find(kSame.begin(), kSame.end(), f) != kSame.end()) return std::string(f);
  return std::nullopt;
}

std::vector<std::string> MinivmmGuest::run_args() const {
  // --testdev: QEMU's PC always has fw_cfg (every test reads its CPU count there) and x86/run
  // adds pc-testdev; minivmm builds them only when asked.
  std::vector<std::string> a{"--kernel", kernel, "--cpus", std::to_string(cpus), "--memory",
                             std::to_string(memory_mib) + "M", "--cpu", cpu,
                             "--no-console-input", "--quiet", "--log-level", "error", "--testdev"};
  if (!cmdline.empty()) a.insert(a.end(), {"--cmdline", cmdline});
  if (!initrd.empty()) a.insert(a.end(), {"--initrd", initrd});
  if (!lost_ticks.empty()) a.insert(a.end(), {"--lost-ticks", lost_ticks});
  if (!cpuid_mask.empty()) {
    std::string joined;
    for (const auto& m : cpuid_mask) joined += (joined.empty() ? "" : ",") + m;
    a.insert(a.end(), {"--cpuid-mask", joined});
  }
  return a;
}

std::optional<QemuMapping> map_qemu_args(const std::vector<std::string>& args,
                                         std::string& error) {
  QemuMapping m;
  MinivmmGuest& g = m.guest;
  bool have_kernel = false;
  auto die = [&](std::string why) -> std::optional<QemuMapping> {
    error = std::move(why);
    return std::nullopt;
  };

  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string opt = args[i];
    if (opt.size() > 2 && opt[0] == '-' && opt[1] == '-') opt.erase(0, 1);  // QEMU: --x is -x
    const bool has_arg = i + 1 < args.size();
    const std::string arg = has_arg ? args[i + 1] : std::string();
    auto take = [&]() -> bool {
      if (!has_arg) return false;
      ++i;
      return true;
    };
    const std::string needs = "option " + opt + " needs an argument";

    if (opt == "-kernel" || opt == "-append" || opt == "-initrd") {
      if (!take()) return die(needs);
      if (opt == "-kernel") {
        g.kernel = arg;
        have_kernel = true;
      } else if (opt == "-append") {
        g.cmdline = arg;
      } else {
        g.initrd = arg;
      }
    } else if (opt == "-smp") {
      if (!take()) return die(needs);
      std::string_view n = first_field(arg);
      if (n.substr(0, 5) == "cpus=") n.remove_prefix(5);
      if (!all_digits(n) || n.size() > 6) return die("Invalid SMP CPUs '" + std::string(n) + "'");
      const unsigned long cpus = std::stoul(std::string(n));
      if (cpus < 1 || cpus > kMaxCpus) {
        // QEMU's wording, which the suite's --probe-maxsmp reads.
        return die("Invalid SMP CPUs " + std::to_string(cpus) +
                   ". The max CPUs supported by machine 'minivmm' is " + std::to_string(kMaxCpus));
      }
      g.cpus = static_cast<unsigned>(cpus);
    } else if (opt == "-m") {
      if (!take()) return die(needs);
      auto mib = qemu_memory_mib(arg);
      if (!mib) return die("invalid -m value '" + arg + "'");
      if (*mib > kMaxMemoryMib) {
        m.warnings.push_back(warning("-m " + std::to_string(*mib) + "M is more than minivmm's " +
                                     std::to_string(kMaxMemoryMib) + "M; using " +
                                     std::to_string(kMaxMemoryMib) + "M"));
        *mib = kMaxMemoryMib;
      }
      g.memory_mib = static_cast<unsigned>(*mib);
    } else if (opt == "-cpu") {
      if (!take()) return die(needs);
      const auto parts = split_commas(arg);
      const std::string_view model = parts.empty() ? std::string_view() : parts.front();
      g.cpu = model == "host" || model == "max" ? "host" : "baseline";
      for (std::size_t p = 1; p < parts.size(); ++p) {
        const std::string f(parts[p]);
        if (!f.empty() && f.front() == '-') {
          if (auto name = cpuid_mask_name(std::string_view(f).substr(1))) {
            g.cpuid_mask.push_back(*name);
          } else {
            m.warnings.push_back(warning("-cpu: cannot hide '" + f.substr(1) + "'; ignored"));
          }
        } else if ((!f.empty() && f.front() == '+') ||
                   (f.size() >= 3 && f.substr(f.size() - 3) == "=on")) {
          m.warnings.push_back(warning("-cpu: minivmm adds no features beyond --cpu " + g.cpu +
                                       "; '" + f + "' ignored"));
        } else {
          m.warnings.push_back(warning("-cpu: property '" + f + "' ignored"));
        }
      }
    } else if (opt == "-machine" || opt == "-M") {
      if (!take()) return die(needs);
      for (std::string_view p : split_commas(arg)) {
        if (p == "accel=kvm" || p == "pc" || p == "q35" || p == "type=pc") continue;
        if (p.substr(0, 6) == "accel=") {
          return die("minivmm runs guests under KVM only (-machine " + std::string(p) + ")");
        }
        m.warnings.push_back(warning("-machine: '" + std::string(p) + "' ignored"));
      }
    } else if (opt == "-accel") {
      if (!take()) return die(needs);
      if (first_field(arg) != "kvm") return die("minivmm runs guests under KVM only (-accel " + arg + ")");
    } else if (opt == "-enable-kvm" || opt == "-no-reboot" || opt == "-nodefaults" ||
               opt == "-nographic" || opt == "-no-user-config") {
      // What minivmm does anyway.
    } else if (opt == "-display" || opt == "-vga" || opt == "-serial" || opt == "-monitor" ||
               opt == "-chardev" || opt == "-overcommit" || opt == "-name" || opt == "-rtc") {
      if (!take()) return die(needs);
      const std::string both = opt + " " + arg;
      if (both != "-serial stdio" && both != "-display none" && both != "-vga none" &&
          both != "-monitor none") {
        m.warnings.push_back(warning(both + " ignored"));
      }
    } else if (opt == "-global") {
      if (!take()) return die(needs);
      if (arg == "kvm-pit.lost_tick_policy=discard") {
        g.lost_ticks = "discard";
      } else if (arg == "kvm-pit.lost_tick_policy=delay") {
        g.lost_ticks = "delay";
      } else {
        m.warnings.push_back(warning("-global " + arg + " ignored"));
      }
    } else if (opt == "-device") {
      if (!take()) return die(needs);
      const std::string_view dev = first_field(arg);
      // pc-testdev comes with --testdev; minivmm's isa-debug-exit is always at 0xf4.
      if (dev != "pc-testdev" && dev != "isa-debug-exit") {
        m.warnings.push_back(warning("-device " + arg + ": not provided by minivmm; ignored"));
      }
    } else {
      return die("unsupported option '" + opt + "'");
    }
  }
  if (!have_kernel) return die("no -kernel given");
  return m;
}

}  // namespace minivmm::testrun
