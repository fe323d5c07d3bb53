#include "vmm/machine/snapshot_config.h"

#include <algorithm>
#include <iterator>

#include "devices/bus/device_state.h"
#include "vmm/machine/net_spec.h"
#include "vmm/machine/board_layout.h"
#include "vmm/vcpu/cpuid_policy.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

using devices::StateReader;
using devices::StateWriter;

constexpr std::size_t kMaxText = 4096;
constexpr std::size_t kMaxList = 64;

// The record's layout (issue 34). Layout 1, before the record had a version, began with the
// RAM size (u64), which is whole pages (SnapshotFile refuses anything else), so its first byte
// is always 0: a record whose first byte is 0 is layout 1 and is read as it always was. Later
// layouts begin with their version byte.
constexpr std::uint8_t kUnversionedLayout = 1;
constexpr std::uint8_t kLayout = 2;

template <typename Enum>
void save_enum(StateWriter& out, Enum e) {
  out.u8(static_cast<std::uint8_t>(e));
}

// An enum's byte, refused unless it is one of the `count` values this build knows.
template <typename Enum>
Enum load_enum(StateReader& in, std::uint8_t count, const char* what) {
  const std::uint8_t v = in.u8();
  if (v >= count) in.fail("an unknown " + std::string(what) + " (" + std::to_string(v) + ")");
  return static_cast<Enum>(v);
}

std::optional<std::string> differs(const char* option, const std::string& snapshot) {
  return std::string(option) + ": the snapshot's guest has " + snapshot +
         "; leave it out, or say the same";
}

// The guest-visible options, one row each (issue 34): the option as the command line names it
// (run_cli.h's add_guest_options registers it; tests/unit/vmm/cli checks that the two lists are
// one), its field of the record (written, and read back checked, in row order: the record's
// layout is this table's order), whether the command line's value agrees with the snapshot's,
// how the snapshot's guest has it (for the contradiction's line), and the snapshot's value into
// the command line's Config at a restore. The drives and the NICs have rules of their own
// (sizes, renames, MACs) and follow the rows in the record. A new guest-visible option is a row
// here (at the end, with a new layout version as its `since`) and its registration in
// run_cli.h.
struct GuestField {
  const char* option;
  void (*save)(StateWriter& out, const Config& c);
  void (*load)(StateReader& in, Config& c);
  bool (*same)(const Config& user, const Config& saved);
  std::string (*snapshot_has)(const Config& saved);
  void (*take)(Config& user, const Config& saved);
  // The first layout whose record has the field: an older record leaves it at its default
  // (without it, a row appended for a new option would make every older snapshot unreadable:
  // found by the scratch virtio-rng of the recipe check).
  std::uint8_t since = kUnversionedLayout;
};

void save_cpuid_mask(StateWriter& out, const Config& c) {
  out.u32(static_cast<std::uint32_t>(c.cpuid_mask.size()));
  for (const std::string& m : c.cpuid_mask) out.text(m);
}

void load_cpuid_mask(StateReader& in, Config& c) {
  const std::uint32_t masks = in.u32();
  if (masks > kMaxList) in.fail(std::to_string(masks) + " CPUID masks");
  const auto& known = known_cpuid_features();
  for (std::uint32_t i = 0; i < masks; ++i) {
    std::string name = in.text(kMaxText);
    // The names this minivmm writes are the ones --cpuid-mask takes: anything else is not a
    // snapshot of it (and the name is quoted on one line, whatever bytes it holds).
    if (std::none_of(known.begin(), known.end(),
                     [&](const CpuidFeature& f) { return f.name == name; })) {
      in.fail("an unknown CPUID feature '" + one_line(name) + "'");
    }
    c.cpuid_mask.push_back(std::move(name));
  }
}

const GuestField kGuestFields[] = {
    {"--memory", [](StateWriter& out, const Config& c) { out.u64(c.memory_bytes); },
     [](StateReader& in, Config& c) { c.memory_bytes = in.u64(); },
     [](const Config& u, const Config& s) { return u.memory_bytes == s.memory_bytes; },
     [](const Config& s) { return std::to_string(s.memory_bytes >> 20) + " MiB"; },
     [](Config& u, const Config& s) { u.memory_bytes = s.memory_bytes; }},
    {"--cpus", [](StateWriter& out, const Config& c) { out.u32(c.cpus); },
     [](StateReader& in, Config& c) {
       c.cpus = in.u32();
       if (c.cpus < 1 || c.cpus > kMaxVcpus) in.fail(std::to_string(c.cpus) + " vCPUs");
     },
     [](const Config& u, const Config& s) { return u.cpus == s.cpus; },
     [](const Config& s) { return std::to_string(s.cpus) + " vCPUs"; },
     [](Config& u, const Config& s) { u.cpus = s.cpus; }},
    {"--pit", [](StateWriter& out, const Config& c) { save_enum(out, c.pit); },
     [](StateReader& in, Config& c) { c.pit = load_enum<PitMode>(in, 2, "--pit"); },
     [](const Config& u, const Config& s) { return u.pit == s.pit; },
     [](const Config& s) { return std::string(s.pit == PitMode::kKvm ? "--pit kvm" : "--pit user"); },
     [](Config& u, const Config& s) { u.pit = s.pit; }},
    {"--pit-tick", [](StateWriter& out, const Config& c) { save_enum(out, c.pit_tick); },
     [](StateReader& in, Config& c) { c.pit_tick = load_enum<PitTick>(in, 3, "--pit-tick"); },
     [](const Config& u, const Config& s) { return u.pit_tick == s.pit_tick; },
     [](const Config& s) {
       const char* names[] = {"loop", "vcpu", "kernel"};
       return std::string("--pit-tick ") + names[static_cast<int>(s.pit_tick)];
     },
     [](Config& u, const Config& s) { u.pit_tick = s.pit_tick; }},
    {"--lost-ticks", [](StateWriter& out, const Config& c) { save_enum(out, c.lost_ticks); },
     [](StateReader& in, Config& c) {
       c.lost_ticks = load_enum<devices::LostTickPolicy>(in, 2, "--lost-ticks");
     },
     [](const Config& u, const Config& s) { return u.lost_ticks == s.lost_ticks; },
     [](const Config& s) {
       return std::string(s.lost_ticks == devices::LostTickPolicy::kDelay ? "--lost-ticks delay"
                                                                           : "--lost-ticks discard");
     },
     [](Config& u, const Config& s) { u.lost_ticks = s.lost_ticks; }},
    {"--cpu", [](StateWriter& out, const Config& c) { save_enum(out, c.cpu); },
     [](StateReader& in, Config& c) { c.cpu = load_enum<CpuModel>(in, 2, "--cpu"); },
     [](const Config& u, const Config& s) { return u.cpu == s.cpu; },
     [](const Config& s) { return std::string(s.cpu == CpuModel::kHost ? "--cpu host" : "--cpu baseline"); },
     [](Config& u, const Config& s) { u.cpu = s.cpu; }},
    {"--cpuid-mask", save_cpuid_mask, load_cpuid_mask,
     [](const Config& u, const Config& s) { return u.cpuid_mask == s.cpuid_mask; },
     [](const Config&) { return std::string("another CPUID mask"); },
     [](Config& u, const Config& s) { u.cpuid_mask = s.cpuid_mask; }},
    {"--console", [](StateWriter& out, const Config& c) { out.boolean(c.virtio_console); },
     [](StateReader& in, Config& c) { c.virtio_console = in.boolean(); },
     [](const Config& u, const Config& s) { return u.virtio_console == s.virtio_console; },
     [](const Config& s) { return std::string(s.virtio_console ? "--console virtio" : "--console serial"); },
     [](Config& u, const Config& s) { u.virtio_console = s.virtio_console; }},
    {"--testdev", [](StateWriter& out, const Config& c) { out.boolean(c.testdev); },
     [](StateReader& in, Config& c) { c.testdev = in.boolean(); },
     [](const Config& u, const Config& s) { return u.testdev == s.testdev; },
     [](const Config& s) { return std::string(s.testdev ? "--testdev" : "no --testdev"); },
     [](Config& u, const Config& s) { u.testdev = s.testdev; }},
};

// The options with rules of their own: the drives and NICs (in the record after the rows), and
// the shares (a run with one refuses snapshots, so no record has them).
constexpr std::string_view kOwnRuleOptions[] = {"--drive", "--net", "--share"};

}  // namespace

std::vector<std::string_view> guest_visible_options() {
  std::vector<std::string_view> names;
  for (const GuestField& f : kGuestFields) names.emplace_back(f.option);
  names.insert(names.end(), std::begin(kOwnRuleOptions), std::end(kOwnRuleOptions));
  return names;
}

std::vector<std::uint8_t> save_machine_config(const Config& c,
                                              const std::vector<std::uint64_t>& drive_sizes) {
  StateWriter out;
  devices::write_version(out, kLayout);
  for (const GuestField& f : kGuestFields) f.save(out, c);
  out.u32(static_cast<std::uint32_t>(c.drives.size()));
  for (std::size_t i = 0; i < c.drives.size(); ++i) {
    out.text(c.drives[i].path);
    out.boolean(c.drives[i].read_only);
    save_enum(out, c.drives[i].aio);
    out.u64(i < drive_sizes.size() ? drive_sizes[i] : 0);
  }
  out.u32(static_cast<std::uint32_t>(c.nets.size()));
  for (const NetSpec& n : c.nets) out.text(n.text);
  return out.data();
}

// The record's drives (with their sizes) and NICs, after the rows' fields.
static void load_devices(StateReader& in, SavedMachine& s) {
  Config& c = s.config;
  const std::uint32_t drives = in.u32();
  if (drives > kMaxList) in.fail(std::to_string(drives) + " drives");
  for (std::uint32_t i = 0; i < drives; ++i) {
    DriveSpec d;
    d.path = in.text(kMaxText);
    d.read_only = in.boolean();
    d.aio = load_enum<DriveAio>(in, 3, "drive aio");
    if (d.path.empty()) in.fail("a drive without a path");
    // Stored resolved (Machine::save_sections): a relative one would open whatever file of that
    // name sits in the restoring process's folder. An older snapshot's relative path must be
    // given again, with --restore-drive (run_command.cc checks that, since that option may
    // replace it).
    c.drives.push_back(d);
    s.drive_sizes.push_back(in.u64());
  }
  const std::uint32_t nets = in.u32();
  if (nets > kMaxList) in.fail(std::to_string(nets) + " NICs");
  for (std::uint32_t i = 0; i < nets; ++i) {
    const std::string text = in.text(kMaxText);
    std::string why;
    const auto n = parse_net_spec(text, why);
    if (!n) in.fail("NIC " + std::to_string(i) + ": " + why);
    c.nets.push_back(*n);
  }
}

SavedMachine load_machine_config(std::span<const std::uint8_t> record) {
  StateReader in(record, "config");
  const std::uint8_t layout = record.empty() || record[0] == 0 ? kUnversionedLayout : in.u8();
  if (layout > kLayout) {
    in.fail("layout version " + std::to_string(layout) + " (this build reads " +
            std::to_string(kUnversionedLayout) + " to " + std::to_string(kLayout) + ")");
  }
  // Layouts 1 and 2 hold the same fields; a row added later says since which layout.
  SavedMachine s;
  for (const GuestField& f : kGuestFields) {
    if (layout >= f.since) f.load(in, s.config);
  }
  load_devices(in, s);
  in.expect_end();
  if (s.config.virtio_devices() > board::kVirtioGsis.size()) in.fail("too many virtio devices");
  return s;
}

namespace {

// What the command line gave that the snapshot's guest contradicts, or nullopt.
std::optional<std::string> contradiction(const Config& user, const GivenOptions& given,
                                         const Config& s) {
  for (const GuestField& f : kGuestFields) {
    if (given.count(f.option) > 0 && !f.same(user, s)) return differs(f.option, f.snapshot_has(s));
  }
  if (given.count("--drive") > 0) {
    return std::string("--drive: a restored guest has the snapshot's drives; give another ") +
           "file for one with --restore-drive N=PATH";
  }
  if (given.count("--net") > 0 && user.nets.size() != s.nets.size()) {
    return differs("--net", std::to_string(s.nets.size()) + " NICs");
  }
  return std::nullopt;
}

// The snapshot's drives, renamed by --restore-drive.
std::optional<std::string> take_drives(
    Config& user, const Config& s,
    const std::vector<std::pair<std::size_t, std::string>>& restore_drives) {
  user.drives = s.drives;
  for (const auto& [index, path] : restore_drives) {
    if (index >= user.drives.size()) {
      return std::string("--restore-drive: the snapshot has ") +
             std::to_string(user.drives.size()) + " drives (0.." +
             std::to_string(user.drives.empty() ? 0 : user.drives.size() - 1) + "), not " +
             std::to_string(index);
    }
    user.drives[index].path = path;
  }
  return std::nullopt;
}

// The snapshot's NICs; given again (`user_nets`), their back-ends replace the saved ones and
// keep the snapshot's MACs.
std::optional<std::string> take_nets(Config& user, bool given, const std::vector<NetSpec>& user_nets,
                                     const Config& s) {
  user.nets = s.nets;
  if (given) {
    for (std::size_t i = 0; i < user_nets.size(); ++i) {
      NetSpec n = user_nets[i];
      if (n.mac && s.nets[i].mac && *n.mac != *s.nets[i].mac) {
        return differs("--net", "another MAC on NIC " + std::to_string(i));
      }
      if (n.mac && !s.nets[i].mac) return differs("--net", "the default MAC on NIC " + std::to_string(i));
      n.mac = s.nets[i].mac;
      user.nets[i] = n;
    }
    return std::nullopt;
  }
  for (const NetSpec& n : user.nets) {
    if (n.kind == NetSpec::Kind::kTapFd) {
      return std::string("--net: the snapshot's NIC was given as '") + n.text +
             "', a descriptor of that process; give --net again for each NIC";
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> merge_restored_config(
    Config& user, const GivenOptions& given, const SavedMachine& saved,
    const std::vector<std::pair<std::size_t, std::string>>& restore_drives) {
  const Config& s = saved.config;
  if (auto why = contradiction(user, given, s)) return why;
  // Host-side fields stay the user's; everything the guest sees becomes the snapshot's.
  for (const GuestField& f : kGuestFields) f.take(user, s);
  if (auto why = take_drives(user, s, restore_drives)) return why;
  const std::vector<NetSpec> user_nets = user.nets;
  return take_nets(user, given.count("--net") > 0, user_nets, s);
}

}  // namespace minivmm::vmm
