// The PC board: the port and MMIO buses, the interrupt lines, the console's host sink, and the
// legacy devices at their places (board_layout.h): COM1, the RTC, the i8042, isa-debug-exit,
// the POST port and the PIT (pit_assembly.h); kvm-unit-tests' devices with --testdev
// (testdev_board.h). virtio devices sit on its MMIO bus but are built apart (virtio_board.h).
//
// Threads: built on the main thread; the vCPUs reach the devices through the buses; report()
// on the loop thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "devices/bus/io_bus.h"
#include "devices/bus/mmio_bus.h"
#include "devices/host/stdout_sink.h"
#include "devices/pc/debug_exit.h"
#include "devices/pc/i8042.h"
#include "devices/pc/mc146818_rtc.h"
#include "devices/pc/post_port.h"
#include "devices/pc/uart_16550.h"
#include "vmm/boot/loaded_kernel.h"
#include "vmm/kvm/kvm_irq_line.h"
#include "vmm/machine/config.h"
#include "vmm/machine/machine_loop.h"
#include "vmm/machine/pit_assembly.h"
#include "vmm/machine/testdev_board.h"
#include "vmm/machine/vm_handles.h"

namespace minivmm::vmm {

class PcBoard {
 public:
  struct Wiring {
    const Config& config;
    VmHandles& vm;
    MachineLoop& loop;
    const LoadedKernel& kernel;
    // The guest ends the run: debug-exit's status, the i8042's reset (any thread).
    std::function<void(int status, const std::string& why)> stop;
  };

  // Throws VmmError when KVM refuses a line or the PIT.
  explicit PcBoard(const Wiring& w);
  PcBoard(const PcBoard&) = delete;
  PcBoard& operator=(const PcBoard&) = delete;

  devices::IoBus& io() noexcept { return io_; }
  devices::MmioBus& mmio() noexcept { return mmio_; }
  devices::StdoutSink& console_sink() noexcept { return sink_; }
  devices::Uart16550& uart() noexcept { return uart_; }
  PitAssembly& pit() noexcept { return *pit_; }
  const PitAssembly& pit() const noexcept { return *pit_; }

  // Every device's counters under its key in the report's "devices" object.
  void report(nlohmann::json& devices) const;

 private:
  devices::IoBus io_;
  devices::MmioBus mmio_;
  devices::StdoutSink sink_;
  KvmIrqLine keyboard_irq_;
  KvmIrqLine com1_irq_;
  KvmIrqLine rtc_irq_;
  KvmIrqLine mouse_irq_;
  devices::Uart16550 uart_;
  devices::DebugExit debug_exit_;
  devices::PostPort post_port_;
  devices::I8042 i8042_;
  devices::Mc146818Rtc rtc_;
  std::unique_ptr<PitAssembly> pit_;
  std::unique_ptr<TestdevBoard> testdev_;  // --testdev
};

}  // namespace minivmm::vmm
