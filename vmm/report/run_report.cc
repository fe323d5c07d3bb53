#include "vmm/report/run_report.h"

#include <fmt/format.h>

namespace minivmm::vmm {
namespace {

std::uint64_t sum(const std::map<std::string, std::uint64_t>& counts) {
  std::uint64_t total = 0;
  for (const auto& [name, n] : counts) total += n;
  return total;
}

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json RunReport::to_json() const {
  nlohmann::json j;
  j["kernel"] = kernel;
  j["cmdline"] = cmdline;
  j["vcpus"] = vcpus;
  j["pit"] = pit_mode;
  j["pit_tick"] = pit_tick.empty() ? nlohmann::json(nullptr) : nlohmann::json(pit_tick);
  j["irq_inject"] = irq_inject.empty() ? nlohmann::json(nullptr) : nlohmann::json(irq_inject);
  j["alarm"] = alarm;
  j["poll"] = poller;
  j["exit"] = {{"reason", exit_reason}, {"code", exit_code}};
  j["time"] = {{"wall_s", wall_seconds}, {"vm_s", vm_seconds}, {"paused_s", paused_seconds},
               {"paused", paused}};
  j["snapshot"] = snapshot;
  j["guest"] = {{"ticks_injected", opt(ticks_injected)},
                {"hz_measured", opt(guest_hz_measured)},
                {"ticks_lost", opt(ticks_lost)},
                {"ticks_late", opt(ticks_late)},
                {"ticks_coalesced", opt(ticks_coalesced)},
                {"ticks_merged", opt(ticks_merged)}};
  j["loop"] = {{"iterations", loop_iterations},   {"timeouts", loop_timeouts},
               {"fd_dispatches", fd_dispatches},  {"wake_events", wake_events},
               {"timer_passes", timer_passes},    {"timers_run", timers_run},
               {"alarm_arms", alarm_arms},        {"alarm_arms_skipped", alarm_arms_skipped},
               {"alarm_disarms", alarm_disarms},  {"alarm_wakeups", alarm_wakeups},
               {"false_wakeups", false_wakeups},
               {"cancelled_wakeups", cancelled_wakeups},  {"clamped_deadlines", clamped_deadlines},
               {"clock_reads", clock_reads},      {"alarm_late_us_avg", alarm_late_us_avg},
               {"alarm_late_us_max", alarm_late_us_max},
               {"timer_slack_ns", opt(timer_slack_ns)}};
  nlohmann::json threads = nlohmann::json::object();
  for (const auto& [name, c] : thread_ctx_switches) {
    threads[name] = {{"voluntary_ctx_switches", c.voluntary},
                     {"involuntary_ctx_switches", c.involuntary}};
  }
  j["host"] = {{"cpu_user_s", cpu_user_seconds},
               {"cpu_sys_s", cpu_sys_seconds},
               {"voluntary_ctx_switches", voluntary_ctx_switches},
               {"involuntary_ctx_switches", involuntary_ctx_switches},
               {"threads", threads},
               {"memory", memory_json()}};
  j["loop_syscalls"] = loop_syscalls;
  j["vcpu_syscalls"] = vcpu_syscalls;
  j["vcpu_timers"] = vcpu_timers;
  const std::uint64_t loop_total = sum(loop_syscalls);
  const std::uint64_t vcpu_total = sum(vcpu_syscalls);
  // Every syscall minivmm makes while running, by its own count: the loop thread's, the vCPU
  // thread's (KVM_RUN, and the PIT tick with --pit-tick vcpu) and console output.
  // `strace -c -f` of the same run shows these plus start-up and exit.
  j["syscalls"] = {{"loop", loop_total},
                   {"vcpu", vcpu_total},
                   {"kvm_run", kvm_run_calls},
                   {"console_write", console_writes},
                   {"total", loop_total + vcpu_total + console_writes}};
  j["kvm_exits"] = kvm_exits;
  j["devices"] = devices;
  j["auto_poller"] = auto_poller;
  j["api_socket"] = api_socket;
  j["gdb"] = gdb;
  j["seccomp"] = seccomp;
  if (ticks_injected && *ticks_injected > 0) {
    const double t = static_cast<double>(*ticks_injected);
    j["per_tick"] = {
        {"loop_syscalls", static_cast<double>(loop_total) / t},
        {"vcpu_syscalls", static_cast<double>(vcpu_total) / t},
        {"syscalls", static_cast<double>(loop_total + vcpu_total + console_writes) / t},
        {"ctx_switches",
         static_cast<double>(voluntary_ctx_switches + involuntary_ctx_switches) / t},
        {"cpu_us", (cpu_user_seconds + cpu_sys_seconds) * 1e6 / t},
        {"clock_reads", static_cast<double>(clock_reads) / t}};
  }
  return j;
}

std::string RunReport::to_text() const {
  std::string s;
  s += fmt::format("minivmm: {} (exit code {})\n", exit_reason, exit_code);
  s += fmt::format("  ran {:.3f} s wall, {:.3f} s guest time; pit={}{} alarm={} poll={}\n",
                   wall_seconds, vm_seconds, pit_mode,
                   pit_tick.empty() ? "" : " pit-tick=" + pit_tick + " irq=" + irq_inject,
                   alarm, poller);
  if (ticks_injected) {
    s += fmt::format("  guest ticks injected {} ({:.2f} Hz measured), lost {}, late {}, coalesced {}, "
                     "merged {}\n",
                     *ticks_injected, guest_hz_measured.value_or(0.0), ticks_lost.value_or(0),
                     ticks_late.value_or(0), ticks_coalesced.value_or(0),
                     ticks_merged.value_or(0));
  } else {
    s += "  guest ticks: delivered inside KVM (in-kernel PIT or LAPIC timer), not counted here\n";
  }
  s += fmt::format("  loop: {} iterations, {} timer callbacks, {} alarm arms ({} skipped unchanged), "
                   "{} false wakeups, {} clock reads\n",
                   loop_iterations, timers_run, alarm_arms, alarm_arms_skipped, false_wakeups,
                   clock_reads);
  auto kinds = [](const std::map<std::string, std::uint64_t>& counts) {
    std::string k;
    for (const auto& [name, n] : counts) {
      if (n) k += fmt::format(" {}={}", name, n);
    }
    return k;
  };
  const std::uint64_t sys = sum(loop_syscalls);
  const std::uint64_t vcpu_sys = sum(vcpu_syscalls);
  s += fmt::format("  loop syscalls: {} ({} ); vCPU syscalls: {} ({} ); console writes: {}\n",
                   sys, kinds(loop_syscalls), vcpu_sys, kinds(vcpu_syscalls), console_writes);
  if (!vcpu_timers.is_null()) {
    s += fmt::format("  vCPU timers: {} passes, {} timer callbacks, {} alarm arms ({} skipped), "
                     "{} false wakeups\n",
                     vcpu_timers.value("passes", 0ull), vcpu_timers.value("timers_run", 0ull),
                     vcpu_timers.value("alarm_arms", 0ull),
                     vcpu_timers.value("alarm_arms_skipped", 0ull),
                     vcpu_timers.value("false_wakeups", 0ull));
  }
  if (rss_bytes) {
    s += fmt::format("  memory: {} KiB resident ({} KiB peak), {} KiB of it guest RAM; VMM {} KiB "
                     "RSS, {} KiB private, {} KiB PSS\n",
                     *rss_bytes >> 10, peak_rss_bytes.value_or(0) >> 10,
                     guest_ram_resident_bytes >> 10, vmm_rss_bytes().value_or(0) >> 10,
                     vmm_anon_bytes().value_or(0) >> 10, vmm_pss_bytes().value_or(0) >> 10);
  }
  s += fmt::format("  host: {:.3f} s user, {:.3f} s sys, {} voluntary + {} involuntary context switches\n",
                   cpu_user_seconds, cpu_sys_seconds, voluntary_ctx_switches,
                   involuntary_ctx_switches);
  if (!thread_ctx_switches.empty()) {
    std::string per_thread;
    for (const auto& [name, c] : thread_ctx_switches) {
      per_thread += fmt::format(" {} {}+{}", name, c.voluntary, c.involuntary);
    }
    s += fmt::format("  context switches by thread (voluntary+involuntary):{}\n", per_thread);
  }
  if (seccomp.is_object()) {
    std::string filters;
    if (seccomp.contains("threads")) {
      for (const auto& [kind, k] : seccomp["threads"].items()) {
        const auto n = k.value("filters", std::uint64_t{0});
        if (n) filters += fmt::format(" {} {}x{}", kind, n, k.value("rules", std::uint64_t{0}));
      }
    }
    s += fmt::format("  seccomp: {}; filters by thread (count x rules):{}\n",
                     seccomp.value("mode", std::string("?")), filters.empty() ? " none" : filters);
  }
  std::string exits;
  for (const auto& [name, n] : kvm_exits) {
    if (n) exits += fmt::format(" {}={}", name, n);
  }
  s += fmt::format("  KVM exits:{}\n", exits.empty() ? " none" : exits);
  if (ticks_injected && *ticks_injected > 0) {
    const double t = static_cast<double>(*ticks_injected);
    s += fmt::format("  per tick: {:.2f} syscalls ({:.2f} loop, {:.2f} vCPU), {:.2f} context "
                     "switches, {:.1f} us CPU\n",
                     static_cast<double>(sys + vcpu_sys + console_writes) / t,
                     static_cast<double>(sys) / t, static_cast<double>(vcpu_sys) / t,
                     static_cast<double>(voluntary_ctx_switches + involuntary_ctx_switches) / t,
                     (cpu_user_seconds + cpu_sys_seconds) * 1e6 / t);
  }
  return s;
}

nlohmann::json RunReport::memory_json() const {
  const auto kib = [](std::optional<std::uint64_t> b) -> nlohmann::json {
    if (!b) return nullptr;
    return *b >> 10;
  };
  return {{"rss_kib", kib(rss_bytes)},
          {"peak_rss_kib", kib(peak_rss_bytes)},
          {"anon_kib", kib(anon_bytes)},
          {"pss_kib", kib(pss_bytes)},
          {"guest_ram_resident_kib", guest_ram_resident_bytes >> 10},
          // What the VMM itself holds: the three above less the guest RAM the host backed.
          {"vmm_rss_kib", kib(vmm_rss_bytes())},
          {"vmm_anon_kib", kib(vmm_anon_bytes())},
          {"vmm_pss_kib", kib(vmm_pss_bytes())}};
}

}  // namespace minivmm::vmm
