// kvm-unit-tests' devices, only with --testdev (board_layout.h has their places): QEMU's fw_cfg
// (the CPU count and RAM size the suite's library reads) and pc-testdev (an echo port, a page
// flush, 24 lines that raise and lower GSIs 0-23, and a 64 KiB MMIO buffer). Without them, a
// guest has no way to drive arbitrary GSIs.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "devices/bus/io_bus.h"
#include "devices/bus/mmio_bus.h"
#include "devices/testdev/fw_cfg.h"
#include "devices/testdev/pc_testdev_flush_page.h"
#include "devices/testdev/pc_testdev_iomem.h"
#include "devices/testdev/pc_testdev_irq.h"
#include "devices/testdev/pc_testdev_port.h"
#include "vmm/kvm/kvm_irq_line.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/config.h"

namespace minivmm::vmm {

class TestdevBoard {
 public:
  // Throws VmmError when KVM refuses a line.
  TestdevBoard(const Config& config, const Vm& vm, devices::IoBus& io, devices::MmioBus& mmio);
  TestdevBoard(const TestdevBoard&) = delete;
  TestdevBoard& operator=(const TestdevBoard&) = delete;

  void report(nlohmann::json& devices) const;

 private:
  void flush_guest_page(std::uint64_t page_gpa) noexcept;

  const Vm& vm_;
  devices::FwCfg fw_cfg_;
  devices::PcTestdevPort echo_;
  devices::PcTestdevFlushPage flush_;
  devices::PcTestdevIomem iomem_;
  std::array<std::unique_ptr<KvmIrqLine>, devices::PcTestdevIrq::kLines> lines_;
  std::unique_ptr<devices::PcTestdevIrq> irq_;
  std::atomic<std::uint64_t> flushes_outside_ram_{0};
};

}  // namespace minivmm::vmm
