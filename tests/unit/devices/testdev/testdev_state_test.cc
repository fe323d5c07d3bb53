// Snapshot records of the test devices (issue 23): fw_cfg's selection and read offset, and
// pc-testdev's echo register, iomem buffer and IRQ levels, saved and loaded into a freshly
// made twin that must read on where the first left off; hostile records refused.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "devices/bus/device_state.h"
#include "devices/testdev/fw_cfg.h"
#include "devices/testdev/pc_testdev.h"
#include "tests/support/fake_irq_line.h"

namespace minivmm::testing {
namespace {

using devices::FwCfg;
using devices::FwCfgConfig;
using devices::PcTestdev;
using devices::PcTestdevIomem;
using devices::PcTestdevIrq;
using devices::StateError;
using Bytes = std::vector<std::uint8_t>;

Bytes save(const devices::StatefulDevice& d) {
  devices::StateWriter w;
  d.save_state(w);
  return w.data();
}

void load(devices::StatefulDevice& d, const Bytes& record) {
  devices::StateReader r(record, std::string(d.state_key()));
  d.load_state(r);
}

Bytes cut(const Bytes& r, std::size_t n) {
  return Bytes(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(n));
}

template <typename T>
void poke(Bytes& r, std::size_t at, T v) {
  std::memcpy(r.data() + at, &v, sizeof v);
}

// --- fw_cfg ---------------------------------------------------------------------------------

// Bytes layout: version, selected flag, key (u16), offset (u64), six counters.
constexpr std::size_t kFwSelected = 1, kFwKey = 2, kFwOffset = 4, kFwBytes = 60;

struct FwCfgRig {
  explicit FwCfgRig(bool with_file = true) {
    if (with_file) file_key = dev.add_file("etc/state", {10, 11, 12, 13, 14, 15});
  }
  void select(std::uint16_t key) {
    const std::uint8_t b[2] = {static_cast<std::uint8_t>(key), static_cast<std::uint8_t>(key >> 8)};
    dev.write(0, b);
  }
  std::uint8_t next() {
    std::uint8_t b = 0x5a;
    dev.read(1, std::span<std::uint8_t>(&b, 1));
    return b;
  }
  FwCfg dev{FwCfgConfig{64ull << 20, 2, 4}};
  std::uint16_t file_key = 0;
};

TEST(FwCfgStateTest, RestoredDeviceReadsOnFromTheSavedOffset) {
  FwCfgRig a;
  a.select(a.file_key);
  EXPECT_EQ(a.next(), 10);
  EXPECT_EQ(a.next(), 11);
  const Bytes record = save(a.dev);
  ASSERT_EQ(record.size(), kFwBytes);

  FwCfgRig b;
  load(b.dev, record);
  EXPECT_EQ(save(b.dev), record);
  EXPECT_EQ(b.next(), 12);
  EXPECT_EQ(b.next(), 13);
  EXPECT_EQ(b.dev.stats().data_reads, 4u);
  EXPECT_EQ(b.dev.stats().selects, 1u);
}

TEST(FwCfgStateTest, NothingSelectedAndAnItemReadToItsEndRoundTrip) {
  FwCfgRig a;
  FwCfgRig b;
  load(b.dev, save(a.dev));
  EXPECT_EQ(b.next(), 0);  // nothing selected reads 0

  a.select(FwCfg::kSignature);
  for (int i = 0; i < 4; ++i) a.next();
  FwCfgRig c;
  load(c.dev, save(a.dev));
  EXPECT_EQ(c.next(), 0);
  EXPECT_EQ(c.dev.stats().reads_past_end, 1u);
}

TEST(FwCfgStateTest, HostileRecordsAreRefused) {
  FwCfgRig a;
  a.select(a.file_key);
  a.next();
  const Bytes good = save(a.dev);
  const auto refused = [](const Bytes& r, bool with_file = true) {
    FwCfgRig fresh(with_file);
    try {
      load(fresh.dev, r);
    } catch (const StateError&) {
      return true;
    }
    return false;
  };
  ASSERT_FALSE(refused(good));
  for (std::size_t n = 0; n < good.size(); ++n) EXPECT_TRUE(refused(cut(good, n))) << n;
  Bytes bad = good;
  bad.push_back(0);
  EXPECT_TRUE(refused(bad)) << "one byte longer";
  bad = good;
  poke<std::uint16_t>(bad, kFwKey, 0x3000);
  EXPECT_TRUE(refused(bad)) << "a key that is no item";
  bad = good;
  poke<std::uint64_t>(bad, kFwOffset, 7);
  EXPECT_TRUE(refused(bad)) << "past the end of a 6-byte file";
  bad = good;
  poke<std::uint64_t>(bad, kFwOffset, ~std::uint64_t{0});
  EXPECT_TRUE(refused(bad));
  bad = good;
  bad[kFwSelected] = 0;
  EXPECT_TRUE(refused(bad)) << "a key without a selection";
  bad = good;
  bad[kFwSelected] = 2;
  EXPECT_TRUE(refused(bad));
  bad = good;
  bad[0] = 9;
  EXPECT_TRUE(refused(bad)) << "another layout version";
  EXPECT_TRUE(refused(good, /*with_file=*/false)) << "a board made without the file";
}

// --- pc-testdev -----------------------------------------------------------------------------

// Bytes layout: version; echo (u32 value, u64 counter); flush page (two u64); flushes outside
// RAM (u64); iomem (u32 length, 64 KiB, three u64); IRQ (u32 length, 24 levels, four u64).
constexpr std::size_t kIomemLength = 37, kIrqLength = kIomemLength + 4 + PcTestdevIomem::kSize + 24;
constexpr std::size_t kIrqLevels = kIrqLength + 4;
constexpr std::size_t kPcTestdevBytes = kIrqLevels + PcTestdevIrq::kLines + 32;

std::array<devices::IrqLine*, PcTestdevIrq::kLines> wire(
    std::array<FakeIrqLine, PcTestdevIrq::kLines>& lines) {
  std::array<devices::IrqLine*, PcTestdevIrq::kLines> wires{};
  for (std::size_t i = 0; i < lines.size(); ++i) wires[i] = &lines[i];
  return wires;
}

struct PcTestdevRig {
  std::array<FakeIrqLine, PcTestdevIrq::kLines> lines;
  std::array<devices::IrqLine*, PcTestdevIrq::kLines> wires = wire(lines);
  int flushes = 0;
  PcTestdev dev{wires, [this](std::uint64_t) {
                  ++flushes;
                  return true;
                }};
};

TEST(PcTestdevStateTest, EchoIomemAndRaisedLinesReadBackTheSame) {
  PcTestdevRig a;
  a.dev.echo().write(0, std::vector<std::uint8_t>{0x78, 0x56, 0x34, 0x12});
  a.dev.iomem().write(0x1230, std::vector<std::uint8_t>{1, 2, 3, 4});
  a.dev.irq().write(5, std::vector<std::uint8_t>{1});
  a.dev.irq().write(9, std::vector<std::uint8_t>{1});
  a.dev.irq().write(9, std::vector<std::uint8_t>{0});
  a.dev.flush_page().write(0, std::vector<std::uint8_t>{0, 0x10, 0, 0});
  const Bytes record = save(a.dev);
  ASSERT_EQ(record.size(), kPcTestdevBytes);

  PcTestdevRig b;
  load(b.dev, record);
  EXPECT_EQ(save(b.dev), record);
  EXPECT_EQ(b.dev.echo().value(), 0x12345678u);
  std::vector<std::uint8_t> got(4);
  b.dev.iomem().read(0x1230, got);
  EXPECT_EQ(got, (std::vector<std::uint8_t>{1, 2, 3, 4}));
  EXPECT_TRUE(b.dev.irq().level(5));
  EXPECT_TRUE(b.lines[5].level());  // a fresh board's line raised again
  EXPECT_FALSE(b.dev.irq().level(9));
  EXPECT_TRUE(b.lines[9].levels().empty());
  EXPECT_EQ(b.dev.flush_page().flushes(), 1u);
  EXPECT_EQ(b.flushes, 0);  // loading flushes nothing
}

TEST(PcTestdevStateTest, HostileRecordsAreRefusedWithoutDrivingALine) {
  PcTestdevRig a;
  a.dev.irq().write(3, std::vector<std::uint8_t>{1});
  const Bytes good = save(a.dev);
  const auto refused = [](const Bytes& r) {
    PcTestdevRig fresh;
    bool threw = false;
    try {
      load(fresh.dev, r);
    } catch (const StateError&) {
      threw = true;
    }
    if (threw) {
      for (const FakeIrqLine& l : fresh.lines) EXPECT_TRUE(l.levels().empty());
    }
    return threw;
  };
  ASSERT_FALSE(refused(good));
  // The 64 KiB buffer makes every length too many: the edges of each part, and some inside.
  for (std::size_t n = 0; n < good.size(); n += (n < 64 || n + 64 > good.size()) ? std::size_t{1} : std::size_t{4093}) {
    EXPECT_TRUE(refused(cut(good, n))) << n;
  }
  for (std::size_t n = kIrqLength - 8; n < kIrqLevels + 8; ++n) EXPECT_TRUE(refused(cut(good, n))) << n;
  Bytes bad = good;
  bad.push_back(0);
  EXPECT_TRUE(refused(bad)) << "one byte longer: line 3 must not be raised first";
  bad = good;
  bad[kIrqLevels + 7] = 2;
  EXPECT_TRUE(refused(bad)) << "an IRQ level of 2";
  bad = good;
  poke<std::uint32_t>(bad, kIomemLength, 0x8000);
  EXPECT_TRUE(refused(bad)) << "an iomem buffer of another size";
  bad = good;
  poke<std::uint32_t>(bad, kIrqLength, 23);
  EXPECT_TRUE(refused(bad)) << "23 IRQ levels";
  bad = good;
  bad[0] = 0;
  EXPECT_TRUE(refused(bad));
}

}  // namespace
}  // namespace minivmm::testing
