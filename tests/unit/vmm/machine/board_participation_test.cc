// A board slot whose maker mounts a device that declares no snapshot participation fails the
// board's start-up (issue 34): the snapshot would skip it and a restore would reset it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "vmm/machine/pc_board.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

struct Undeclared final : devices::ReportingDevice {
  std::string_view report_key() const noexcept override { return "undeclared"; }
  void report(devices::ReportWriter&) const override {}
};

Mounted make_nothing(BoardContext&, const BoardSlot&) { return {}; }

TEST(BoardParticipationTest, AMountedDeviceWithoutParticipationFailsStartUp) {
  const BoardSlot slot{"scratch", {}, {}, {}, false, make_nothing};
  Mounted m;
  m.owned = std::make_unique<Undeclared>();  // a maker that set no m.snapshot
  try {
    check_snapshot_participation(slot, m);
    FAIL() << "accepted";
  } catch (const VmmError& e) {
    EXPECT_NE(std::string(e.what()).find("board slot 'scratch'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no snapshot participation"), std::string::npos);
  }
}

TEST(BoardParticipationTest, DeclaredOrNothingMountedStarts) {
  const BoardSlot slot{"scratch", {}, {}, {}, false, make_nothing};
  EXPECT_NO_THROW(check_snapshot_participation(slot, Mounted{}));  // --pit kvm's PIT slot
  Mounted m;
  m.owned = std::make_unique<Undeclared>();
  m.snapshot.stateless_because = "a test's device";
  EXPECT_NO_THROW(check_snapshot_participation(slot, m));
}

// One name per device (issue 34): a slot is named by its device's report key, which is also its
// snapshot section ("dev:<name>") and its log name. The pinned --stats keys
// (tests/integration/report_keys/testdev.txt, a run with every slot) have each slot's name.
TEST(BoardParticipationTest, EverySlotIsNamedByItsReportKey) {
  const auto pins =
      std::filesystem::path(MINIVMM_TESTS_DIR) / "integration/report_keys/testdev.txt";
  std::ifstream in(pins);
  ASSERT_TRUE(in) << pins;
  std::set<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("/devices/", 0) != 0) continue;
    const std::string key = line.substr(9, line.find_first_of("/ ", 9) - 9);
    keys.insert(key);
  }
  for (const BoardSlot& s : board_slots()) {
    EXPECT_TRUE(keys.count(std::string(s.name))) << "slot '" << s.name << "' has no report key";
  }
}

}  // namespace
}  // namespace minivmm::vmm
