// pc-testdev (QEMU hw/misc/pc-testdev.c): the echo register, the flush-page port and the IRQ
// ports, each checked against QEMU's behaviour, bad accesses counted; and PcTestdev, which owns
// the parts and reports them as one.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "devices/testdev/pc_testdev.h"
#include "devices/testdev/pc_testdev_flush_page.h"
#include "devices/testdev/pc_testdev_irq.h"
#include "devices/testdev/pc_testdev_port.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::IrqLine;
using minivmm::devices::PcTestdev;
using minivmm::devices::PcTestdevFlushPage;
using minivmm::devices::PcTestdevIomem;
using minivmm::devices::PcTestdevIrq;
using minivmm::devices::PcTestdevPort;
using minivmm::testing::FakeIrqLine;
using minivmm::testing::MapReportWriter;

std::vector<std::uint8_t> rd(minivmm::devices::PortIoDevice& d, std::uint16_t off, std::size_t w) {
  std::vector<std::uint8_t> b(w, 0x5a);
  d.read(off, b);
  return b;
}

TEST(PcTestdevPortTest, LongWriteEchoes) {
  PcTestdevPort p;
  p.write(0, std::vector<std::uint8_t>{0x78, 0x56, 0x34, 0x12});
  EXPECT_EQ(p.value(), 0x12345678u);
  EXPECT_EQ(rd(p, 0, 4), (std::vector<std::uint8_t>{0x78, 0x56, 0x34, 0x12}));
}

TEST(PcTestdevPortTest, ByteAndWordWritesReplaceOnlyTheirBytes) {
  PcTestdevPort p;
  p.write(0, std::vector<std::uint8_t>{0x11, 0x22, 0x33, 0x44});
  p.write(0, std::vector<std::uint8_t>{0xaa});        // realmode.flat: outb %al, $0xe0
  p.write(2, std::vector<std::uint8_t>{0xbb, 0xcc});  // word at offset 2
  EXPECT_EQ(p.value(), 0xccbb22aau);
  EXPECT_EQ(rd(p, 0, 1), (std::vector<std::uint8_t>{0xaa}));
  EXPECT_EQ(rd(p, 0, 2), (std::vector<std::uint8_t>{0xaa, 0x22}));
  EXPECT_EQ(rd(p, 3, 1), (std::vector<std::uint8_t>{0xcc}));
}

TEST(PcTestdevPortTest, BytesPastTheRegisterAreDroppedAndReadZero) {
  PcTestdevPort p;
  p.write(2, std::vector<std::uint8_t>{1, 2, 3, 4});  // QEMU's mask keeps bytes 2 and 3 only
  EXPECT_EQ(p.value(), 0x02010000u);
  EXPECT_EQ(rd(p, 2, 4), (std::vector<std::uint8_t>{1, 2, 0, 0}));
}

TEST(PcTestdevPortTest, OddWidthsAreCountedAndIgnored) {
  PcTestdevPort p;
  p.write(0, std::vector<std::uint8_t>{1, 2, 3});
  EXPECT_EQ(rd(p, 0, 3), (std::vector<std::uint8_t>{0xff, 0xff, 0xff}));
  EXPECT_EQ(p.value(), 0u);
  EXPECT_EQ(p.bad_accesses(), 2u);
}

TEST(PcTestdevFlushPageTest, LongWriteFlushesTheContainingPage) {
  std::vector<std::uint64_t> pages;
  PcTestdevFlushPage f([&](std::uint64_t gpa) { pages.push_back(gpa); });
  f.write(0, std::vector<std::uint8_t>{0x34, 0x12, 0x40, 0x00});  // 0x401234
  EXPECT_EQ(pages, (std::vector<std::uint64_t>{0x401000}));
  EXPECT_EQ(f.flushes(), 1u);
}

TEST(PcTestdevFlushPageTest, NarrowWritesAndReadsAreNotDecoded) {
  std::vector<std::uint64_t> pages;
  PcTestdevFlushPage f([&](std::uint64_t gpa) { pages.push_back(gpa); });
  f.write(0, std::vector<std::uint8_t>{0x00, 0x10});
  f.write(0, std::vector<std::uint8_t>{0x00});
  f.write(2, std::vector<std::uint8_t>{0, 0, 0, 0});  // misaligned: not QEMU's 0xe4
  EXPECT_EQ(rd(f, 0, 4), (std::vector<std::uint8_t>{0xff, 0xff, 0xff, 0xff}));
  EXPECT_TRUE(pages.empty());
  EXPECT_EQ(f.bad_accesses(), 4u);
}

struct IrqRig {
  std::array<FakeIrqLine, PcTestdevIrq::kLines> fakes;
  std::array<IrqLine*, PcTestdevIrq::kLines> wires() {
    std::array<IrqLine*, PcTestdevIrq::kLines> w{};
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = &fakes[i];
    return w;
  }
};

TEST(PcTestdevIrqTest, NonZeroByteRaisesAndZeroLowersTheLine) {
  IrqRig rig;
  PcTestdevIrq dev(rig.wires());
  dev.write(14, std::vector<std::uint8_t>{0x80});  // any non-zero value is "high" (!!data)
  EXPECT_TRUE(rig.fakes[14].level());
  EXPECT_TRUE(dev.level(14));
  dev.write(14, std::vector<std::uint8_t>{0});
  EXPECT_FALSE(rig.fakes[14].level());
  EXPECT_EQ(rig.fakes[14].levels(), (std::vector<bool>{true, false}));
  EXPECT_EQ(rig.fakes[13].levels().size(), 0u);
  EXPECT_EQ(dev.stats().raises, 1u);
  EXPECT_EQ(dev.stats().lowers, 1u);
}

TEST(PcTestdevIrqTest, EveryLineFrom0To23IsReachable) {
  IrqRig rig;
  PcTestdevIrq dev(rig.wires());
  for (std::uint16_t l = 0; l < PcTestdevIrq::kLines; ++l) {
    dev.write(l, std::vector<std::uint8_t>{1});
  }
  for (const auto& f : rig.fakes) EXPECT_TRUE(f.level());
}

TEST(PcTestdevIrqTest, LinePast23WideWritesAndReadsAreCounted) {
  IrqRig rig;
  PcTestdevIrq dev(rig.wires());
  dev.write(24, std::vector<std::uint8_t>{1});
  dev.write(0xffff, std::vector<std::uint8_t>{1});
  dev.write(3, std::vector<std::uint8_t>{1, 1});
  EXPECT_EQ(rd(dev, 3, 1), (std::vector<std::uint8_t>{0xff}));
  EXPECT_FALSE(dev.level(24));
  for (const auto& f : rig.fakes) EXPECT_EQ(f.levels().size(), 0u);
  EXPECT_EQ(dev.stats().bad_accesses, 4u);
}

TEST(PcTestdevIrqTest, UnwiredLineIsCountedNotDereferenced) {
  PcTestdevIrq dev(std::array<IrqLine*, PcTestdevIrq::kLines>{});
  dev.write(5, std::vector<std::uint8_t>{1});
  EXPECT_TRUE(dev.level(5));
  EXPECT_EQ(dev.stats().unwired, 1u);
}

// A guest with 1 MiB of RAM, as PcTestdev's flush callback sees it.
bool flush_in_first_mib(std::vector<std::uint64_t>& pages, std::uint64_t page) {
  if (page >= (1u << 20)) return false;
  pages.push_back(page);
  return true;
}

TEST(PcTestdevTest, PagesOutsideRamAreFlushedByNobodyAndCounted) {
  IrqRig rig;
  std::vector<std::uint64_t> pages;
  PcTestdev dev(rig.wires(), [&](std::uint64_t page) { return flush_in_first_mib(pages, page); });
  dev.flush_page().write(0, std::vector<std::uint8_t>{0x00, 0x30, 0x00, 0x00});  // 0x3000
  dev.flush_page().write(0, std::vector<std::uint8_t>{0x00, 0x00, 0x00, 0xff});  // 0xff000000
  EXPECT_EQ(pages, (std::vector<std::uint64_t>{0x3000}));
  EXPECT_EQ(dev.flush_page().flushes(), 2u);  // both decoded: QEMU counts no differently
  EXPECT_EQ(dev.page_flushes_outside_ram(), 1u);
}

TEST(PcTestdevTest, PartsAreWiredToTheLinesGiven) {
  IrqRig rig;
  PcTestdev dev(rig.wires(), nullptr);
  dev.irq().write(9, std::vector<std::uint8_t>{1});
  EXPECT_TRUE(rig.fakes[9].level());
  dev.echo().write(0, std::vector<std::uint8_t>{0x78, 0x56, 0x34, 0x12});
  EXPECT_EQ(dev.echo().value(), 0x12345678u);
  dev.flush_page().write(0, std::vector<std::uint8_t>{0, 0x10, 0, 0});  // no callback: nothing
  EXPECT_EQ(dev.page_flushes_outside_ram(), 0u);
}

// The run report's "pc_testdev" object: every part's counters, as --stats always had them.
TEST(PcTestdevTest, ReportsEveryPartUnderPcTestdev) {
  IrqRig rig;
  std::vector<std::uint64_t> pages;
  PcTestdev dev(rig.wires(), [&](std::uint64_t page) { return flush_in_first_mib(pages, page); });
  dev.echo().write(0, std::vector<std::uint8_t>{1, 2, 3});               // bad width
  dev.flush_page().write(0, std::vector<std::uint8_t>{0, 0, 0, 0x80});  // outside RAM
  dev.flush_page().write(0, std::vector<std::uint8_t>{0, 0x10, 0, 0});
  dev.irq().write(4, std::vector<std::uint8_t>{1});
  dev.irq().write(4, std::vector<std::uint8_t>{0});
  dev.irq().write(4, std::vector<std::uint8_t>{0});
  std::uint8_t word[2] = {};
  dev.iomem().write(0, word);
  dev.iomem().read(PcTestdevIomem::kSize - 1, word);  // straddles the end
  MapReportWriter report;
  dev.report(report);
  EXPECT_EQ(dev.report_key(), "pc_testdev");
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{
                "echo_bad_accesses number", "flush_bad_accesses number",
                "iomem_bad_accesses number", "iomem_reads number", "iomem_writes number",
                "irq_bad_accesses number", "irq_lowers number", "irq_raises number",
                "page_flushes number", "page_flushes_outside_ram number"}));
  EXPECT_EQ(report.counter("echo_bad_accesses"), 1u);
  EXPECT_EQ(report.counter("page_flushes"), 2u);
  EXPECT_EQ(report.counter("page_flushes_outside_ram"), 1u);
  EXPECT_EQ(report.counter("irq_raises"), 1u);
  EXPECT_EQ(report.counter("irq_lowers"), 2u);
  EXPECT_EQ(report.counter("iomem_writes"), 1u);
  EXPECT_EQ(report.counter("iomem_reads"), 1u);
  EXPECT_EQ(report.counter("iomem_bad_accesses"), 1u);
}

}  // namespace
