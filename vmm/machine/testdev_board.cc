#include "vmm/machine/testdev_board.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "devices/log/log.h"
#include "vmm/machine/board_layout.h"

namespace minivmm::vmm {
namespace {

constexpr std::uint64_t kPageBytes = 4096;

}  // namespace

TestdevBoard::TestdevBoard(const Config& config, const Vm& vm, devices::IoBus& io,
                           devices::MmioBus& mmio)
    : vm_(vm),
      fw_cfg_(devices::FwCfgConfig{config.memory_bytes, static_cast<std::uint16_t>(config.cpus),
                                   static_cast<std::uint16_t>(config.cpus)}),
      flush_([this](std::uint64_t page) { flush_guest_page(page); }) {
  io.attach(board::kFwCfg.base, board::kFwCfg.count, fw_cfg_);
  io.attach(board::kTestdevEcho.base, board::kTestdevEcho.count, echo_);
  io.attach(board::kTestdevEchoBytes.base, board::kTestdevEchoBytes.count, echo_);
  io.attach(board::kTestdevFlushPage.base, board::kTestdevFlushPage.count, flush_);
  // Level changes through KVM_IRQ_LINE: GSIs 0-15 reach both the PIC and the IOAPIC, 16-23
  // the IOAPIC only (KVM's default routing, as QEMU's ISA bus wires pc-testdev).
  std::array<devices::IrqLine*, devices::PcTestdevIrq::kLines> wires{};
  for (std::size_t gsi = 0; gsi < wires.size(); ++gsi) {
    lines_[gsi] =
        std::make_unique<KvmIrqLine>(vm, static_cast<std::uint32_t>(gsi), IrqInject::kIoctl);
    wires[gsi] = lines_[gsi].get();
  }
  irq_ = std::make_unique<devices::PcTestdevIrq>(wires);
  io.attach(board::kTestdevIrq.base, board::kTestdevIrq.count, *irq_);
  mmio.attach(board::kTestdevIomem.base, board::kTestdevIomem.size, iomem_);
}

void TestdevBoard::flush_guest_page(std::uint64_t page_gpa) noexcept {
  const devices::GuestMemory mem = vm_.memory();
  if (!mem.contains(page_gpa, kPageBytes)) {
    // QEMU maps nothing for an address outside RAM and does nothing; so do we, counted.
    flushes_outside_ram_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // QEMU takes the page away (PROT_NONE) and gives it back. Read-only is enough to make the
  // kernel invalidate KVM's mapping of it (mprotect runs the MMU notifiers), and another vCPU
  // that reads the page in between does not fault.
  void* host = mem.slice(page_gpa, kPageBytes).data();
  if (::mprotect(host, kPageBytes, PROT_READ) != 0 ||
      ::mprotect(host, kPageBytes, PROT_READ | PROT_WRITE) != 0) {
    log::warn("pc-testdev: flush of page {:#x}: mprotect: {}", page_gpa, std::strerror(errno));
  }
}

void TestdevBoard::report(nlohmann::json& devices) const {
  const auto fc = fw_cfg_.stats();
  devices["fw_cfg"] = {{"selects", fc.selects},
                       {"unknown_selects", fc.unknown_selects},
                       {"data_reads", fc.data_reads},
                       {"reads_past_end", fc.reads_past_end},
                       {"ignored_writes", fc.ignored_writes},
                       {"bad_accesses", fc.bad_accesses}};
  const auto ti = irq_->stats();
  devices["pc_testdev"] = {
      {"echo_bad_accesses", echo_.bad_accesses()},
      {"page_flushes", flush_.flushes()},
      {"page_flushes_outside_ram", flushes_outside_ram_.load(std::memory_order_relaxed)},
      {"flush_bad_accesses", flush_.bad_accesses()},
      {"irq_raises", ti.raises},
      {"irq_lowers", ti.lowers},
      {"irq_bad_accesses", ti.bad_accesses},
      {"iomem_reads", iomem_.reads()},
      {"iomem_writes", iomem_.writes()},
      {"iomem_bad_accesses", iomem_.bad_accesses()}};
}

}  // namespace minivmm::vmm
