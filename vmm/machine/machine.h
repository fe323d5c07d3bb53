// Owns one running VM and everything around it. Members are declared in dependency order, so
// destruction stops the vCPU before devices, devices before the VM, timers before their lists.
//
// Threads: constructed and run() on the main thread, which becomes the loop thread. The vCPU
// threads (one per --cpus) reach the Machine only through request_stop() (debug-exit, reset,
// triple fault), whose first call wins whichever vCPU makes it.
#pragma once

#include <array>
#include <functional>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "devices/host/block_file.h"
#include "devices/host/console_input.h"
#include "devices/pc/debug_exit.h"
#include "devices/testdev/fw_cfg.h"
#include "devices/pc/i8042.h"
#include "devices/pc/i8254/i8254_pit.h"
#include "devices/pc/i8254/i8254_speaker_port.h"
#include "devices/bus/io_bus.h"
#include "devices/pc/mc146818_rtc.h"
#include "devices/bus/mmio_bus.h"
#include "devices/testdev/pc_testdev_flush_page.h"
#include "devices/testdev/pc_testdev_iomem.h"
#include "devices/testdev/pc_testdev_irq.h"
#include "devices/testdev/pc_testdev_port.h"
#include "devices/pc/post_port.h"
#include "devices/host/stdout_sink.h"
#include "devices/pc/uart_16550.h"
#include "devices/virtio/blk/virtio_blk.h"
#include "devices/virtio/virtio_console.h"
#include "loop/event_loop.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/timer.h"
#include "timers/thread_timers.h"
#include "timers/timer_list.h"
#include "timers/vm_clock.h"
#include "timers/wall_clock.h"
#include "vmm/machine/config.h"
#include "vmm/control/control_socket.h"
#include "vmm/exit_code.h"
#include "vmm/kvm/guest_ram_mapping.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/kernel_pulse_train.h"
#include "vmm/kvm/kvm_irq_line.h"
#include "vmm/boot/loaded_kernel.h"
#include "vmm/report/run_report.h"
#include "vmm/sandbox/seccomp_allow_lists.h"
#include "vmm/sandbox/seccomp_sandbox.h"
#include "vmm/host/stop_signals.h"
#include "vmm/kvm/unique_fd.h"
#include "vmm/vcpu/vcpu.h"
#include "vmm/machine/virtio_mmio_devices.h"
#include "vmm/kvm/vm.h"

namespace minivmm::vmm {

class Machine {
 public:
  // Reads the kernel and initrd and loads them into guest RAM, binds the control socket, and
  // only then opens KVM and builds the VM and its devices: every check of user input comes
  // before /dev/kvm, so bad input gets its own exit code on any machine.
  // `open_outputs` runs once every input has been judged (kernel, initrd, socket path,
  // drives), before /dev/kvm is opened: the files the run will write are opened only then.
  // Throws VmmError (with the exit code to use) on any setup failure.
  explicit Machine(Config config, std::function<void()> open_outputs = nullptr);
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // Runs until the guest or the user ends it; returns the process exit code.
  int run();

  // Any thread. The first request wins; later ones are ignored.
  void request_stop(ExitCode code, const std::string& why);
  void request_stop_status(int status, const std::string& why);

  // Loop thread. Pause/resume the guest: vCPU parked and vm_clock stopped.
  void pause();
  void resume();
  bool paused() const noexcept { return vm_clock_.paused(); }

  const RunReport& report() const noexcept { return report_; }
  RunReport collect_report() const;

 private:
  void on_signal(int signo);
  std::unique_ptr<ControlSocket> make_control_socket();
  LoadedKernel load_guest_kernel();
  void flush_guest_page(std::uint64_t page_gpa) noexcept;
  SeccompFacts seccomp_facts() const;

  Config config_;
  GuestRamMapping ram_;
  LoadedKernel kernel_;  // loaded into ram_ before KVM exists; the files are not kept

  timers::MonotonicClock mono_;
  timers::VmClock vm_clock_{mono_};
  timers::WallClock wall_clock_;
  timers::TimerList vm_timers_{timers::ClockType::kVm, vm_clock_};
  timers::TimerList rt_timers_{timers::ClockType::kRt, mono_};
  // --pit-tick vcpu: the PIT's vm_clock timers, run by the vCPU thread between KVM_RUNs.
  timers::TimerList vcpu_vm_timers_{timers::ClockType::kVm, vm_clock_};
  std::unique_ptr<timers::ThreadTimers> vcpu_timers_;
  std::unique_ptr<timers::AlarmTimer> alarm_;
  std::unique_ptr<timers::Dynticks> dynticks_;
  std::unique_ptr<loop::EventLoop> loop_;
  // Bound before KVM is opened (a bad path is user input); its handlers run only inside run().
  std::unique_ptr<ControlSocket> control_;

  // --drive files, opened (and checked) before /dev/kvm so that a bad one is an image error
  // even where KVM is missing; handed to their VirtioBlk devices in the constructor.
  std::vector<devices::BlockFile> drive_files_;
  bool outputs_open_ = false;  // after every input check, before KVM

  Kvm kvm_;
  Vm vm_;
  // Before every thread it filters: it installs the SIGSYS report handler (main thread only).
  SeccompSandbox sandbox_;
  SeccompFacts seccomp_facts_;
  devices::IoBus bus_;
  KvmIrqLine irq0_;
  KvmIrqLine irq1_;
  KvmIrqLine irq4_;
  KvmIrqLine irq8_;
  KvmIrqLine irq12_;
  devices::StdoutSink console_sink_;
  devices::Uart16550 uart_;
  devices::DebugExit debug_exit_;
  devices::PostPort post_port_;
  devices::I8042 i8042_;
  devices::Mc146818Rtc rtc_;
  // kvm-unit-tests' devices (QEMU's fw_cfg and pc-testdev); the testdev's lines are GSIs 0-23.
  devices::FwCfg fw_cfg_;
  devices::PcTestdevPort testdev_port_;
  devices::PcTestdevFlushPage testdev_flush_;
  devices::PcTestdevIomem testdev_iomem_;
  std::array<std::unique_ptr<KvmIrqLine>, devices::PcTestdevIrq::kLines> testdev_lines_;
  std::unique_ptr<devices::PcTestdevIrq> testdev_irq_;
  std::atomic<std::uint64_t> flushes_outside_ram_{0};
  std::unique_ptr<KernelPulseTrain> pit_train_;  // --pit-tick kernel; outlives pit_
  std::unique_ptr<devices::I8254Pit> pit_;
  std::unique_ptr<devices::I8254SpeakerPort> speaker_;
  devices::MmioBus mmio_bus_;
  std::unique_ptr<VirtioMmioDevices> virtio_;       // null without virtio devices
  std::vector<devices::VirtioBlk*> virtio_blks_;     // owned by virtio_
  std::size_t blk_workers_ = 0;  // disks served by a worker thread (not io_uring)
  devices::VirtioConsole* virtio_console_ = nullptr;  // owned by virtio_; --console virtio
  std::unique_ptr<devices::ConsoleInput> console_input_;

  // vCPU 0 boots the kernel; the others wait for the guest's INIT/SIPI.
  std::vector<std::unique_ptr<Vcpu>> vcpus_;
  timers::Timer duration_timer_;

  std::atomic<bool> stop_requested_{false};
  std::atomic<pid_t> loop_tid_{0};  // the thread in run(); for its context switches
  mutable std::mutex stop_mu_;
  int exit_status_ = 0;        // guarded by stop_mu_
  std::string exit_reason_;    // guarded by stop_mu_

  timers::Nanos start_mono_{0};
  timers::Nanos start_vm_{0};
  RunReport report_;

  // Last: its thread calls request_stop(), which reaches the vCPU and the loop.
  std::unique_ptr<StopSignals> stop_signals_;
};

}  // namespace minivmm::vmm
