// One running VM and everything around it, assembled in named steps (machine.cc): the loop and
// its clocks, the checked inputs (kernel, initrd, drives), the control socket, KVM and the
// sandbox, the PC board, the virtio devices, the console input, the vCPUs, and the signals.
// Every check of user input comes before /dev/kvm, so bad input gets its own exit code on any
// machine; the output files are opened once the inputs have all passed.
//
// The parts are members in dependency order, so destruction stops the signals before the
// vCPUs, the vCPUs before the devices, the devices before the VM, and timers before their
// lists.
//
// Threads: constructed and run() on the main thread, which becomes the loop thread. The vCPU
// threads (one per --cpus) and the signal thread reach the Machine only through request_stop(),
// whose first call wins.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "devices/host/console_input.h"
#include "vmm/control/control_socket.h"
#include "vmm/exit_code.h"
#include "vmm/gdb/gdb_stub.h"
#include "vmm/host/stop_signals.h"
#include "vmm/machine/boot_inputs.h"
#include "vmm/machine/config.h"
#include "vmm/machine/machine_loop.h"
#include "vmm/machine/machine_state.h"
#include "vmm/machine/net_backends.h"
#include "vmm/machine/pc_board.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/vcpu_set.h"
#include "vmm/machine/virtio_board.h"
#include "vmm/machine/vm_handles.h"
#include "vmm/report/run_report.h"
#include "vmm/snapshot/kvm_state.h"
#include "vmm/snapshot/snapshot_file.h"

namespace minivmm::vmm {

class Machine {
 public:
  // `open_outputs` runs once every input has been judged (kernel, initrd, socket path,
  // drives), before /dev/kvm is opened: the files the run will write are opened only then.
  // Throws VmmError (with the exit code to use) on any setup failure.
  // With `restore` (an opened, checked snapshot whose configuration `config` already is:
  // snapshot_config.h), the guest is not booted but brought back: its RAM mapped from the file,
  // every vCPU, KVM's irqchip and clock and every device loaded, and vm_clock set where it
  // stood; run() then resumes it. A snapshot that does not fit is VmmError(kBadKernel) before
  // any guest instruction runs.
  explicit Machine(Config config, std::function<void()> open_outputs = nullptr,
                   const SnapshotFile* restore = nullptr);
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // Runs until the guest or the user ends it; returns the process exit code.
  int run();

  // Any thread. The first request wins; later ones are ignored.
  void request_stop(ExitCode code, const std::string& why);
  void request_stop_status(int status, const std::string& why);

  // Loop thread. Pause/resume the guest: vCPUs parked, vm_clock and kvmclock stopped (and
  // KVM's PIT, with --pit kvm, set back at the resume so it does not count the pause).
  void pause();
  void resume();
  bool paused() const noexcept { return loop_->vm_clock.paused(); }

  // ACPI S3 (docs/acpi-pm.md). The guest's SLP_EN with _S3 (any thread: the writing vCPU's)
  // holds every vCPU and has the loop put the guest to sleep: paused as by pause(), and woken by
  // wake() only (a control-socket resume does not). wake() (loop thread) resumes the boot vCPU
  // at the FACS firmware waking vector in real mode, the others waiting for SIPI; false when
  // the guest is not asleep.
  void request_suspend();
  bool wake(devices::AcpiPm::WakeReason reason);
  bool asleep() const noexcept { return hold_.asleep; }

  // Loop thread. The guest paused (in-flight disk requests completed), written to `path`
  // (snapshot_file.h), then resumed or left paused. Returns what the control socket replies;
  // throws SnapshotError (the VM is resumed as asked all the same).
  nlohmann::json snapshot(const std::string& path, bool resume);

  const RunReport& report() const noexcept { return report_; }
  RunReport collect_report() const;

 private:
  // The steps, in order.
  void block_stop_signals();
  void bind_control_socket();
  void open_vm();
  void build_board();
  void build_virtio();
  void attach_console_input();
  void build_vcpus();
  void start_signal_thread();
  // --restore's step, after the vCPUs exist and before the signals: machine_snapshot.cc.
  void restore_from(const SnapshotFile& snap);
  // run()'s own steps.
  void enter_sandbox_and_start();
  void finish();

  void on_signal(int signo);
  // The loop's half of request_suspend().
  void enter_s3();
  // resume() without the sleep check.
  void resume_now();
  // --restore: the snapshot file is shorter than guest memory needs (someone cut it short).
  std::optional<std::string> restored_memory_gone() const;
  // Every device's record, by section name ("dev:<key>"), and the sections of a snapshot.
  std::vector<std::pair<std::string, devices::StatefulDevice*>> stateful_devices() const;
  std::vector<SnapshotSection> save_sections() const;

  Config config_;
  std::unique_ptr<MachineLoop> loop_;
  std::unique_ptr<RunControl> run_;
  std::unique_ptr<BootInputs> inputs_;
  HostEnds host_;  // the control socket and the network back-ends, opened before KVM
  std::unique_ptr<VmHandles> vm_;
  std::unique_ptr<PcBoard> board_;
  std::unique_ptr<VirtioBoard> virtio_;
  std::unique_ptr<devices::ConsoleInput> console_input_;
  std::unique_ptr<VcpuSet> vcpus_;
  std::unique_ptr<gdb::GdbStub> gdb_;  // --gdb (vmm/gdb/gdb_stub.h); before the vCPUs go
  RunReport report_;
  SnapshotSession snap_;  // snapshots, the restore, resets and their rounds (machine_state.h)
  GuestHold hold_;        // pause and S3: what holds the vCPUs and the clocks
  template <typename Step>
  void timed_step(const char* name, Step&& s);
  nlohmann::json restore_phases_json() const;
  nlohmann::json rounds_json() const;
  // Snapshots (machine_snapshot.cc): every record of a snapshot loaded into this machine, the
  // restore's and the reset's common part; the reset in place; the mailbox's reads and writes.
  void load_records(const SnapshotFile& snap, std::int64_t vm_now);
  nlohmann::json reset();
  nlohmann::json mailbox(const nlohmann::json& request);
  std::uint64_t facs_addr() const noexcept {
    return snap_.from ? snap_.facs_addr : inputs_->kernel.acpi_facs_addr;
  }
  // --reset-on-exit: a guest's end of its run resets it while rounds are left
  // (SnapshotSession's rounds).
  void guest_ended(int status, const std::string& why);
  void reset_after_round();
  // Last: its thread calls request_stop(), which reaches the vCPUs and the loop.
  std::unique_ptr<StopSignals> stop_signals_;
};

}  // namespace minivmm::vmm
