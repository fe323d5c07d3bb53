// fw_cfg, traditional interface: what a guest reads after each selector write (QEMU
// docs/specs/fw_cfg.rst), and that bad accesses are ignored and counted.
#include "devices/testdev/fw_cfg.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::FwCfg;
using minivmm::devices::FwCfgConfig;

// 96 MiB and 3 of 4 CPUs: values whose every byte position is easy to tell apart.
constexpr std::uint64_t kRam = 96ull << 20;

struct FwCfgRig {
  FwCfg dev{FwCfgConfig{kRam, 3, 4}};

  void select(std::uint16_t key) {
    const std::uint8_t b[2] = {static_cast<std::uint8_t>(key), static_cast<std::uint8_t>(key >> 8)};
    dev.write(0, b);
  }
  std::uint8_t byte(std::uint16_t offset = 1) {
    std::uint8_t b = 0x5a;
    dev.read(offset, std::span<std::uint8_t>(&b, 1));
    return b;
  }
  std::uint64_t le(std::uint16_t key, int bytes) {
    select(key);
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t{byte()} << (8 * i);
    return v;
  }
  std::vector<std::uint8_t> bytes(std::uint16_t key, std::size_t n) {
    select(key);
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(byte());
    return out;
  }
};

TEST(FwCfgTest, SignatureReadsQemu) {
  FwCfgRig rig;
  EXPECT_EQ(rig.bytes(FwCfg::kSignature, 4), (std::vector<std::uint8_t>{'Q', 'E', 'M', 'U'}));
}

TEST(FwCfgTest, IdAdvertisesTraditionalInterfaceWithoutDma) {
  FwCfgRig rig;
  EXPECT_EQ(rig.le(FwCfg::kId, 4), 1u);
}

TEST(FwCfgTest, RamSizeIsLittleEndianU64) {
  FwCfgRig rig;
  EXPECT_EQ(rig.le(FwCfg::kRamSize, 8), kRam);
}

TEST(FwCfgTest, CpuCountAndMaxCpusAreU16) {
  FwCfgRig rig;
  EXPECT_EQ(rig.le(FwCfg::kNbCpus, 2), 3u);
  EXPECT_EQ(rig.le(FwCfg::kMaxCpus, 2), 4u);
}

TEST(FwCfgTest, SelectRewindsTheItem) {
  FwCfgRig rig;
  rig.select(FwCfg::kSignature);
  EXPECT_EQ(rig.byte(), 'Q');
  EXPECT_EQ(rig.byte(), 'E');
  rig.select(FwCfg::kSignature);
  EXPECT_EQ(rig.byte(), 'Q');
}

TEST(FwCfgTest, ByteReadAtSelectorOffsetAlsoReadsData) {
  FwCfgRig rig;  // QEMU's combined port: any byte read is a data read
  rig.select(FwCfg::kSignature);
  EXPECT_EQ(rig.byte(0), 'Q');
  EXPECT_EQ(rig.byte(1), 'E');
}

TEST(FwCfgTest, ReadsPastTheEndAreZeroAndCounted) {
  FwCfgRig rig;
  EXPECT_EQ(rig.bytes(FwCfg::kNbCpus, 4), (std::vector<std::uint8_t>{3, 0, 0, 0}));
  EXPECT_EQ(rig.dev.stats().reads_past_end, 2u);
}

TEST(FwCfgTest, UnknownKeyReadsZerosAndIsCounted) {
  FwCfgRig rig;
  // 0x11 is what kvm-unit-tests reads as MAX_RAM: it must read 0 ("no limit").
  EXPECT_EQ(rig.le(0x11, 8), 0u);
  EXPECT_EQ(rig.le(0x8000, 4), 0u);  // arch-local keys are not provided
  EXPECT_EQ(rig.le(0xffff, 2), 0u);
  EXPECT_EQ(rig.dev.stats().unknown_selects, 3u);
}

TEST(FwCfgTest, WriteChannelBitIsIgnoredInTheSelector) {
  FwCfgRig rig;
  EXPECT_EQ(rig.le(FwCfg::kWriteChannel | FwCfg::kNbCpus, 2), 3u);
}

TEST(FwCfgTest, EmptyFileDirectoryParses) {
  FwCfgRig rig;
  EXPECT_EQ(rig.bytes(FwCfg::kFileDir, 4), (std::vector<std::uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(rig.byte(), 0);  // and nothing after the count
  EXPECT_EQ(rig.dev.stats().reads_past_end, 1u);
}

TEST(FwCfgTest, FileDirectoryEntryIsBigEndian) {
  FwCfgRig rig;
  const std::uint16_t key = rig.dev.add_file("etc/test", {1, 2, 3});
  EXPECT_EQ(key, FwCfg::kFileFirst);
  const auto dir = rig.bytes(FwCfg::kFileDir, 4 + 64);
  EXPECT_EQ(std::vector<std::uint8_t>(dir.begin(), dir.begin() + 4),
            (std::vector<std::uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(std::vector<std::uint8_t>(dir.begin() + 4, dir.begin() + 12),
            (std::vector<std::uint8_t>{0, 0, 0, 3, 0x00, 0x20, 0, 0}));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(dir.data() + 12)), "etc/test");
  EXPECT_EQ(dir.back(), 0);
  EXPECT_EQ(rig.bytes(key, 3), (std::vector<std::uint8_t>{1, 2, 3}));
}

TEST(FwCfgTest, ByteWritesAreDataWritesAndIgnored) {
  FwCfgRig rig;
  rig.select(FwCfg::kNbCpus);
  const std::uint8_t b = 9;
  rig.dev.write(1, std::span<const std::uint8_t>(&b, 1));
  rig.dev.write(0, std::span<const std::uint8_t>(&b, 1));
  EXPECT_EQ(rig.byte(), 3);  // neither selected anything nor moved the offset
  EXPECT_EQ(rig.dev.stats().ignored_writes, 2u);
}

TEST(FwCfgTest, WideAccessesAreNotDecoded) {
  FwCfgRig rig;
  rig.select(FwCfg::kNbCpus);
  std::uint8_t wide[4] = {0, 0, 0, 0};
  rig.dev.read(0, wide);
  EXPECT_EQ(wide[0], 0xff);
  EXPECT_EQ(wide[3], 0xff);
  std::uint8_t two[2] = {0, 0};
  rig.dev.read(0, two);
  rig.dev.write(0, wide);                               // 32-bit selector write
  rig.dev.write(1, std::span<const std::uint8_t>(two));  // 16-bit write at the data port
  EXPECT_EQ(rig.byte(), 3);                             // still CPU count, offset 0
  EXPECT_EQ(rig.dev.stats().bad_accesses, 4u);
}

// The run report's "fw_cfg" object: the keys and types --stats always had.
TEST(FwCfgTest, ReportsItsCountersUnderFwCfg) {
  FwCfgRig rig;
  rig.select(FwCfg::kNbCpus);
  rig.byte();
  minivmm::testing::MapReportWriter report;
  rig.dev.report(report);
  EXPECT_EQ(rig.dev.report_key(), "fw_cfg");
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{"bad_accesses number", "data_reads number",
                                   "ignored_writes number", "reads_past_end number",
                                   "selects number", "unknown_selects number"}));
  EXPECT_EQ(report.counter("selects"), 1u);
  EXPECT_EQ(report.counter("data_reads"), 1u);
}

}  // namespace
