// One virtual CPU running KVM_RUN on its own thread, as an explicit state machine (Firecracker
// vcpu.rs): Running -> Paused -> Running ... -> Finished. Port I/O exits go to the IoBus; the
// in-kernel irqchip handles HLT and interrupt delivery, so an idle guest never exits to us.
//
// This file keeps the thread, the kick and the KVM_RUN loop with its pause and stop checks (the
// protocol itself is vcpu_run_gate.h). The rest lives beside it, as functions on the vCPU fd or
// its kvm_run: x86_vcpu_setup.h (CPUID, registers, MSRs, FPU, LAPIC LINTs, wait-for-SIPI),
// vcpu_exits.h (what each exit does) and vcpu_crash_report.h (the log lines of a fault).
//
// Threads: configure()/host_timers() before start() on the main thread; start/pause/resume/stop/
// join from the main (loop) thread; interrupt()/stats() from any thread. The vCPU thread itself
// calls only the IoBus, its hosted timers and the `on_stop` callback.
//
// Hosted timers (--pit-tick vcpu): the thread runs a ThreadTimers between KVM_RUN calls. Its
// signal is blocked in user space and unblocked only inside KVM_RUN (KVM_SET_SIGNAL_MASK, as
// QEMU does for its SIG_IPI), so an expiry always surfaces as KVM_RUN returning EINTR and is
// never lost to a handler that ran while the thread was busy elsewhere.
#pragma once

#include <linux/kvm.h>
#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "devices/bus/io_bus.h"
#include "devices/bus/mmio_bus.h"
#include "timers/thread_timers.h"
#include "vmm/exit_code.h"
#include "vmm/vcpu/thread_usage.h"
#include "vmm/vcpu/vcpu_exits.h"
#include "vmm/kvm/unique_fd.h"
#include "vmm/vcpu/vcpu_run_gate.h"
#include "vmm/kvm/vm.h"
#include "vmm/vcpu/x86_boot_state.h"

namespace minivmm::vmm {

struct VcpuStats {
  std::array<std::uint64_t, static_cast<std::size_t>(VcpuExit::kCount)> exits{};
  std::uint64_t unmapped_mmio = 0;
  std::uint64_t kvm_run_calls = 0;  // ioctl(KVM_RUN): the vCPU thread's syscalls
  ContextSwitches ctx_switches;     // this vCPU thread's own
};

class Vcpu {
 public:
  // Why the vCPU stopped by itself; the Machine turns it into the process exit code.
  using StopCallback = std::function<void(ExitCode code, const std::string& why)>;

  Vcpu(const Vm& vm, int index, devices::IoBus& io, StopCallback on_stop);
  ~Vcpu();
  Vcpu(const Vcpu&) = delete;
  Vcpu& operator=(const Vcpu&) = delete;

  // Sets CPUID, registers, FPU and the local APIC's LINT0/LINT1 (ExtINT/NMI, as a PC BIOS
  // leaves them, so the 8259 reaches the CPU). Throws VmmError.
  void configure(const X86BootState& state, const std::vector<kvm_cpuid_entry2>& cpuid);
  // An application processor: the same CPUID, MSRs, FPU and LINT1 = NMI, but LINT0 left
  // masked (only the BSP takes the 8259's ExtINT, MP spec 3.6.2.2 / SDM 10.5.1), no registers
  // (its INIT/SIPI sets them) and MP state wait-for-SIPI (KVM_MP_STATE_UNINITIALIZED): it runs
  // nothing until the guest's INIT and STARTUP IPIs reach it through the in-kernel LAPIC.
  // Throws VmmError.
  void configure_ap(const std::vector<kvm_cpuid_entry2>& cpuid);

  // Host CPUs the thread may run on (empty: any). Before start(); applied by the thread itself
  // before its first KVM_RUN.
  void cpu_affinity(std::vector<int> cpus) { cpus_ = std::move(cpus); }

  // Timers this thread runs itself (nullptr: none). Before start(); must outlive the thread.
  void host_timers(timers::ThreadTimers* timers) noexcept { timers_ = timers; }
  // Where KVM_EXIT_MMIO goes (nullptr: nothing is mapped, every access unmapped). Before start().
  void mmio_bus(devices::MmioBus* bus) noexcept { mmio_ = bus; }
  // Run by the vCPU thread once its own set-up (pinning, hosted timers) is done, right before
  // its first KVM_RUN: the seccomp filter goes in here. Before start(). Returning false stops
  // the run with kHostFailure instead of running the guest.
  void on_steady_state(std::function<bool()> hook) { steady_state_hook_ = std::move(hook); }
  // Asked on a fatal exit (a triple fault, an internal error, KVM_RUN failing) before the guest
  // is blamed with a crash report: whether the host took something away under the guest (a
  // restored guest's memory file cut short). A reason then ends the run with kSnapshotGone and
  // that reason instead. Before start(); may be called on the vCPU thread.
  void host_fault_check(std::function<std::optional<std::string>()> check) {
    host_fault_check_ = std::move(check);
  }

  // While `*hold` is true the vCPU enters no KVM_RUN but waits for the loop's pause (the guest
  // asked for ACPI S3 and the loop is about to park every vCPU). Before start().
  void guest_hold(const std::atomic<bool>* hold) noexcept { hold_ = hold; }
  // When `*dump` is true as the run ends, the vCPU logs its registers and the bytes at its rip
  // on its way out (minivmm exec's --timeout: where was the guest when it hung).
  void dump_on_stop(const std::atomic<bool>* dump) noexcept { dump_on_stop_ = dump; }

  // KVM_EXIT_DEBUG (a gdb breakpoint, watchpoint or step: vmm/gdb/), on the vCPU thread: true
  // holds this vCPU, running nothing, until the loop's next pause (which the hook asks for);
  // false runs on. Before start().
  void debug_exit_hook(std::function<bool(int vcpu_fd, const kvm_debug_exit_arch&)> hook) {
    debug_hook_ = std::move(hook);
  }

  // The vCPU fd, for the allow-list that confines KVM_RUN to this vCPU's own fd.
  int fd() const noexcept { return fd_.get(); }

  void start();
  // Makes KVM_RUN return now (or the next one return at once), from any thread; the vCPU then
  // re-reads its hosted timers' deadline. The wake of another thread's timer arm.
  void interrupt() noexcept { kick(); }
  // Kicks the vCPU out of KVM_RUN and waits until it is parked; no guest instruction runs
  // until resume(), which returns once the vCPU runs again (vcpu_run_gate.h has the protocol).
  // Before start(), pause() makes the vCPU park before its first KVM_RUN.
  void pause() { gate_.pause([this] { kick(); }); }
  void resume() { gate_.resume(); }
  // After a pause() before start() and the start: returns once the vCPU has parked, ready.
  void wait_parked() { gate_.wait_parked(); }
  // Asks the thread to finish (from any thread, the vCPU thread included); join() waits.
  void request_stop() noexcept;
  void join();

  VcpuStats stats() const noexcept;
  int index() const noexcept { return index_; }

  // The real-time signal that kicks a vCPU out of KVM_RUN (its handler does nothing). Public so
  // that crash_signals.cc leaves it alone.
  static int kick_signal() noexcept;

 private:
  void thread_main();
  // The thread's first steps: its handle for kick(), its name, the kick signal unblocked.
  void register_thread(const std::string& name);
  // What must hold before the first KVM_RUN: pinned, hosted timers attached, the steady-state
  // hook run. A failure is reported through on_stop_ and leaves a stop requested.
  void prepare_to_run(const std::string& name);
  // The thread's last steps before gate_.finished(): its final figures, its handle cleared.
  void unregister_thread();
  bool run_loop();  // false: a host failure was reported
  void set_kvm_signal_mask();
  bool handle_exit();  // false: stop running
  // The host fault check said the host is to blame: the run is ended with its reason.
  bool host_faulted();
  void report_crash(const std::string& what);
  void kick() noexcept;
  void count(VcpuExit e) noexcept {
    exits_[static_cast<std::size_t>(e)].fetch_add(1, std::memory_order_relaxed);
  }

  const Vm& vm_;
  const int index_;
  devices::IoBus& io_;
  StopCallback on_stop_;
  UniqueFd fd_;
  kvm_run* run_ = nullptr;
  timers::ThreadTimers* timers_ = nullptr;
  devices::MmioBus* mmio_ = nullptr;
  const std::atomic<bool>* hold_ = nullptr;
  const std::atomic<bool>* dump_on_stop_ = nullptr;
  std::size_t run_size_ = 0;

  std::vector<int> cpus_;
  std::function<bool()> steady_state_hook_;
  std::function<std::optional<std::string>()> host_fault_check_;
  std::function<bool(int, const kvm_debug_exit_arch&)> debug_hook_;
  bool debug_held_ = false;  // the vCPU thread's: stopped at a debug exit, until it parks
  std::thread thread_;
  // The running thread's handle, for kick()'s pthread_kill; cleared (under kick_mu_) before
  // the thread returns, because signalling a thread that has been joined is undefined (it
  // crashed in glibc when a vCPU's debug-exit stopped a 4-vCPU run and ~Machine kicked them all).
  std::mutex kick_mu_;
  std::optional<pthread_t> pthread_;  // guarded by kick_mu_; empty before start and after exit
  std::atomic<pid_t> tid_{0};  // the kernel's id of the running thread; 0 before and after
  // Written by the thread as it finishes (ctx_mu_): /proc has no entry for it after that.
  mutable std::mutex ctx_mu_;
  ContextSwitches final_ctx_;
  VcpuRunGate gate_;

  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(VcpuExit::kCount)> exits_{};
  std::atomic<std::uint64_t> unmapped_mmio_{0};
  std::atomic<std::uint64_t> kvm_run_calls_{0};
};

}  // namespace minivmm::vmm
