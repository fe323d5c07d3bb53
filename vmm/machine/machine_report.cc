// Machine::collect_report: the run report from the machine's parts, each filled by a step of
// its own. The devices report themselves (PcBoard::report, VirtioBoard::report).
#include <sys/resource.h>

#include <string>

#include "loop/auto_poller.h"
#include "timers/clock_read_counter.h"
#include "timers/syscall_counters.h"
#include "vmm/machine/machine.h"
#include "vmm/report/process_memory.h"

namespace minivmm::vmm {
namespace {

double seconds(timers::Nanos n) { return static_cast<double>(n.count()) / 1e9; }

double seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

std::string_view pit_tick_name(PitTick t) {
  switch (t) {
    case PitTick::kLoop: return "loop";
    case PitTick::kVcpu: return "vcpu";
    case PitTick::kHostKernel: return "kernel";
  }
  return "?";
}

// The guest's ticks as the PIT injected them (the top-level "guest" object; the same figures
// come again under devices.pit, from the same stats). The counts of a restored guest cover its
// whole life (the snapshot carries them); the rate, this run's: `ticks_at_start` were before.
void fill_ticks(RunReport& r, const PitAssembly& pit, std::uint64_t ticks_at_start) {
  const devices::I8254Pit* chip = pit.pit();
  if (chip == nullptr) return;
  const auto s = chip->stats();
  r.ticks_injected = s.ticks_injected;
  r.ticks_lost = s.ticks_lost;
  r.ticks_late = s.ticks_late;
  r.ticks_coalesced = s.ticks_coalesced;
  r.ticks_merged = s.ticks_merged;
  if (r.vm_seconds > 0) {
    r.guest_hz_measured = static_cast<double>(s.ticks_injected - ticks_at_start) / r.vm_seconds;
  }
}

void fill_loop(RunReport& r, const MachineLoop& l) {
  const auto& ls = l.loop->stats();
  r.loop_iterations = ls.iterations;
  r.loop_timeouts = ls.timeouts;
  r.fd_dispatches = ls.fd_dispatches;
  r.wake_events = ls.wake_events;
  const auto& ds = l.dynticks->stats();
  r.timer_passes = ds.passes;
  r.timers_run = ds.timers_run;
  r.alarm_arms = ds.arms;
  r.alarm_arms_skipped = ds.arms_skipped;
  r.alarm_disarms = ds.disarms;
  r.alarm_wakeups = ds.alarm_wakeups;
  r.false_wakeups = ds.false_wakeups;
  r.cancelled_wakeups = ds.cancelled_wakeups;
  r.clamped_deadlines = ds.clamped;
  r.clock_reads = timers::clock_read_counter().load();
  if (ds.alarm_wakeups) {
    r.alarm_late_us_avg =
        static_cast<double>(ds.late_ns_total) / 1e3 / static_cast<double>(ds.alarm_wakeups);
  }
  r.alarm_late_us_max = static_cast<double>(ds.late_ns_max) / 1e3;
  r.paused = l.vm_clock.paused();
  if (auto* ap = dynamic_cast<loop::AutoPoller*>(&l.loop->poller())) {
    r.auto_poller = ap->report_json();
  }
}

void fill_host(RunReport& r, const GuestRamMapping& ram) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.cpu_user_seconds = seconds(ru.ru_utime);
  r.cpu_sys_seconds = seconds(ru.ru_stime);
  r.voluntary_ctx_switches = static_cast<std::uint64_t>(ru.ru_nvcsw);
  r.involuntary_ctx_switches = static_cast<std::uint64_t>(ru.ru_nivcsw);
  if (const auto mem = read_process_memory()) {
    r.rss_bytes = mem->rss_bytes;
    r.peak_rss_bytes = mem->peak_rss_bytes;
    r.anon_bytes = mem->anon_bytes;
    r.pss_bytes = mem->pss_bytes;
  }
  r.guest_ram_resident_bytes = ram.resident_bytes();
  for (std::size_t i = 0; i < static_cast<std::size_t>(timers::Syscall::kCount); ++i) {
    const auto s = static_cast<timers::Syscall>(i);
    r.loop_syscalls[std::string(timers::syscall_name(s))] = timers::loop_syscalls().get(s);
    r.vcpu_syscalls[std::string(timers::syscall_name(s))] = timers::vcpu_syscalls().get(s);
  }
}

// Every vCPU's exits, summed: the report's totals cover the whole VM; context switches per
// thread.
void fill_vcpus(RunReport& r, const VcpuSet& vcpus, pid_t loop_tid) {
  if (loop_tid != 0) {
    if (const auto c = thread_context_switches(loop_tid)) r.thread_ctx_switches["loop"] = *c;
  }
  VcpuStats sum;
  for (const auto& v : vcpus.all()) {
    const VcpuStats one = v->stats();
    r.thread_ctx_switches["vcpu" + std::to_string(v->index())] = one.ctx_switches;
    sum.kvm_run_calls += one.kvm_run_calls;
    for (std::size_t i = 0; i < sum.exits.size(); ++i) sum.exits[i] += one.exits[i];
  }
  r.vcpus = static_cast<std::uint32_t>(vcpus.size());
  r.kvm_run_calls = sum.kvm_run_calls;
  for (std::size_t i = 0; i < sum.exits.size(); ++i) {
    r.kvm_exits[std::string(vcpu_exit_name(static_cast<VcpuExit>(i)))] = sum.exits[i];
  }
}

void fill_vcpu_timers(RunReport& r, const timers::ThreadTimers* t) {
  if (t == nullptr) return;
  const auto s = t->stats();
  const auto& p = s.passes;
  r.vcpu_timers = {{"passes", p.passes},
                   {"timers_run", p.timers_run},
                   {"clock_reads", p.clock_reads},
                   {"alarm_arms", p.arms},
                   {"alarm_arms_skipped", p.arms_skipped},
                   {"alarm_disarms", p.disarms},
                   {"alarm_wakeups", p.alarm_wakeups},
                   {"false_wakeups", p.false_wakeups},
                   {"cancelled_wakeups", p.cancelled_wakeups},
                   {"clamped_deadlines", p.clamped},
                   {"cross_thread_wakes", p.cross_thread_wakes},
                   {"kvm_run_interruptions", s.interruptions},
                   {"timer_signals_taken", s.signals_taken}};
}

nlohmann::json seccomp_json(const SeccompSandbox& sandbox) {
  const SeccompStats ss = sandbox.stats();
  nlohmann::json threads = nlohmann::json::object();
  for (const ThreadKind k : kThreadKinds) {
    const auto& ks = ss.kinds[static_cast<std::size_t>(k)];
    threads[std::string(thread_kind_name(k))] = {{"filters", ks.filters}, {"rules", ks.rules}};
  }
  return {{"mode", std::string(seccomp_mode_name(ss.mode))}, {"threads", threads}};
}

}  // namespace

// Where a restore's time went, in order: opening the snapshot file (before the machine), each
// set-up step, then run()'s start-up; null for a booted guest.
nlohmann::json Machine::restore_phases_json() const {
  if (!snap_.from) return nullptr;
  nlohmann::json phases = nlohmann::json::array();
  phases.push_back({{"phase", "snapshot file"}, {"ms", snap_.from->open_ms}});
  for (const auto& [name, ms] : snap_.phases) phases.push_back({{"phase", name}, {"ms", ms}});
  return phases;
}

// --reset-on-exit's rounds, each the status the guest ended it with (empty without it).
nlohmann::json Machine::rounds_json() const {
  std::lock_guard lock(snap_.rounds_mu);
  return config_.reset_rounds > 0 ? nlohmann::json(snap_.round_statuses) : nlohmann::json::array();
}

RunReport Machine::collect_report() const {
  RunReport r;
  r.kernel = config_.kernel_path;
  r.cmdline = config_.cmdline;
  r.pit_mode = config_.pit == PitMode::kUser ? "user" : "kvm";
  if (const KvmIrqLine* irq0 = board_->pit().irq0()) {
    r.pit_tick = std::string(pit_tick_name(config_.pit_tick));
    r.irq_inject = irq0->inject() == IrqInject::kIoctl ? "ioctl" : "irqfd";
  }
  r.alarm = std::string(timers::alarm_kind_name(config_.alarm));
  r.poller = std::string(loop::poller_kind_name(config_.poller));
  r.exit_reason = run_->reason();
  r.exit_code = run_->status();
  const timers::Nanos now = loop_->mono.now();
  r.wall_seconds = seconds(now - run_->start_mono());
  r.vm_seconds = seconds(loop_->vm_clock.from_monotonic(now) - run_->start_vm());
  r.paused_seconds = r.wall_seconds - r.vm_seconds;
  r.timer_slack_ns = config_.timer_slack_ns;
  fill_ticks(r, board_->pit(), snap_.ticks_at_start);
  fill_loop(r, *loop_);
  fill_host(r, inputs_->ram);
  fill_vcpus(r, *vcpus_, run_->loop_tid());
  fill_vcpu_timers(r, board_->pit().vcpu_dynticks());
  board_->report(r.devices);
  virtio_->report(r.devices);
  if (host_.control) r.api_socket = host_.control->stats_json();
  if (gdb_) r.gdb = gdb_->stats_json();
  auto opt_ms = [](double ms) { return ms >= 0 ? nlohmann::json(ms) : nlohmann::json(nullptr); };
  r.snapshot = {{"restored", snap_.restored},
                {"restore_ms", opt_ms(snap_.restore_ms)},
                {"restore_phases", restore_phases_json()},
                {"resumed_monotonic_ns", snap_.resumed_monotonic_ns >= 0
                                             ? nlohmann::json(snap_.resumed_monotonic_ns)
                                             : nlohmann::json(nullptr)},
                {"resets", snap_.resets},
                {"last_reset_ms", opt_ms(snap_.last_reset_ms)},
                {"reset_pages_dropped", snap_.reset_pages_dropped},
                {"round_statuses", rounds_json()},
                {"taken", snap_.snapshots_taken},
                {"last_write_ms", opt_ms(snap_.last_snapshot_ms)},
                // The files the drives opened (resolved): after a restore, which file each of
                // the snapshot's drives is.
                {"drives", snap_.drive_paths}};
  r.seccomp = seccomp_json(vm_->sandbox);
  r.console_writes = board_->console_sink().stats().writes;
  return r;
}

}  // namespace minivmm::vmm
