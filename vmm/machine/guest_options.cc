#include "vmm/machine/guest_options.h"

#include <algorithm>
#include <type_traits>

#include "vmm/machine/size_parser.h"
#include "vmm/vcpu/cpuid_policy.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

using devices::StateReader;
using devices::StateWriter;
using Kind = GuestOption::Kind;

constexpr std::size_t kMaxMaskName = 4096;
constexpr std::size_t kMaxMasks = 64;

// --- A field of Config by member pointer: compared and copied the same way for every row.

template <auto Field>
bool same_field(const Config& u, const Config& s) {
  return u.*Field == s.*Field;
}

template <auto Field>
void take_field(Config& u, const Config& s) {
  u.*Field = s.*Field;
}

// --- An enum (or a two-valued bool) spelled by the row's choices, in its order.

template <auto Field>
using FieldType = std::remove_cvref_t<decltype(std::declval<Config&>().*Field)>;

template <auto Field>
std::optional<std::string> parse_choice(const GuestOption& row, const GuestText& t, Config& c) {
  for (std::size_t i = 0; i < row.choices.size(); ++i) {
    if (row.choices[i] == t.value) {
      c.*Field = static_cast<FieldType<Field>>(i);
      return std::nullopt;
    }
  }
  // The CLI refuses these first (its check names the choices); a caller without it gets this.
  return std::string(row.name) + ": unknown value '" + one_line(t.value) + "'";
}

template <auto Field>
void save_choice(const GuestOption&, StateWriter& out, const Config& c) {
  out.u8(static_cast<std::uint8_t>(c.*Field));
}

// The byte, refused unless it is one of the row's choices.
template <auto Field>
void load_choice(const GuestOption& row, StateReader& in, Config& c) {
  const std::uint8_t v = in.u8();
  if (v >= row.choices.size()) {
    in.fail("an unknown " + std::string(row.name) + " (" + std::to_string(v) + ")");
  }
  c.*Field = static_cast<FieldType<Field>>(v);
}

template <auto Field>
std::string choice_has(const GuestOption& row, const Config& s) {
  return std::string(row.name) + " " +
         std::string(row.choices[static_cast<std::size_t>(s.*Field)]);
}

template <auto Field>
GuestOption choice_row(const char* name, std::string help, const char* default_text,
                       std::vector<std::string_view> choices) {
  return {name,           std::move(help),     Kind::kValue,      default_text,
          std::move(choices), parse_choice<Field>, save_choice<Field>, load_choice<Field>,
          same_field<Field>,  choice_has<Field>,   take_field<Field>};
}

// --- The rows with parsers of their own.

std::optional<std::string> parse_memory(const GuestOption&, const GuestText& t, Config& c) {
  const auto mem = parse_size(t.value);
  if (!mem) return "--memory: '" + one_line(t.value) + "' is not a size (try 64M or 1G)";
  c.memory_bytes = *mem;
  return std::nullopt;
}

// By hand rather than CLI::Range: one line, naming the limit, for every bad spelling.
std::optional<std::string> parse_cpus(const GuestOption&, const GuestText& t, Config& c) {
  std::uint64_t n = 0;
  bool ok = !t.value.empty() && t.value.size() <= 6;
  for (const char ch : t.value) {
    ok = ok && ch >= '0' && ch <= '9';
    if (ok) n = n * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  if (!ok || n < 1 || n > kMaxVcpus) {
    return "--cpus: '" + one_line(t.value) + "' is not a vCPU count from 1 to " +
           std::to_string(kMaxVcpus);
  }
  c.cpus = static_cast<std::uint32_t>(n);
  return std::nullopt;
}

bool known_feature(const std::string& name) {
  const auto& known = known_cpuid_features();
  return std::any_of(known.begin(), known.end(),
                     [&](const CpuidFeature& f) { return f.name == name; });
}

// Checked here, not when KVM's CPUID is filtered: user input is judged before /dev/kvm.
std::optional<std::string> parse_cpuid_mask(const GuestOption&, const GuestText& t, Config& c) {
  for (const std::string& name : t.list) {
    if (!known_feature(name)) return "--cpuid-mask: unknown CPUID feature '" + one_line(name) + "'";
  }
  c.cpuid_mask = t.list;
  return std::nullopt;
}

void save_cpuid_mask(const GuestOption&, StateWriter& out, const Config& c) {
  out.u32(static_cast<std::uint32_t>(c.cpuid_mask.size()));
  for (const std::string& m : c.cpuid_mask) out.text(m);
}

void load_cpuid_mask(const GuestOption&, StateReader& in, Config& c) {
  const std::uint32_t masks = in.u32();
  if (masks > kMaxMasks) in.fail(std::to_string(masks) + " CPUID masks");
  for (std::uint32_t i = 0; i < masks; ++i) {
    std::string name = in.text(kMaxMaskName);
    // The names this minivmm writes are the ones --cpuid-mask takes: anything else is not a
    // snapshot of it (and the name is quoted on one line, whatever bytes it holds).
    if (!known_feature(name)) in.fail("an unknown CPUID feature '" + one_line(name) + "'");
    c.cpuid_mask.push_back(std::move(name));
  }
}

std::vector<GuestOption> make_rows() {
  std::vector<GuestOption> rows;
  rows.push_back(
      {"--memory", "guest RAM, e.g. 64M, 1G (max 3G)", Kind::kValue, "64M", {}, parse_memory,
       [](const GuestOption&, StateWriter& out, const Config& c) { out.u64(c.memory_bytes); },
       [](const GuestOption&, StateReader& in, Config& c) { c.memory_bytes = in.u64(); },
       same_field<&Config::memory_bytes>,
       [](const GuestOption&, const Config& s) { return std::to_string(s.memory_bytes >> 20) + " MiB"; },
       take_field<&Config::memory_bytes>});
  rows.push_back(
      {"--cpus",
       "vCPUs, 1.." + std::to_string(kMaxVcpus) +
           ": vCPU 0 boots the kernel, the others wait for the guest's INIT/SIPI",
       Kind::kValue, "1", {}, parse_cpus,
       [](const GuestOption&, StateWriter& out, const Config& c) { out.u32(c.cpus); },
       [](const GuestOption&, StateReader& in, Config& c) {
         c.cpus = in.u32();
         if (c.cpus < 1 || c.cpus > kMaxVcpus) in.fail(std::to_string(c.cpus) + " vCPUs");
       },
       same_field<&Config::cpus>,
       [](const GuestOption&, const Config& s) { return std::to_string(s.cpus) + " vCPUs"; },
       take_field<&Config::cpus>});
  rows.push_back(choice_row<&Config::pit>(
      "--pit", "i8254 PIT: user (minivmm's) or kvm (in-kernel baseline)", "user", {"user", "kvm"}));
  rows.push_back(choice_row<&Config::pit_tick>(
      "--pit-tick",
      "who delivers the user PIT's periodic ticks: loop (an alarm wakes the loop, which raises "
      "IRQ0), vcpu (a timer signal interrupts KVM_RUN) or kernel (edges armed ahead on host "
      "timers that signal an irqfd; the least host CPU, so the default)",
      "kernel", {"loop", "vcpu", "kernel"}));
  rows.push_back(choice_row<&Config::lost_ticks>(
      "--lost-ticks", "PIT lost-tick policy: delay or discard", "delay", {"delay", "discard"}));
  rows.push_back(choice_row<&Config::cpu>("--cpu", "CPUID model: baseline or host", "baseline",
                                          {"host", "baseline"}));
  rows.push_back({"--cpuid-mask", "CPUID features to hide, e.g. cx16,xsave", Kind::kList, "", {},
                  parse_cpuid_mask, save_cpuid_mask, load_cpuid_mask,
                  same_field<&Config::cpuid_mask>,
                  [](const GuestOption&, const Config&) { return std::string("another CPUID mask"); },
                  take_field<&Config::cpuid_mask>});
  rows.push_back(choice_row<&Config::virtio_console>(
      "--console", "guest console: serial (COM1) or virtio (virtio-console)", "serial",
      {"serial", "virtio"}));
  rows.push_back(
      {"--testdev",
       "add kvm-unit-tests' devices, QEMU's fw_cfg (port 0x510) and pc-testdev (ports 0xe0-0xeb, "
       "0x2000-0x2017 driving GSIs 0-23, MMIO 0xff000000)",
       Kind::kFlag, "", {},
       [](const GuestOption&, const GuestText& t, Config& c) -> std::optional<std::string> {
         c.testdev = t.flag;
         return std::nullopt;
       },
       [](const GuestOption&, StateWriter& out, const Config& c) { out.boolean(c.testdev); },
       [](const GuestOption&, StateReader& in, Config& c) { c.testdev = in.boolean(); },
       same_field<&Config::testdev>,
       [](const GuestOption&, const Config& s) {
         return std::string(s.testdev ? "--testdev" : "no --testdev");
       },
       take_field<&Config::testdev>});
  return rows;
}

}  // namespace

const std::vector<GuestOption>& guest_options() {
  static const std::vector<GuestOption> rows = make_rows();
  return rows;
}

}  // namespace minivmm::vmm
