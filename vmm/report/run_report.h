// What a run cost and what the guest got: printed as a human summary at exit and, with
// --stats, as JSON. Every counter that backs an idle-cost claim is here, so `strace -c -f` of
// the same run can be checked against it (docs/profiling.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "vmm/vcpu/thread_usage.h"

namespace minivmm::vmm {

struct RunReport {
  std::string kernel;
  std::string cmdline;
  std::uint32_t vcpus = 1;  // --cpus; the kvm_exits and kvm_run counts sum over all of them
  std::string pit_mode;
  std::string pit_tick;  // user PIT only: "loop", "vcpu" or "kernel"
  std::string irq_inject;  // user PIT only: how IRQ0 reaches KVM, "irqfd" or "ioctl"
  std::string alarm;
  std::string poller;
  std::string exit_reason;
  int exit_code = 0;

  double wall_seconds = 0;
  double vm_seconds = 0;  // vm_clock time the guest ran (excludes pauses)
  double paused_seconds = 0;
  bool paused = false;  // at the time of the report (a control-socket "stats" while paused)

  // Guest timer ticks as minivmm injected them (user-space PIT only; KVM's PIT and the LAPIC
  // timer tick inside the kernel, invisible to us).
  std::optional<std::uint64_t> ticks_injected;
  std::optional<double> guest_hz_measured;
  std::optional<std::uint64_t> ticks_lost;
  std::optional<std::uint64_t> ticks_late;
  std::optional<std::uint64_t> ticks_coalesced;
  // Plain edges the guest's acknowledgement count showed merged (a starved vCPU): redelivered.
  std::optional<std::uint64_t> ticks_merged;

  // Loop and dynticks.
  std::uint64_t loop_iterations = 0;
  std::uint64_t loop_timeouts = 0;
  std::uint64_t fd_dispatches = 0;
  std::uint64_t wake_events = 0;
  std::uint64_t timer_passes = 0;
  std::uint64_t timers_run = 0;
  std::uint64_t alarm_arms = 0;
  std::uint64_t alarm_arms_skipped = 0;
  std::uint64_t alarm_disarms = 0;
  std::uint64_t alarm_wakeups = 0;
  std::uint64_t false_wakeups = 0;
  std::uint64_t cancelled_wakeups = 0;
  std::uint64_t clamped_deadlines = 0;
  std::uint64_t clock_reads = 0;  // every host clock read the process made
  double alarm_late_us_avg = 0;
  double alarm_late_us_max = 0;
  std::optional<std::int64_t> timer_slack_ns;

  // Host cost.
  double cpu_user_seconds = 0;
  double cpu_sys_seconds = 0;
  std::uint64_t voluntary_ctx_switches = 0;
  std::uint64_t involuntary_ctx_switches = 0;
  // Resident memory at the end of the run: the whole process, the guest RAM the host has backed,
  // and the difference, which is the VMM's own cost per guest. nullopt where /proc is unreadable.
  std::optional<std::uint64_t> rss_bytes;
  std::optional<std::uint64_t> peak_rss_bytes;
  std::optional<std::uint64_t> anon_bytes;  // private: heap, stacks and the guest RAM touched
  std::optional<std::uint64_t> pss_bytes;   // shared library pages split among their users
  std::uint64_t guest_ram_resident_bytes = 0;
  // The same per thread ("loop", "vcpu0", ...): which thread blocks and which is preempted.
  std::map<std::string, ContextSwitches> thread_ctx_switches;

  std::map<std::string, std::uint64_t> loop_syscalls;  // the VMM's own count, by kind
  std::map<std::string, std::uint64_t> vcpu_syscalls;  // the vCPU thread's, KVM_RUN included
  std::uint64_t kvm_run_calls = 0;    // vCPU thread: ioctl(KVM_RUN)
  nlohmann::json vcpu_timers;         // --pit-tick vcpu: the vCPU's timer passes; null otherwise
  std::uint64_t console_writes = 0;   // vCPU/loop thread: write(2) of guest console output
  std::map<std::string, std::uint64_t> kvm_exits;      // by reason
  nlohmann::json devices = nlohmann::json::object();  // per device, under its report key
  nlohmann::json auto_poller;   // --poll auto: its decisions and why; null otherwise
  nlohmann::json api_socket;    // --api-socket counters; null otherwise
  nlohmann::json gdb;           // --gdb: the stub's counters (vmm/gdb/gdb_stub.h); null otherwise
  // Snapshots (docs/snapshot.md): {"restored": bool, "restore_ms": from the start of the
  // machine's set-up to the restored guest's resume (null when booted), "taken": snapshots
  // written, "last_write_ms": the last one's pause-to-written time (null before one),
  // "drives": the file each drive opened, absolute, symlinks resolved}.
  nlohmann::json snapshot;
  // --seccomp: the mode and, per thread kind, how many threads loaded a filter and its rules.
  nlohmann::json seccomp;

  nlohmann::json to_json() const;
  // rss / anon / pss minus the guest RAM resident (never below 0); nullopt without the figure.
  std::optional<std::uint64_t> vmm_rss_bytes() const noexcept { return minus_guest(rss_bytes); }
  std::optional<std::uint64_t> vmm_anon_bytes() const noexcept { return minus_guest(anon_bytes); }
  std::optional<std::uint64_t> vmm_pss_bytes() const noexcept { return minus_guest(pss_bytes); }
  std::optional<std::uint64_t> minus_guest(std::optional<std::uint64_t> b) const noexcept {
    if (!b) return std::nullopt;
    return *b > guest_ram_resident_bytes ? *b - guest_ram_resident_bytes : 0;
  }
  nlohmann::json memory_json() const;
  std::string to_text() const;
};

}  // namespace minivmm::vmm
