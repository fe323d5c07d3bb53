#include "vmm/machine/pc_board.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "devices/log/log.h"
#include "devices/pc/debug_exit.h"
#include "devices/pc/acpi_pm.h"
#include "devices/pc/i8042.h"
#include "devices/pc/mc146818_rtc.h"
#include "devices/pc/post_port.h"
#include "devices/pc/pvpanic.h"
#include "devices/testdev/fw_cfg.h"
#include "devices/testdev/pc_testdev.h"
#include "vmm/exit_code.h"
#include "vmm/report/json_report_writer.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

Mounted make_pit(BoardContext& c, const BoardSlot& s) {
  // A PC BIOS leaves channel 0 running at 18.2 Hz for a multiboot kernel that may rely on it,
  // and the 8259s initialised (vmm/boot/bios_ivt.h).
  const bool bios_timer = c.kernel.bios_timer && c.config.pit == PitMode::kUser;
  c.vm.vm.set_pics_as_bios_leaves_them(bios_timer);
  auto pit = std::make_unique<PitAssembly>(PitAssembly::Wiring{
      c.config, c.vm.vm, c.loop, s.gsis[0], bios_timer, [stop = c.stop](const std::string& why) {
        log::error("{}", why);
        stop(to_int(ExitCode::kHostFailure), why);
      }});
  Mounted m;
  if (devices::I8254Pit* chip = pit->pit()) {  // nothing of ours with KVM's PIT
    m.borrowed = pit.get();
    m.ports = {chip, pit->speaker()};
    m.snapshot = devices::participation_of(*chip);
    m.snapshot.records.push_back(pit->speaker());
  }
  c.board.set_pit(std::move(pit));
  return m;
}

Mounted make_uart(BoardContext& c, const BoardSlot& s) {
  auto uart = std::make_unique<devices::Uart16550>(c.irq(s.gsis[0]), c.console,
                                                   &c.loop.loop_rt_timers, &c.loop.loop_vm_timers);
  c.board.set_uart(*uart);
  return Mounted::one(std::move(uart));
}

Mounted make_rtc(BoardContext& c, const BoardSlot& s) {
  auto rtc = std::make_unique<devices::Mc146818Rtc>(c.loop.loop_vm_timers, c.loop.wall,
                                                    c.irq(s.gsis[0]), c.config.memory_bytes);
  c.board.set_rtc(*rtc);
  return Mounted::one(std::move(rtc));
}

// The SCI is a level (the MADT says level, active high): KVM_IRQ_LINE, no irqfd.
Mounted make_acpi_pm(BoardContext& c, const BoardSlot& s) {
  devices::AcpiPm::Callbacks callbacks;
  callbacks.on_power_off = [stop = c.stop] {
    stop(to_int(ExitCode::kOk), "guest power-off (ACPI S5)");
  };
  callbacks.on_suspend = c.suspend;
  auto pm = std::make_unique<devices::AcpiPm>(
      c.loop.loop_vm_timers, c.irq(s.gsis[0], IrqInject::kIoctl), std::move(callbacks));
  c.board.set_acpi_pm(*pm);
  return Mounted::one(std::move(pm));
}

Mounted make_i8042(BoardContext& c, const BoardSlot& s) {
  auto kbc = std::make_unique<devices::I8042>(
      [stop = c.stop] { stop(to_int(ExitCode::kOk), "guest reset through the i8042"); },
      &c.irq(s.gsis[0]), &c.irq(s.gsis[1]));
  Mounted m;
  m.ports = {&kbc->data_port(), &kbc->command_port()};
  m.snapshot = devices::participation_of(*kbc);
  m.owned = std::move(kbc);
  return m;
}

Mounted make_debug_exit(BoardContext& c, const BoardSlot&) {
  return Mounted::one(std::make_unique<devices::DebugExit>(
      [stop = c.stop](int status) { stop(status, "guest debug-exit"); }));
}

Mounted make_post_port(BoardContext&, const BoardSlot&) {
  return Mounted::one(std::make_unique<devices::PostPort>());
}

Mounted make_pvpanic(BoardContext& c, const BoardSlot&) {
  return Mounted::one(std::make_unique<devices::PvPanic>([stop = c.stop] {
    stop(to_int(ExitCode::kGuestPanicked), "guest panicked (pvpanic)");
  }));
}

Mounted make_fw_cfg(BoardContext& c, const BoardSlot&) {
  const auto cpus = static_cast<std::uint16_t>(c.config.cpus);
  return Mounted::one(
      std::make_unique<devices::FwCfg>(devices::FwCfgConfig{c.config.memory_bytes, cpus, cpus}));
}

Mounted make_pc_testdev(BoardContext& c, const BoardSlot&) {
  // Level changes through KVM_IRQ_LINE: GSIs 0-15 reach both the PIC and the IOAPIC, 16-23
  // the IOAPIC only (KVM's default routing, as QEMU's ISA bus wires pc-testdev).
  std::array<devices::IrqLine*, devices::PcTestdevIrq::kLines> lines{};
  for (std::size_t gsi = 0; gsi < lines.size(); ++gsi) {
    lines[gsi] = &c.irq(static_cast<std::uint32_t>(gsi), IrqInject::kIoctl);
  }
  auto dev = std::make_unique<devices::PcTestdev>(
      lines, [&board = c.board](std::uint64_t page) { return board.flush_guest_page(page); });
  Mounted m;
  m.ports = {&dev->echo(), &dev->flush_page(), &dev->echo(), &dev->irq()};
  m.mmio = &dev->iomem();
  m.snapshot = devices::participation_of(*dev);
  m.owned = std::move(dev);
  return m;
}

}  // namespace

// The board. Addresses are the ones every PC OS probes; GSIs are ISA IRQ numbers, which KVM's
// default routing sends to both the 8259 pair and the IOAPIC. kvm-unit-tests' devices sit at
// QEMU's places. tests/unit/vmm/machine/board_layout_test.cc checks that nothing overlaps.
const std::vector<BoardSlot>& board_slots() {
  static const std::vector<BoardSlot> slots{
      // name          port windows                  MMIO window   GSIs     testdev maker
      {"pit",          {{0x40, 4}, {0x61, 1}},       {},           {0},     false, make_pit},
      {"uart",         {{0x3f8, 8}},                 {},           {4},     false, make_uart},
      {"rtc",          {{0x70, 2}},                  {},           {8},     false, make_rtc},
      {"i8042",        {{0x60, 1}, {0x64, 1}},       {},           {1, 12}, false, make_i8042},
      {"debug_exit",   {{0xf4, 4}},                  {},           {},      false, make_debug_exit},
      {"post_port",    {{0x80, 1}},                  {},           {},      false, make_post_port},
      {"pvpanic",      {{0x505, 1}},                 {},           {},      false, make_pvpanic},
      // QEMU's PIIX4 PM_IO_BASE: PM1a event 0x600, control 0x604, timer 0x608; SCI on GSI 9.
      {"acpi_pm",      {{0x600, devices::AcpiPm::kPortCount}}, {}, {9},     false, make_acpi_pm},
      {"fw_cfg",       {{0x510, 2}},                 {},           {},      true,  make_fw_cfg},
      {"pc_testdev",   {{0xe0, 4}, {0xe4, 4}, {0xe8, 4}, {0x2000, 24}},
                       board::Window{0xff000000, 0x10000},         {},      true,  make_pc_testdev},
  };
  return slots;
}

std::optional<std::uint16_t> board_port_of(std::string_view name) {
  for (const BoardSlot& s : board_slots()) {
    if (s.name == name && !s.ports.empty()) return s.ports[0].base;
  }
  return std::nullopt;
}

void check_snapshot_participation(const BoardSlot& slot, const Mounted& mounted) {
  if (!mounted.owned && !mounted.borrowed) return;  // nothing mounted (the PIT with --pit kvm)
  if (mounted.snapshot.declared()) return;
  throw VmmError(ExitCode::kHostFailure,
                 "board slot '" + std::string(slot.name) +
                     "': its device declares no snapshot participation (a record, or "
                     "kStatelessBecause; devices/bus/device_state.h)");
}

devices::IrqLine& BoardContext::irq(std::uint32_t gsi, IrqInject inject) {
  return board.line(gsi, inject);
}

PcBoard::PcBoard(const Config& config, MachineLoop& loop, VmHandles& vm,
                 const LoadedKernel& kernel,
                 std::function<void(int status, const std::string& why)> stop,
                 std::function<void()> suspend)
    : vm_(vm), sink_(config.kernel_console_fd >= 0 ? config.kernel_console_fd : STDOUT_FILENO) {
  BoardContext ctx{config, loop, vm, sink_, kernel, std::move(stop), std::move(suspend), *this};
  for (const BoardSlot& slot : board_slots()) {
    if (slot.testdev && !config.testdev) continue;
    mount(ctx, slot);
  }
}

PcBoard::~PcBoard() = default;

void PcBoard::mount(BoardContext& ctx, const BoardSlot& slot) {
  Mounted m = slot.make(ctx, slot);
  check_snapshot_participation(slot, m);
  // A slot whose maker mounted nothing (the PIT with --pit kvm) has no windows of ours.
  for (std::size_t i = 0; i < m.ports.size() && i < slot.ports.size(); ++i) {
    io_.attach(slot.ports[i].base, slot.ports[i].count, *m.ports[i]);
  }
  if (m.mmio != nullptr && slot.mmio) mmio_.attach(slot.mmio->base, slot.mmio->size, *m.mmio);
  if (m.owned || m.borrowed) mounted_.push_back(std::move(m));
}

devices::IrqLine& PcBoard::line(std::uint32_t gsi, IrqInject inject) {
  for (const auto& l : lines_) {
    if (l->gsi() == gsi && l->inject() == inject) return *l;
  }
  lines_.push_back(std::make_unique<KvmIrqLine>(vm_.vm, gsi, inject));
  return *lines_.back();
}

bool PcBoard::flush_guest_page(std::uint64_t page_gpa) noexcept {
  constexpr std::uint64_t kPageBytes = 4096;
  const devices::GuestMemory mem = vm_.vm.memory();
  // QEMU maps nothing for an address outside RAM and does nothing; so do we (counted).
  if (!mem.contains(page_gpa, kPageBytes)) return false;
  // QEMU takes the page away (PROT_NONE) and gives it back. Read-only is enough to make the
  // kernel invalidate KVM's mapping of it (mprotect runs the MMU notifiers), and another vCPU
  // that reads the page in between does not fault.
  void* host = mem.slice(page_gpa, kPageBytes).data();
  if (::mprotect(host, kPageBytes, PROT_READ) != 0 ||
      ::mprotect(host, kPageBytes, PROT_READ | PROT_WRITE) != 0) {
    log::warn("pc_testdev: flush of page {:#x}: mprotect: {}", page_gpa, std::strerror(errno));
  }
  return true;
}

void PcBoard::report(nlohmann::json& devices) const {
  for (const Mounted& m : mounted_) JsonReportWriter::add_device(devices, m.device());
  JsonReportWriter::add_device(devices, sink_);
  JsonReportWriter::add_device(devices, io_);
  JsonReportWriter::add_device(devices, mmio_);
}

std::vector<devices::PausableDevice*> PcBoard::pausable() const { return {pit_.get()}; }

std::vector<devices::StatefulDevice*> PcBoard::stateful() const {
  // The owned devices first and the borrowed PIT last, as snapshots were written before
  // participation was declared (sections are found by name; the order only keeps files alike).
  std::vector<devices::StatefulDevice*> out;
  for (const bool owned : {true, false}) {
    for (const Mounted& m : mounted_) {
      if (static_cast<bool>(m.owned) != owned) continue;
      out.insert(out.end(), m.snapshot.records.begin(), m.snapshot.records.end());
    }
  }
  return out;
}

}  // namespace minivmm::vmm
