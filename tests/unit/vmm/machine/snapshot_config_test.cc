// The configuration a snapshot keeps (vmm/machine/snapshot_config.h): it reads back as
// written, a record from a hostile file is refused, and a restore's command line may add the
// host's business but not contradict what the guest sees.
#include "vmm/machine/snapshot_config.h"

#include <gtest/gtest.h>

#include "devices/bus/device_state.h"
#include "vmm/machine/net_spec.h"

namespace minivmm::vmm {
namespace {

Config guest_config() {
  Config c;
  c.memory_bytes = 128ull << 20;
  c.cpus = 4;
  c.pit_tick = PitTick::kVcpu;
  c.lost_ticks = devices::LostTickPolicy::kDiscard;
  c.cpuid_mask = {"avx"};
  c.virtio_console = true;
  c.pit = PitMode::kKvm;
  c.cpu = CpuModel::kHost;
  c.testdev = true;
  c.drives = {{"/tmp/a.img", true, DriveAio::kThreads}};
  std::string why;
  c.nets = {*parse_net_spec("user,mac=52:54:00:aa:bb:cc", why)};
  return c;
}

TEST(SnapshotConfigTest, ReadsBackWhatTheGuestSees) {
  const auto record = save_machine_config(guest_config(), {1 << 20});
  const SavedMachine s = load_machine_config(record);
  EXPECT_EQ(s.config.memory_bytes, 128ull << 20);
  EXPECT_EQ(s.config.cpus, 4u);
  EXPECT_EQ(s.config.pit_tick, PitTick::kVcpu);
  EXPECT_EQ(s.config.lost_ticks, devices::LostTickPolicy::kDiscard);
  EXPECT_EQ(s.config.cpuid_mask, std::vector<std::string>{"avx"});
  EXPECT_TRUE(s.config.virtio_console);
  EXPECT_EQ(s.config.pit, PitMode::kKvm);
  EXPECT_EQ(s.config.cpu, CpuModel::kHost);
  EXPECT_TRUE(s.config.testdev);
  ASSERT_EQ(s.config.drives.size(), 1u);
  EXPECT_EQ(s.config.drives[0].path, "/tmp/a.img");
  EXPECT_TRUE(s.config.drives[0].read_only);
  EXPECT_EQ(s.drive_sizes, std::vector<std::uint64_t>{1 << 20});
  ASSERT_EQ(s.config.nets.size(), 1u);
  EXPECT_EQ(s.config.nets[0].text, "user,mac=52:54:00:aa:bb:cc");
}

TEST(SnapshotConfigTest, HostileRecordsAreRefused) {
  auto record = save_machine_config(guest_config(), {1 << 20});
  EXPECT_THROW(load_machine_config(std::span(record).first(record.size() - 1)),
               devices::StateError);
  auto longer = record;
  longer.push_back(0);
  EXPECT_THROW(load_machine_config(longer), devices::StateError);
  auto cpus = record;
  cpus[9] = 99;  // the vCPU count follows the layout version and the RAM size
  EXPECT_THROW(load_machine_config(cpus), devices::StateError);
  auto pit = record;
  pit[13] = 7;  // no such PIT
  EXPECT_THROW(load_machine_config(pit), devices::StateError);
}

// Issue 34: the record has a layout version. One written before it had one (layout 1: the
// same fields, no version byte, so its first byte is the whole-page RAM size's low byte, 0)
// restores; another version is refused by number, in one line.
TEST(SnapshotConfigTest, AnUnversionedRecordLoadsAndAnotherVersionIsRefusedByNumber) {
  const auto record = save_machine_config(guest_config(), {1 << 20});
  ASSERT_EQ(record[0], 2);
  const std::vector<std::uint8_t> layout1(record.begin() + 1, record.end());
  ASSERT_EQ(layout1[0], 0);
  const SavedMachine s = load_machine_config(layout1);
  EXPECT_EQ(s.config.memory_bytes, 128ull << 20);
  EXPECT_EQ(s.config.cpus, 4u);
  EXPECT_EQ(s.config.nets.size(), 1u);
  auto v3 = record;
  v3[0] = 3;
  try {
    (void)load_machine_config(v3);
    FAIL() << "accepted";
  } catch (const devices::StateError& e) {
    EXPECT_STREQ(e.what(), "config state: layout version 3 (this build reads 1 to 2)");
  }
}

TEST(SnapshotConfigTest, TheHostsBusinessIsTheCommandLines) {
  const SavedMachine saved = load_machine_config(save_machine_config(guest_config(), {1 << 20}));
  Config user;
  user.api_socket = "/tmp/s";
  user.alarm = timers::AlarmKind::kTimerfd;
  user.memory_bytes = 64ull << 20;  // the default, not given: the snapshot's wins
  EXPECT_EQ(merge_restored_config(user, {}, saved, {}), std::nullopt);
  EXPECT_EQ(user.api_socket, "/tmp/s");
  EXPECT_EQ(user.alarm, timers::AlarmKind::kTimerfd);
  EXPECT_EQ(user.memory_bytes, 128ull << 20);
  EXPECT_EQ(user.cpus, 4u);
  EXPECT_TRUE(user.virtio_console);
}

TEST(SnapshotConfigTest, AContradictionIsAUsageErrorNamingTheOption) {
  const SavedMachine saved = load_machine_config(save_machine_config(guest_config(), {1 << 20}));
  auto why = [&](auto set) {
    Config user;
    GivenOptions given;
    set(user, given);
    const auto r = merge_restored_config(user, given, saved, {});
    return r ? *r : std::string();
  };
  EXPECT_NE(why([](Config& c, GivenOptions& g) { c.cpus = 2, g.insert("--cpus"); }).find("--cpus"),
            std::string::npos);
  EXPECT_NE(why([](Config& c, GivenOptions& g) { c.pit_tick = PitTick::kLoop, g.insert("--pit-tick"); })
                .find("--pit-tick vcpu"),
            std::string::npos);
  EXPECT_NE(why([](Config&, GivenOptions& g) { g.insert("--drive"); }).find("--restore-drive"),
            std::string::npos);
  // Saying the same is not a contradiction.
  EXPECT_EQ(why([](Config& c, GivenOptions& g) { c.cpus = 4, g.insert("--cpus"); }), "");
  Config user;
  const auto bad_index = merge_restored_config(user, {}, saved, {{3, "/tmp/b.img"}});
  ASSERT_TRUE(bad_index);
  EXPECT_NE(bad_index->find("--restore-drive"), std::string::npos);
  Config renamed;
  EXPECT_EQ(merge_restored_config(renamed, {}, saved, {{0, "/tmp/b.img"}}), std::nullopt);
  EXPECT_EQ(renamed.drives[0].path, "/tmp/b.img");
  EXPECT_TRUE(renamed.drives[0].read_only);
}

// Every row of the table (snapshot_config.cc) judges its own field: a command line giving that
// option with another value than the snapshot's (guest_config() differs from the defaults in
// each) is told so, by the option's name.
TEST(SnapshotConfigTest, EveryGuestVisibleOptionGivenOtherwiseIsAContradictionNamingIt) {
  const SavedMachine saved = load_machine_config(save_machine_config(guest_config(), {1 << 20}));
  std::size_t rows = 0;
  for (const std::string_view name : guest_visible_options()) {
    if (name == "--share") continue;  // refused with --restore before any merge (run_config.cc)
    Config user;
    if (name == "--net") user.nets.clear();  // 0 NICs against the snapshot's 1
    const auto why = merge_restored_config(user, {std::string(name)}, saved, {});
    ASSERT_TRUE(why) << name;
    EXPECT_EQ(why->rfind(std::string(name), 0), 0u) << *why;
    ++rows;
  }
  EXPECT_EQ(rows, 11u);  // 9 rows, --drive and --net
}

}  // namespace
}  // namespace minivmm::vmm
