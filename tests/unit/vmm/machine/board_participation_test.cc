// A board slot whose maker mounts a device that declares no snapshot participation fails the
// board's start-up (issue 34): the snapshot would skip it and a restore would reset it.
#include <gtest/gtest.h>

#include <memory>
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

}  // namespace
}  // namespace minivmm::vmm
