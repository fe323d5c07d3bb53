// What a vCPU does with each KVM exit (vmm/vcpu/vcpu_exits.h), on a kvm_run laid out here as KVM
// lays it out (the run struct, then the port I/O data page), so no /dev/kvm is needed. Pins the
// answers the exit dispatch gave before it moved out of Vcpu: bounded string I/O, all-ones reads
// of unmapped MMIO, and the exit code, reason and crash report of every stopping exit.
#include "vmm/vcpu/vcpu_exits.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace minivmm::vmm {
namespace {

constexpr std::size_t kPage = 4096;

// A kvm_run mapping of two pages: KVM puts port I/O data at data_offset, one page in. The
// vector's storage comes from operator new, aligned enough for kvm_run's 8-byte fields.
class KvmRunPages {
 public:
  KvmRunPages() : bytes_(2 * kPage) {}
  kvm_run& run() { return *reinterpret_cast<kvm_run*>(bytes_.data()); }
  std::size_t size() const { return bytes_.size(); }
  std::uint8_t* at(std::size_t offset) { return bytes_.data() + offset; }

 private:
  std::vector<std::uint8_t> bytes_;
};

class RecordingPorts final : public devices::PortIoDevice {
 public:
  std::string_view name() const noexcept override { return "recording"; }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override {
    for (auto& b : data) b = static_cast<std::uint8_t>(0x40 + reads_);
    ++reads_;
    offsets_.push_back(offset);
  }
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override {
    written_.insert(written_.end(), data.begin(), data.end());
    offsets_.push_back(offset);
  }
  int reads_ = 0;
  std::vector<std::uint8_t> written_;
  std::vector<std::uint16_t> offsets_;
};

class RecordingMmio final : public devices::MmioDevice {
 public:
  std::string_view name() const noexcept override { return "mmio"; }
  void read(std::uint64_t, std::span<std::uint8_t> data) noexcept override {
    for (auto& b : data) b = 0x5a;
  }
  void write(std::uint64_t offset, std::span<const std::uint8_t> data) noexcept override {
    last_offset_ = offset;
    last_width_ = data.size();
  }
  std::uint64_t last_offset_ = ~0ull;
  std::size_t last_width_ = 0;
};

void set_io(kvm_run& run, std::uint8_t direction, std::uint16_t port, std::uint8_t size,
            std::uint32_t count, std::uint64_t data_offset) {
  run.exit_reason = KVM_EXIT_IO;
  run.io.direction = direction;
  run.io.port = port;
  run.io.size = size;
  run.io.count = count;
  run.io.data_offset = data_offset;
}

TEST(VcpuExitsTest, ClassifiesEachReasonIntoItsCounter) {
  EXPECT_EQ(classify_exit(KVM_EXIT_IO), VcpuExit::kIo);
  EXPECT_EQ(classify_exit(KVM_EXIT_MMIO), VcpuExit::kMmio);
  EXPECT_EQ(classify_exit(KVM_EXIT_HLT), VcpuExit::kHlt);
  EXPECT_EQ(classify_exit(KVM_EXIT_SHUTDOWN), VcpuExit::kShutdown);
  EXPECT_EQ(classify_exit(KVM_EXIT_INTERNAL_ERROR), VcpuExit::kInternalError);
  EXPECT_EQ(classify_exit(KVM_EXIT_FAIL_ENTRY), VcpuExit::kFailEntry);
  EXPECT_EQ(classify_exit(KVM_EXIT_SYSTEM_EVENT), VcpuExit::kSystemEvent);
  EXPECT_EQ(classify_exit(KVM_EXIT_INTR), VcpuExit::kInterrupted);
  EXPECT_EQ(classify_exit(KVM_EXIT_DEBUG), VcpuExit::kOther);
  EXPECT_EQ(vcpu_exit_name(VcpuExit::kInternalError), "internal_error");
  EXPECT_EQ(vcpu_exit_name(VcpuExit::kCount), "?");
}

TEST(VcpuExitsTest, StringOutWritesEveryAccessAtTheDevicesOffset) {
  KvmRunPages pages;
  devices::IoBus io;
  RecordingPorts dev;
  io.attach(0x3f8, 8, dev);
  set_io(pages.run(), KVM_EXIT_IO_OUT, 0x3f9, 2, 3, kPage);
  const std::uint8_t data[] = {1, 2, 3, 4, 5, 6};
  std::memcpy(pages.at(kPage), data, sizeof data);

  handle_io_exit(pages.run(), pages.size(), io);

  EXPECT_EQ(dev.written_, std::vector<std::uint8_t>(data, data + 6));
  EXPECT_EQ(dev.offsets_, (std::vector<std::uint16_t>{1, 1, 1}));
}

TEST(VcpuExitsTest, InAnswersInPlaceAndUnmappedPortsReadAllOnes) {
  KvmRunPages pages;
  devices::IoBus io;
  RecordingPorts dev;
  io.attach(0x60, 1, dev);
  set_io(pages.run(), KVM_EXIT_IO_IN, 0x60, 1, 2, kPage);
  handle_io_exit(pages.run(), pages.size(), io);
  EXPECT_EQ(*pages.at(kPage), 0x40);
  EXPECT_EQ(*pages.at(kPage + 1), 0x41);

  set_io(pages.run(), KVM_EXIT_IO_IN, 0x61, 4, 1, kPage);
  handle_io_exit(pages.run(), pages.size(), io);
  EXPECT_EQ(*pages.at(kPage + 3), 0xff);
}

TEST(VcpuExitsTest, StringIoStopsAtTheEndOfTheRunMapping) {
  KvmRunPages pages;
  devices::IoBus io;
  RecordingPorts dev;
  io.attach(0x80, 1, dev);
  // Four 4-byte accesses claimed, room for two before the mapping ends.
  set_io(pages.run(), KVM_EXIT_IO_OUT, 0x80, 4, 4, pages.size() - 8);
  handle_io_exit(pages.run(), pages.size(), io);
  EXPECT_EQ(dev.offsets_.size(), 2u);
}

TEST(VcpuExitsTest, MmioWithNoBusReadsAllOnesAndIsUnmapped) {
  KvmRunPages pages;
  kvm_run& run = pages.run();
  run.exit_reason = KVM_EXIT_MMIO;
  run.mmio.phys_addr = 0xd0000000;
  run.mmio.len = 4;
  run.mmio.is_write = 0;
  EXPECT_FALSE(handle_mmio_exit(run, nullptr));
  for (auto b : run.mmio.data) EXPECT_EQ(b, 0xff);

  run.mmio.is_write = 1;
  std::memset(run.mmio.data, 0x11, sizeof run.mmio.data);
  EXPECT_FALSE(handle_mmio_exit(run, nullptr));
  EXPECT_EQ(run.mmio.data[0], 0x11) << "a write leaves the data alone";
}

TEST(VcpuExitsTest, MmioGoesToTheBusWithItsLengthClamped) {
  KvmRunPages pages;
  devices::MmioBus bus;
  RecordingMmio dev;
  bus.attach(0xd0000000, 0x1000, dev);
  kvm_run& run = pages.run();
  run.exit_reason = KVM_EXIT_MMIO;
  run.mmio.phys_addr = 0xd0000010;
  run.mmio.len = 4;
  run.mmio.is_write = 0;
  EXPECT_TRUE(handle_mmio_exit(run, &bus));
  EXPECT_EQ(run.mmio.data[3], 0x5a);

  run.mmio.is_write = 1;
  run.mmio.len = 200;  // more than data holds: clamped to 8
  EXPECT_TRUE(handle_mmio_exit(run, &bus));
  EXPECT_EQ(dev.last_offset_, 0x10u);
  EXPECT_EQ(dev.last_width_, 8u);
}

TEST(VcpuExitsTest, ATripleFaultStopsWithItsCodeAndACrashReport) {
  KvmRunPages pages;
  pages.run().exit_reason = KVM_EXIT_SHUTDOWN;
  const VcpuStop stop = stop_for_exit(pages.run());
  EXPECT_EQ(stop.code, ExitCode::kTripleFault);
  EXPECT_EQ(stop.why, "guest triple fault");
  EXPECT_EQ(stop.crash_headline, "guest triple fault (KVM_EXIT_SHUTDOWN)");
}

TEST(VcpuExitsTest, AnEmulationFailureSaysSoInReasonAndReport) {
  KvmRunPages pages;
  pages.run().exit_reason = KVM_EXIT_INTERNAL_ERROR;
  pages.run().internal.suberror = KVM_INTERNAL_ERROR_EMULATION;
  const VcpuStop stop = stop_for_exit(pages.run());
  EXPECT_EQ(stop.code, ExitCode::kGuestUnsupported);
  EXPECT_EQ(stop.why,
            "KVM internal error, suberror 1 (emulation failure: this host's KVM cannot emulate "
            "the instruction)");
  EXPECT_EQ(stop.crash_headline, stop.why);
}

TEST(VcpuExitsTest, AFailedEntryGivesTheHardwareReasonInHex) {
  KvmRunPages pages;
  pages.run().exit_reason = KVM_EXIT_FAIL_ENTRY;
  pages.run().fail_entry.hardware_entry_failure_reason = 0x21;
  const VcpuStop stop = stop_for_exit(pages.run());
  EXPECT_EQ(stop.code, ExitCode::kGuestUnsupported);
  EXPECT_EQ(stop.why, "KVM entry failed, hardware reason 0x21");
  EXPECT_EQ(stop.crash_headline, stop.why);
}

TEST(VcpuExitsTest, TheGuestsOwnStopsHaveNoCrashReport) {
  KvmRunPages pages;
  pages.run().exit_reason = KVM_EXIT_SYSTEM_EVENT;
  pages.run().system_event.type = KVM_SYSTEM_EVENT_RESET;
  VcpuStop stop = stop_for_exit(pages.run());
  EXPECT_EQ(stop.code, ExitCode::kOk);
  EXPECT_EQ(stop.why, "guest reset");
  EXPECT_FALSE(stop.crash_headline);

  pages.run().system_event.type = KVM_SYSTEM_EVENT_SHUTDOWN;
  stop = stop_for_exit(pages.run());
  EXPECT_EQ(stop.code, ExitCode::kOk);
  EXPECT_EQ(stop.why, "guest system event 1");

  pages.run().exit_reason = KVM_EXIT_HLT;
  stop = stop_for_exit(pages.run());
  EXPECT_EQ(stop.code, ExitCode::kGuestUnsupported);
  EXPECT_EQ(stop.why, "guest halted with no way to wake up");
  EXPECT_FALSE(stop.crash_headline);
}

TEST(VcpuExitsTest, AnUnknownExitStopsTheRunAndIsReported) {
  KvmRunPages pages;
  pages.run().exit_reason = KVM_EXIT_DEBUG;
  const VcpuStop stop = stop_for_exit(pages.run());
  EXPECT_EQ(stop.code, ExitCode::kGuestUnsupported);
  EXPECT_EQ(stop.why, "unexpected KVM exit reason 4");
  EXPECT_EQ(stop.crash_headline, stop.why);
}

}  // namespace
}  // namespace minivmm::vmm
