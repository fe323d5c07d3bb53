#include "vmm/machine/snapshot_config.h"

#include <algorithm>

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

}  // namespace

std::vector<std::uint8_t> save_machine_config(const Config& c,
                                              const std::vector<std::uint64_t>& drive_sizes) {
  StateWriter out;
  devices::write_version(out, kLayout);
  out.u64(c.memory_bytes);
  out.u32(c.cpus);
  out.u8(static_cast<std::uint8_t>(c.pit));
  out.u8(static_cast<std::uint8_t>(c.pit_tick));
  out.u8(static_cast<std::uint8_t>(c.lost_ticks));
  out.u8(static_cast<std::uint8_t>(c.cpu));
  out.u32(static_cast<std::uint32_t>(c.cpuid_mask.size()));
  for (const std::string& m : c.cpuid_mask) out.text(m);
  out.boolean(c.virtio_console);
  out.boolean(c.testdev);
  out.u32(static_cast<std::uint32_t>(c.drives.size()));
  for (std::size_t i = 0; i < c.drives.size(); ++i) {
    out.text(c.drives[i].path);
    out.boolean(c.drives[i].read_only);
    out.u8(static_cast<std::uint8_t>(c.drives[i].aio));
    out.u64(i < drive_sizes.size() ? drive_sizes[i] : 0);
  }
  out.u32(static_cast<std::uint32_t>(c.nets.size()));
  for (const NetSpec& n : c.nets) out.text(n.text);
  return out.data();
}

// The record's drives (with their sizes) and NICs, after the scalar fields.
static void load_devices(StateReader& in, SavedMachine& s) {
  Config& c = s.config;
  const std::uint32_t drives = in.u32();
  if (drives > kMaxList) in.fail(std::to_string(drives) + " drives");
  for (std::uint32_t i = 0; i < drives; ++i) {
    DriveSpec d;
    d.path = in.text(kMaxText);
    d.read_only = in.boolean();
    const std::uint8_t aio = in.u8();
    if (aio > 2) in.fail("drive aio " + std::to_string(aio));
    d.aio = static_cast<DriveAio>(aio);
    if (d.path.empty()) in.fail("a drive without a path");
    // Stored resolved (Machine::save_sections): a relative one would open whatever file of that
    // name sits in the restoring process's folder. An older snapshot's relative path must be
    // given again, with --restore-drive (main.cc checks that, since that option may replace it).
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
  if (layout != kUnversionedLayout && layout != kLayout) {
    in.fail("layout version " + std::to_string(layout) + " (this build reads " +
            std::to_string(kUnversionedLayout) + " and " + std::to_string(kLayout) + ")");
  }
  // Layouts 1 and 2 hold the same fields; a layout 3 would branch on `layout` below.
  SavedMachine s;
  Config& c = s.config;
  c.memory_bytes = in.u64();
  c.cpus = in.u32();
  if (c.cpus < 1 || c.cpus > kMaxVcpus) in.fail(std::to_string(c.cpus) + " vCPUs");
  const std::uint8_t pit = in.u8(), tick = in.u8(), lost = in.u8(), cpu = in.u8();
  if (pit > 1 || tick > 2 || lost > 1 || cpu > 1) in.fail("an unknown PIT, tick, policy or CPU");
  c.pit = static_cast<PitMode>(pit);
  c.pit_tick = static_cast<PitTick>(tick);
  c.lost_ticks = static_cast<devices::LostTickPolicy>(lost);
  c.cpu = static_cast<CpuModel>(cpu);
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
  c.virtio_console = in.boolean();
  c.testdev = in.boolean();
  load_devices(in, s);
  in.expect_end();
  if (c.virtio_devices() > board::kVirtioGsis.size()) in.fail("too many virtio devices");
  return s;
}

namespace {

std::optional<std::string> differs(const char* option, const std::string& snapshot) {
  return std::string(option) + ": the snapshot's guest has " + snapshot +
         "; leave it out, or say the same";
}

// The guest-visible options a restore takes from the snapshot, one row each (issue 34), in the
// order their contradictions are said: the option, whether the command line gave it, whether
// the command line's value agrees with the snapshot's, how the snapshot's guest has it, and
// the snapshot's value into the command line's Config. The drives and the NICs have rules of
// their own (renames, MACs), below. A new guest-visible option adds its row here, its field to
// the record above (with a layout version), and its flag to GivenOptions.
struct GuestField {
  const char* option;
  bool GivenOptions::*given;
  bool (*same)(const Config& user, const Config& saved);
  std::string (*snapshot_has)(const Config& saved);
  void (*take)(Config& user, const Config& saved);
};

const GuestField kGuestFields[] = {
    {"--memory", &GivenOptions::memory,
     [](const Config& u, const Config& s) { return u.memory_bytes == s.memory_bytes; },
     [](const Config& s) { return std::to_string(s.memory_bytes >> 20) + " MiB"; },
     [](Config& u, const Config& s) { u.memory_bytes = s.memory_bytes; }},
    {"--cpus", &GivenOptions::cpus, [](const Config& u, const Config& s) { return u.cpus == s.cpus; },
     [](const Config& s) { return std::to_string(s.cpus) + " vCPUs"; },
     [](Config& u, const Config& s) { u.cpus = s.cpus; }},
    {"--pit", &GivenOptions::pit, [](const Config& u, const Config& s) { return u.pit == s.pit; },
     [](const Config& s) { return std::string(s.pit == PitMode::kKvm ? "--pit kvm" : "--pit user"); },
     [](Config& u, const Config& s) { u.pit = s.pit; }},
    {"--pit-tick", &GivenOptions::pit_tick,
     [](const Config& u, const Config& s) { return u.pit_tick == s.pit_tick; },
     [](const Config& s) {
       const char* names[] = {"loop", "vcpu", "kernel"};
       return std::string("--pit-tick ") + names[static_cast<int>(s.pit_tick)];
     },
     [](Config& u, const Config& s) { u.pit_tick = s.pit_tick; }},
    {"--lost-ticks", &GivenOptions::lost_ticks,
     [](const Config& u, const Config& s) { return u.lost_ticks == s.lost_ticks; },
     [](const Config& s) {
       return std::string(s.lost_ticks == devices::LostTickPolicy::kDelay ? "--lost-ticks delay"
                                                                           : "--lost-ticks discard");
     },
     [](Config& u, const Config& s) { u.lost_ticks = s.lost_ticks; }},
    {"--cpu", &GivenOptions::cpu, [](const Config& u, const Config& s) { return u.cpu == s.cpu; },
     [](const Config& s) { return std::string(s.cpu == CpuModel::kHost ? "--cpu host" : "--cpu baseline"); },
     [](Config& u, const Config& s) { u.cpu = s.cpu; }},
    {"--cpuid-mask", &GivenOptions::cpuid_mask,
     [](const Config& u, const Config& s) { return u.cpuid_mask == s.cpuid_mask; },
     [](const Config&) { return std::string("another CPUID mask"); },
     [](Config& u, const Config& s) { u.cpuid_mask = s.cpuid_mask; }},
    {"--console", &GivenOptions::console,
     [](const Config& u, const Config& s) { return u.virtio_console == s.virtio_console; },
     [](const Config& s) { return std::string(s.virtio_console ? "--console virtio" : "--console serial"); },
     [](Config& u, const Config& s) { u.virtio_console = s.virtio_console; }},
    {"--testdev", &GivenOptions::testdev,
     [](const Config& u, const Config& s) { return u.testdev == s.testdev; },
     [](const Config&) { return std::string("no --testdev"); },
     [](Config& u, const Config& s) { u.testdev = s.testdev; }},
};

// What the command line gave that the snapshot's guest contradicts, or nullopt.
std::optional<std::string> contradiction(const Config& user, const GivenOptions& given,
                                         const Config& s) {
  for (const GuestField& f : kGuestFields) {
    if (given.*f.given && !f.same(user, s)) return differs(f.option, f.snapshot_has(s));
  }
  if (given.drives) {
    return std::string("--drive: a restored guest has the snapshot's drives; give another ") +
           "file for one with --restore-drive N=PATH";
  }
  if (given.nets && user.nets.size() != s.nets.size()) {
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
  return take_nets(user, given.nets, user_nets, s);
}

}  // namespace minivmm::vmm
