// QEMU's pc-testdev (hw/misc/pc-testdev.c) as one device: the four parts kvm-unit-tests talks
// to, each attached on its own by the VMM, and the one object of counters the run report has
// for them all ("pc_testdev"). The parts:
//  - echo(): the 32-bit echo register (PcTestdevPort), attached twice (at 0xe0 and 0xe8);
//  - flush_page(): the flush-page port (PcTestdevFlushPage);
//  - irq(): the 24 ISA interrupt line ports (PcTestdevIrq);
//  - iomem(): the 64 KiB MMIO window (PcTestdevIomem).
// Each part sees offsets only; where it goes is the board's (vmm/machine/pc_board.cc: QEMU's
// addresses, the ones kvm-unit-tests expects).
//
// Flushing a page is the VMM's work (it owns guest RAM): `flush` does it and says whether the
// page was in RAM. One outside RAM is ignored, as QEMU's cpu_physical_memory_map makes it, and
// counted here (page_flushes_outside_ram).
//
// Threads: the parts' (any vCPU thread); `flush` runs on the writing vCPU thread and must be
// thread-safe; report() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/irq_line.h"
#include "devices/bus/report_writer.h"
#include "devices/testdev/pc_testdev_flush_page.h"
#include "devices/testdev/pc_testdev_iomem.h"
#include "devices/testdev/pc_testdev_irq.h"
#include "devices/testdev/pc_testdev_port.h"

namespace minivmm::devices {

class PcTestdev final : public ReportingDevice, public StatefulDevice {
 public:
  // Makes the 4 KiB page at `page_gpa` fault into KVM again; false: not in guest RAM, so
  // nothing was done.
  using FlushPage = std::function<bool(std::uint64_t page_gpa)>;

  // `lines[n]` is ISA interrupt line n (null: nothing behind it); they must outlive the device.
  PcTestdev(const std::array<IrqLine*, PcTestdevIrq::kLines>& lines, FlushPage flush);
  PcTestdev(const PcTestdev&) = delete;
  PcTestdev& operator=(const PcTestdev&) = delete;

  PcTestdevPort& echo() noexcept { return echo_; }
  PcTestdevFlushPage& flush_page() noexcept { return flush_page_; }
  PcTestdevIrq& irq() noexcept { return irq_; }
  PcTestdevIomem& iomem() noexcept { return iomem_; }

  // Decoded flushes whose page `flush` found outside guest RAM.
  std::uint64_t page_flushes_outside_ram() const noexcept {
    return flushes_outside_ram_.load(std::memory_order_relaxed);
  }

  // ReportingDevice: every part's counters in one object, "pc_testdev", named by part
  // (echo_bad_accesses, page_flushes, irq_raises, iomem_reads, ...).
  std::string_view report_key() const noexcept override { return "pc_testdev"; }
  void report(ReportWriter& out) const override;

  // StatefulDevice (pc_testdev_state.cc): the echo register, the IRQ levels (driven again on
  // load), the 64 KiB iomem buffer and every part's counters.
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  const FlushPage flush_;
  std::atomic<std::uint64_t> flushes_outside_ram_{0};
  PcTestdevPort echo_;
  PcTestdevFlushPage flush_page_;
  PcTestdevIrq irq_;
  PcTestdevIomem iomem_;
};

}  // namespace minivmm::devices
