#include "vmm/machine/snapshot_config.h"

#include <algorithm>
#include <iterator>

#include "devices/bus/device_state.h"
#include "vmm/machine/guest_options.h"
#include "vmm/machine/net_spec.h"
#include "vmm/machine/board_layout.h"
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

// The options with rules of their own: the drives and NICs (in the record after the rows), and
// the shares (a run with one refuses snapshots, so no record has them).
constexpr std::string_view kOwnRuleOptions[] = {"--drive", "--net", "--share"};

}  // namespace

std::vector<std::string_view> guest_visible_options() {
  std::vector<std::string_view> names;
  for (const GuestOption& g : guest_options()) names.emplace_back(g.name);
  names.insert(names.end(), std::begin(kOwnRuleOptions), std::end(kOwnRuleOptions));
  return names;
}

std::vector<std::uint8_t> save_machine_config(const Config& c,
                                              const std::vector<std::uint64_t>& drive_sizes) {
  StateWriter out;
  devices::write_version(out, kLayout);
  for (const GuestOption& g : guest_options()) g.save(g, out, c);
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
  for (const GuestOption& g : guest_options()) {
    if (layout >= g.since) g.load(g, in, s.config);
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
  for (const GuestOption& g : guest_options()) {
    if (given.count(g.name) > 0 && !g.same(user, s)) return differs(g.name, g.snapshot_has(g, s));
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
  for (const GuestOption& g : guest_options()) g.take(user, s);
  if (auto why = take_drives(user, s, restore_drives)) return why;
  const std::vector<NetSpec> user_nets = user.nets;
  return take_nets(user, given.count("--net") > 0, user_nets, s);
}

}  // namespace minivmm::vmm
