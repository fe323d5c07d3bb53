// The PC board: the port and MMIO buses, the interrupt lines, the console's host sink, and
// every legacy device at its place. The board is a table (pc_board.cc, board_slots()): one
// slot per device, saying where it sits (its port windows, MMIO window and GSIs) and how it is
// made; the test devices' slots are used only with --testdev. Adding a device is its folder,
// one slot, and its tests (docs/architecture.md, "Adding a device").
//
// The PIT's slot builds a PitAssembly (the tick-delivery matrix); virtio devices sit on the
// MMIO bus but are built apart (virtio_board.h), at the windows board_layout.h gives them.
//
// Threads: built on the main thread; the vCPUs reach the devices through the buses; report()
// on the loop thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "devices/bus/device_state.h"
#include "devices/bus/pausable_device.h"
#include "devices/bus/io_bus.h"
#include "devices/bus/mmio_bus.h"
#include "devices/bus/report_writer.h"
#include "devices/host/stdout_sink.h"
#include "devices/pc/acpi_pm.h"
#include "devices/pc/mc146818_rtc.h"
#include "devices/pc/uart_16550.h"
#include "vmm/boot/loaded_kernel.h"
#include "vmm/kvm/kvm_irq_line.h"
#include "vmm/machine/board_layout.h"
#include "vmm/machine/config.h"
#include "vmm/machine/machine_loop.h"
#include "vmm/machine/pit_assembly.h"
#include "vmm/machine/vm_handles.h"

namespace minivmm::vmm {

class PcBoard;

// What a slot's maker gets: the configuration, the loop and its clocks, the console sink,
// interrupt lines by GSI, and the board's ways to end the run or flush a guest page.
struct BoardContext {
  const Config& config;
  MachineLoop& loop;
  VmHandles& vm;
  devices::ByteSink& console;
  const LoadedKernel& kernel;
  // The guest ends the run: debug-exit's status, the i8042's reset (any thread).
  std::function<void(int status, const std::string& why)> stop;
  // The guest asked for ACPI S3 (on the writing vCPU's thread; nullptr: S3 is ignored).
  std::function<void()> suspend;
  PcBoard& board;

  // The board's line to `gsi` (one per GSI and way of injecting, made on first use).
  devices::IrqLine& irq(std::uint32_t gsi, IrqInject inject = IrqInject::kIrqfd);
};

// A device made by its slot: the device (it reports itself), the handler of each of the
// slot's port windows in order, the handler of its MMIO window, and its snapshot participation
// (devices/bus/device_state.h): a slot whose device declares none fails the board's start-up
// (check_snapshot_participation()). A device the board does not own (the PIT is its
// PitAssembly's) comes as `borrowed`.
struct Mounted {
  std::unique_ptr<devices::ReportingDevice> owned;
  const devices::ReportingDevice* borrowed = nullptr;
  std::vector<devices::PortIoDevice*> ports;
  devices::MmioDevice* mmio = nullptr;
  devices::SnapshotParticipation snapshot;

  // The common case: one object that is the device, its report and its one port window. A
  // device that declares no participation does not build here.
  template <typename Device>
  static Mounted one(std::unique_ptr<Device> device) {
    Mounted m;
    m.ports = {device.get()};
    m.snapshot = devices::participation_of(*device);
    m.owned = std::move(device);
    return m;
  }
  const devices::ReportingDevice& device() const { return owned ? *owned : *borrowed; }
};

struct BoardSlot {
  std::string_view name;
  std::vector<board::Ports> ports;     // its windows, in the order of Mounted::ports
  std::optional<board::Window> mmio;   // its MMIO window
  std::vector<std::uint32_t> gsis;     // the lines it drives (the maker asks for them)
  bool testdev = false;                // only with --testdev
  Mounted (*make)(BoardContext& ctx, const BoardSlot& slot);
};

// Throws VmmError naming the slot when it mounted a device that declares no snapshot
// participation: the snapshot would skip it and a restore would hand the guest a reset device.
void check_snapshot_participation(const BoardSlot& slot, const Mounted& mounted);

// The board's table, in mounting order.
const std::vector<BoardSlot>& board_slots();
// The first port of the slot named `name` (the firmware tables describe some devices by their
// port), or nullopt without one.
std::optional<std::uint16_t> board_port_of(std::string_view name);

class PcBoard {
 public:
  // Mounts every slot the configuration asks for. Throws VmmError when KVM refuses a line or
  // the PIT.
  PcBoard(const Config& config, MachineLoop& loop, VmHandles& vm, const LoadedKernel& kernel,
          std::function<void(int status, const std::string& why)> stop,
          std::function<void()> suspend = nullptr);
  ~PcBoard();
  PcBoard(const PcBoard&) = delete;
  PcBoard& operator=(const PcBoard&) = delete;

  devices::IoBus& io() noexcept { return io_; }
  devices::MmioBus& mmio() noexcept { return mmio_; }
  devices::StdoutSink& console_sink() noexcept { return sink_; }
  // COM1, where the console input goes without --console virtio.
  devices::Uart16550& uart() noexcept { return *uart_; }
  PitAssembly& pit() noexcept { return *pit_; }
  const PitAssembly& pit() const noexcept { return *pit_; }
  // The ACPI PM block and the RTC, which S3 and its wake need.
  devices::AcpiPm* acpi_pm() noexcept { return acpi_pm_; }
  devices::Mc146818Rtc* rtc() noexcept { return rtc_; }

  // Every device's counters under its report key in the report's "devices" object, and what
  // nothing on the buses decoded.
  void report(nlohmann::json& devices) const;

  // Every record the mounted devices declared (devices/bus/device_state.h): the owned devices'
  // in slot order, then the PIT's; with --pit kvm the PIT is KVM's (its state is the VM's,
  // vmm/snapshot/kvm_state.h).
  std::vector<devices::StatefulDevice*> stateful() const;
  // Every device a pause must hold (devices/bus/pausable_device.h): the PIT, whose ticks run on
  // host timers or in KVM. The others' time is vm_clock's, which stops by itself.
  std::vector<devices::PausableDevice*> pausable() const;

  // The slots' makers hand these back (COM1 and the PIT are the machine's business too).
  void set_uart(devices::Uart16550& uart) noexcept { uart_ = &uart; }
  void set_acpi_pm(devices::AcpiPm& pm) noexcept { acpi_pm_ = &pm; }
  void set_rtc(devices::Mc146818Rtc& rtc) noexcept { rtc_ = &rtc; }
  void set_pit(std::unique_ptr<PitAssembly> pit) noexcept { pit_ = std::move(pit); }
  devices::IrqLine& line(std::uint32_t gsi, IrqInject inject);
  // pc-testdev's page flush: make KVM fault the page in again; false outside guest RAM.
  bool flush_guest_page(std::uint64_t page_gpa) noexcept;

 private:
  void mount(BoardContext& ctx, const BoardSlot& slot);

  const VmHandles& vm_;
  devices::IoBus io_;
  devices::MmioBus mmio_;
  devices::StdoutSink sink_;
  std::vector<std::unique_ptr<KvmIrqLine>> lines_;
  std::unique_ptr<PitAssembly> pit_;
  std::vector<Mounted> mounted_;
  devices::Uart16550* uart_ = nullptr;
  devices::AcpiPm* acpi_pm_ = nullptr;
  devices::Mc146818Rtc* rtc_ = nullptr;
};

}  // namespace minivmm::vmm
