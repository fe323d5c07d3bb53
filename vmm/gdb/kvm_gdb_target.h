// The gdb stub's Target on KVM: registers through KVM_GET/SET_REGS, SREGS and FPU, memory
// through KVM_TRANSLATE (the vCPU's own page tables) or guest RAM directly, software
// breakpoints as int3 bytes written into RAM (the original byte kept and written back),
// hardware breakpoints and watchpoints in DR0-DR3/DR7 through KVM_SET_GUEST_DEBUG (the same four
// on every vCPU), single-step through KVM_GUESTDBG_SINGLESTEP with interrupts held off
// (KVM_GUESTDBG_BLOCKIRQ where KVM has it, so a step does not land in the tick's handler).
//
// Stopping and running the guest is the Machine's pause and resume (vm_clock, the PIT and
// kvmclock stop with the vCPUs; a pause is a pause whoever asks), given as callbacks.
//
// Threads: everything on the loop thread, with every vCPU parked, except debug_exit(), which
// the vCPU thread calls from its KVM_EXIT_DEBUG (it reads the breakpoint table under mu_).
#pragma once

#include <linux/kvm.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "devices/bus/guest_memory.h"
#include "vmm/gdb/gdb_target.h"

namespace minivmm::vmm::gdb {

struct KvmGdbHooks {
  std::function<void()> pause;   // stop the guest (no-op if it is already)
  std::function<void()> resume;  // run it again
  // end the run with this exit status and reason (`k`; a held fault when gdb leaves)
  std::function<void(int status, const std::string& why)> end_run;
  std::function<void(const StopEvent&)> stopped;  // the stub's: a stop for gdb (interrupt)
};

struct KvmGdbStats {
  std::uint64_t debug_exits = 0;        // KVM_EXIT_DEBUG seen (any vCPU thread)
  std::uint64_t guest_int3_reinjected = 0;  // a guest's own int3, handed back to it
  std::uint64_t kvmclock_ctrl = 0;      // KVM_KVMCLOCK_CTRL accepted (the guest uses kvmclock)
  std::uint64_t translate_failures = 0; // linear addresses with no mapping
};

class KvmGdbTarget final : public Target {
 public:
  KvmGdbTarget(std::vector<int> vcpu_fds, devices::GuestMemory memory, bool block_irq_on_step,
               KvmGdbHooks hooks);

  int cpu_count() const override { return static_cast<int>(fds_.size()); }
  bool read_registers(int cpu, RegisterFile& out) override;
  bool write_registers(int cpu, const RegisterFile& in) override;
  std::size_t read_memory(int cpu, std::uint64_t addr, std::span<std::uint8_t> out,
                          bool physical) override;
  std::size_t write_memory(int cpu, std::uint64_t addr, std::span<const std::uint8_t> in,
                           bool physical) override;
  BreakResult insert_breakpoint(BreakType type, std::uint64_t addr, std::uint64_t kind) override;
  BreakResult remove_breakpoint(BreakType type, std::uint64_t addr, std::uint64_t kind) override;
  void resume(std::span<const ResumeAction> actions) override;
  void interrupt() override;
  void detach() override;
  void kill() override;
  std::string describe() override;

  // vCPU thread, at KVM_EXIT_DEBUG: true if the guest is to stop (the event is kept for
  // take_stop()), false if it runs on (a guest's own int3, handed back to it).
  bool debug_exit(int cpu, int vcpu_fd, const kvm_debug_exit_arch& arch);
  // Loop thread: the stop a debug exit left, decoded (nullopt: none).
  std::optional<StopEvent> take_stop();
  // Loop thread: the guest stopped (any reason): kvmclock is told, so a Linux guest's
  // watchdogs do not count the stop as a soft lockup.
  void note_stopped();
  // Loop thread: every breakpoint and watchpoint gone, guest debugging off on every vCPU.
  void clear_all();

  KvmGdbStats stats() const;

 private:
  struct HwSlot {
    bool used = false;
    BreakType type = BreakType::kHardware;
    std::uint64_t addr = 0;
    std::uint64_t len = 1;
  };
  std::optional<std::uint64_t> translate(int cpu, std::uint64_t linear);
  bool set_guest_debug(int cpu, bool step);

  std::vector<int> fds_;
  devices::GuestMemory mem_;
  bool block_irq_on_step_;
  KvmGdbHooks hooks_;
  mutable std::mutex mu_;  // guards sw_breaks_ and the event (the vCPU threads read them)
  // linear address -> {guest-physical address, the byte under the int3}
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint8_t>> sw_breaks_;
  std::optional<std::pair<int, kvm_debug_exit_arch>> event_;
  std::array<HwSlot, 4> hw_{};
  KvmGdbStats stats_;
};

}  // namespace minivmm::vmm::gdb
