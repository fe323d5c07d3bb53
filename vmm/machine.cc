#include "vmm/machine.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "loop/auto_poller.h"
#include "timers/clock_read_counter.h"
#include "timers/syscall_counters.h"
#include "vmm/kernel_loader.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

constexpr std::uint32_t kIrqPit = 0;
constexpr std::uint32_t kIrqCom1 = 4;
constexpr std::uint32_t kIrqRtc = 8;

double seconds(timers::Nanos n) { return static_cast<double>(n.count()) / 1e9; }

double seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

std::unique_ptr<timers::AlarmTimer> make_alarm(const Config& c) {
  if (c.periodic_alarm_hz <= 0 || c.periodic_alarm_hz > 100'000) {
    throw VmmError(ExitCode::kUsage, "--periodic-hz must be between 1 and 100000");
  }
  timers::AlarmOptions opts;
  opts.periodic_interval = timers::Nanos{1'000'000'000 / c.periodic_alarm_hz};
  try {
    return timers::make_alarm_timer(c.alarm, opts);
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("host alarm: ") + e.what());
  }
}

std::unique_ptr<loop::Poller> make_loop_poller(const Config& c) {
  try {
    return loop::make_poller(c.poller);
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("poller: ") + e.what());
  }
}

}  // namespace

Machine::Machine(Config config)
    : config_(std::move(config)),
      kernel_image_(read_file(config_.kernel_path, to_int(ExitCode::kBadKernel))),
      initrd_image_(config_.initrd_path.empty()
                        ? std::vector<std::byte>{}
                        : read_file(config_.initrd_path, to_int(ExitCode::kBadKernel))),
      ram_(config_.memory_bytes),
      kernel_(load_kernel(ram_.memory(), kernel_image_, config_.cmdline, initrd_image_)),
      alarm_(make_alarm(config_)),
      dynticks_(std::make_unique<timers::Dynticks>(
          *alarm_, mono_, std::vector<timers::TimerList*>{&vm_timers_, &rt_timers_},
          timers::DynticksOptions{timers::Nanos{config_.min_delta_ns}})),
      loop_(std::make_unique<loop::EventLoop>(make_loop_poller(config_), *dynticks_)),
      control_(make_control_socket()),
      kvm_(),
      vm_(kvm_, ram_.memory()),
      irq0_(vm_, kIrqPit,
            config_.irq_inject_ioctl.value_or(config_.pit_tick == PitTick::kVcpu)
                ? IrqInject::kIoctl
                : IrqInject::kIrqfd),
      irq4_(vm_, kIrqCom1),
      irq8_(vm_, kIrqRtc),
      uart_(irq4_, console_sink_, &rt_timers_),
      debug_exit_([this](int status) { request_stop_status(status, "guest debug-exit"); }),
      i8042_([this] { request_stop(ExitCode::kOk, "guest reset through the i8042"); }),
      rtc_(vm_timers_, wall_clock_, irq8_, config_.memory_bytes),
      duration_timer_(rt_timers_, "duration",
                      [this](const timers::Timer::Expiry&) {
                        request_stop(ExitCode::kOk, "--duration expired");
                      }) {
  // SIGINT/SIGTERM/SIGHUP (and SIGTSTP/SIGCONT) wait, pending, for the signal thread started at
  // the end: a Ctrl-C during set-up (after ConsoleInput made the terminal raw) must not kill the
  // process the default way.
  try {
    StopSignals::block();
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("signals: ") + e.what());
  }

  // Port map of a PC (the addresses every OS probes).
  bus_.attach(0x3f8, 8, uart_);
  bus_.attach(0xf4, 4, debug_exit_);
  bus_.attach(0x80, 1, post_port_);
  bus_.attach(0x60, 1, i8042_.data_port());
  bus_.attach(0x64, 1, i8042_.command_port());
  bus_.attach(0x70, 2, rtc_);
  if (config_.pit == PitMode::kKvm) {
    vm_.create_kernel_pit();
  } else {
    timers::TimerList* pit_timers = &vm_timers_;
    if (config_.pit_tick == PitTick::kVcpu) {
      vcpu_timers_ = std::make_unique<timers::ThreadTimers>(
          mono_, std::vector<timers::TimerList*>{&vcpu_vm_timers_},
          timers::DynticksOptions{timers::Nanos{config_.min_delta_ns}});
      pit_timers = &vcpu_vm_timers_;
    }
    if (config_.pit_tick == PitTick::kKernel) {
      KernelPulseTrain::Binding binding;
      binding.attach = [this](int fd) { vm_.add_irqfd(fd, kIrqPit); };
      binding.detach = [this](int fd) { vm_.remove_irqfd(fd, kIrqPit); };
      binding.failed = [this](const std::string& why) {
        spdlog::error("{}", why);
        request_stop(ExitCode::kHostFailure, why);
      };
      pit_train_ = std::make_unique<KernelPulseTrain>(vm_timers_, std::move(binding));
    }
    pit_ = std::make_unique<devices::I8254Pit>(*pit_timers, irq0_, config_.lost_ticks,
                                               pit_train_.get());
    speaker_ = std::make_unique<devices::I8254SpeakerPort>(*pit_);
    bus_.attach(0x40, 4, *pit_);
    bus_.attach(0x61, 1, *speaker_);
  }

  if (config_.console_input) {
    devices::ConsoleInputOptions opts;
    opts.interactive = config_.interactive;
    console_input_ = std::make_unique<devices::ConsoleInput>(
        *loop_, uart_, [this] { request_stop(ExitCode::kOk, "quit from the console (Ctrl-A x)"); },
        opts);
  }

  const LoadedKernel& k = kernel_;
  spdlog::debug("kernel loaded at {:#x}-{:#x}, entry {:#x}, boot info {:#x}", k.load_addr,
                k.load_end, k.entry_addr, k.boot_info_addr);

  std::vector<kvm_cpuid_entry2> cpuid;
  try {
    cpuid = apply_cpuid_policy(kvm_.supported_cpuid(), config_.cpu, config_.cpuid_mask);
  } catch (const std::invalid_argument& e) {
    throw VmmError(ExitCode::kUsage, e.what());
  }
  vcpu_ = std::make_unique<Vcpu>(vm_, 0, bus_, [this](ExitCode code, const std::string& why) {
    request_stop(code, why);
  });
  vcpu_->configure(k.boot_state, cpuid);
  if (vcpu_timers_) {
    vcpu_timers_->set_wake([this] { vcpu_->interrupt(); });
    vcpu_->host_timers(vcpu_timers_.get());
  }

  // Before run() starts the vCPU thread, so that it and every later thread inherit the mask.
  try {
    stop_signals_ = std::make_unique<StopSignals>([this](int signo) { on_signal(signo); });
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("signals: ") + e.what());
  }
}

std::unique_ptr<ControlSocket> Machine::make_control_socket() {
  if (config_.api_socket.empty()) return nullptr;
  // The handlers reach the vCPU and the report, which exist only later: they run on the loop
  // thread, from run(), never during construction.
  ControlHandlers handlers;
  handlers.stats = [this] { return collect_report().to_json(); };
  handlers.pause = [this] {
    if (paused()) return false;
    pause();
    return true;
  };
  handlers.resume = [this] {
    if (!paused()) return false;
    resume();
    return true;
  };
  handlers.quit = [this] { request_stop(ExitCode::kOk, "quit from the control socket"); };
  try {
    return std::make_unique<ControlSocket>(*loop_, config_.api_socket, std::move(handlers));
  } catch (const std::invalid_argument& e) {
    throw VmmError(ExitCode::kUsage, std::string("--api-socket: ") + e.what());
  } catch (const std::system_error& e) {
    // A path the user can fix (missing folder, no permission, read-only, taken) is a usage
    // error; running out of fds or memory is the host's.
    const int err = e.code().value();
    const bool users = err == ENOENT || err == ENOTDIR || err == EACCES || err == EPERM ||
                       err == EROFS || err == ELOOP || err == ENAMETOOLONG || err == EADDRINUSE;
    throw VmmError(users ? ExitCode::kUsage : ExitCode::kHostFailure,
                   std::string("--api-socket: ") + e.what());
  }
}

Machine::~Machine() {
  stop_signals_.reset();
  if (vcpu_) {
    vcpu_->request_stop();
    vcpu_->join();
  }
}

void Machine::on_signal(int signo) {
  if (signo == SIGINT) request_stop(ExitCode::kSigint, "interrupted (SIGINT)");
  if (signo == SIGTERM) request_stop(ExitCode::kSigterm, "terminated (SIGTERM)");
  // A closed terminal or a logged-out session: nobody is left to read the console or press
  // Ctrl-A x, so end the run in order (summary, stats, terminal restored) like SIGTERM.
  if (signo == SIGHUP) request_stop(ExitCode::kSighup, "hang-up (SIGHUP)");
  if (signo == SIGTSTP) {
    // Ctrl-Z reaches us only as `kill -TSTP` or with a cooked terminal (raw mode turns ISIG
    // off: Ctrl-Z is the guest's). Give the shell its terminal back, then stop as the default
    // action would; the guest's clock runs on, and its missed ticks follow --lost-ticks.
    devices::ConsoleInput::restore_terminal();
    ::kill(::getpid(), SIGSTOP);
  }
  if (signo == SIGCONT) {
    // Raw again, but only in the foreground: tcsetattr from a background job would stop us
    // with SIGTTOU.
    if (::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) devices::ConsoleInput::reapply_raw_mode();
  }
}

void Machine::request_stop(ExitCode code, const std::string& why) {
  request_stop_status(to_int(code), why);
}

void Machine::request_stop_status(int status, const std::string& why) {
  {
    std::lock_guard lock(stop_mu_);
    if (stop_requested_.exchange(true)) return;
    exit_status_ = status;
    exit_reason_ = why;
  }
  if (vcpu_) vcpu_->request_stop();
  loop_->stop();
}

void Machine::pause() {
  if (vm_clock_.paused()) return;
  vcpu_->pause();
  // Before vm_clock stops: an edge the kernel fired after the stop would be re-armed on resume.
  if (pit_train_) pit_train_->suspend();
  vm_clock_.pause();
  dynticks_->rearm();
}

void Machine::resume() {
  if (!vm_clock_.paused()) return;
  vm_clock_.resume();
  if (pit_train_) pit_train_->resume();
  dynticks_->rearm();
  vcpu_->resume();
}

int Machine::run() {
  if (config_.timer_slack_ns) {
    // Applies to this (the loop) thread's sleeps: ppoll/epoll timeouts and timerfd expiries.
    if (::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(*config_.timer_slack_ns), 0, 0,
                0) != 0) {
      throw VmmError(ExitCode::kHostFailure,
                     std::string("PR_SET_TIMERSLACK: ") + std::strerror(errno));
    }
  }
  start_mono_ = mono_.now();
  start_vm_ = vm_clock_.now();
  if (config_.duration_s) {
    duration_timer_.arm_at(start_mono_ +
                           timers::Nanos{static_cast<std::int64_t>(*config_.duration_s * 1e9)});
  }
  vcpu_->start();
  const bool ok = loop_->run();
  if (!ok) {
    spdlog::error("main loop failed: {}", std::strerror(errno));
    request_stop(ExitCode::kHostFailure, "main loop failed");
  }
  vcpu_->request_stop();
  vcpu_->join();
  uart_.flush();
  console_input_.reset();  // restores the terminal before the summary is printed
  report_ = collect_report();
  std::lock_guard lock(stop_mu_);
  return exit_status_;
}

RunReport Machine::collect_report() const {
  RunReport r;
  r.kernel = config_.kernel_path;
  r.cmdline = config_.cmdline;
  r.pit_mode = config_.pit == PitMode::kUser ? "user" : "kvm";
  if (pit_) {
    r.pit_tick = config_.pit_tick == PitTick::kVcpu     ? "vcpu"
                 : config_.pit_tick == PitTick::kKernel ? "kernel"
                                                        : "loop";
    r.irq_inject = irq0_.inject() == IrqInject::kIoctl ? "ioctl" : "irqfd";
  }
  r.alarm = std::string(timers::alarm_kind_name(config_.alarm));
  r.poller = std::string(loop::poller_kind_name(config_.poller));
  {
    std::lock_guard lock(stop_mu_);
    r.exit_reason = exit_reason_;
    r.exit_code = exit_status_;
  }
  const timers::Nanos now = mono_.now();
  r.wall_seconds = seconds(now - start_mono_);
  r.vm_seconds = seconds(vm_clock_.from_monotonic(now) - start_vm_);
  r.paused_seconds = r.wall_seconds - r.vm_seconds;

  if (pit_) {
    const auto s = pit_->stats();
    r.ticks_injected = s.ticks_injected;
    r.ticks_lost = s.ticks_lost;
    r.ticks_late = s.ticks_late;
    r.ticks_coalesced = s.ticks_coalesced;
    if (r.vm_seconds > 0) r.guest_hz_measured = static_cast<double>(s.ticks_injected) / r.vm_seconds;
  }

  const auto& ls = loop_->stats();
  r.loop_iterations = ls.iterations;
  r.loop_timeouts = ls.timeouts;
  r.fd_dispatches = ls.fd_dispatches;
  r.wake_events = ls.wake_events;
  const auto& ds = dynticks_->stats();
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
  r.timer_slack_ns = config_.timer_slack_ns;
  r.paused = vm_clock_.paused();

  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.cpu_user_seconds = seconds(ru.ru_utime);
  r.cpu_sys_seconds = seconds(ru.ru_stime);
  r.voluntary_ctx_switches = static_cast<std::uint64_t>(ru.ru_nvcsw);
  r.involuntary_ctx_switches = static_cast<std::uint64_t>(ru.ru_nivcsw);

  for (std::size_t i = 0; i < static_cast<std::size_t>(timers::Syscall::kCount); ++i) {
    const auto s = static_cast<timers::Syscall>(i);
    r.loop_syscalls[std::string(timers::syscall_name(s))] = timers::loop_syscalls().get(s);
    r.vcpu_syscalls[std::string(timers::syscall_name(s))] = timers::vcpu_syscalls().get(s);
  }
  if (vcpu_timers_) {
    const auto t = vcpu_timers_->stats();
    const auto& p = t.passes;
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
                     {"kvm_run_interruptions", t.interruptions},
                     {"timer_signals_taken", t.signals_taken}};
  }
  {
    const auto u = uart_.stats();
    r.devices["uart"] = {{"bytes_out", u.bytes_out}, {"sink_writes", u.sink_writes},
                         {"bytes_in", u.bytes_in}, {"rx_overruns", u.rx_overruns},
                         {"bad_accesses", u.bad_accesses}};
    if (pit_) {
      const auto p = pit_->stats();
      r.devices["pit"] = {{"ticks_injected", p.ticks_injected}, {"ticks_late", p.ticks_late},
                          {"ticks_lost", p.ticks_lost}, {"ticks_coalesced", p.ticks_coalesced},
                          {"ticks_owed", p.ticks_owed}, {"reprogrammings", p.reprogrammings},
                          {"period_clamps", p.period_clamps}, {"timer_arms", p.timer_arms},
                          {"train_starts", p.train_starts}, {"bad_accesses", p.bad_accesses}};
      if (pit_train_) {
        const auto t = pit_train_->stats();
        r.devices["pit"]["kernel_train"] = {
            {"delivered", t.delivered}, {"generations", t.generations},
            {"refills", t.refills},     {"polls_submitted", t.polls_submitted},
            {"missed", t.missed},       {"failures", t.failures}};
      }
    }
    const auto rt = rtc_.stats();
    r.devices["rtc"] = {{"periodic_irqs", rt.periodic_irqs}, {"alarm_irqs", rt.alarm_irqs},
                        {"update_irqs", rt.update_irqs}, {"reg_c_reads", rt.reg_c_reads},
                        {"timer_arms", rt.timer_arms}, {"bad_accesses", rt.bad_accesses}};
    const auto k = i8042_.stats();
    r.devices["i8042"] = {{"reads", k.reads}, {"writes", k.writes},
                          {"reset_requests", k.reset_requests},
                          {"bad_accesses", k.bad_accesses}};
    const auto con = console_sink_.stats();
    r.devices["console"] = {{"writes", con.writes}, {"bytes", con.bytes},
                            {"dropped_bytes", con.dropped_bytes}, {"errors", con.errors},
                            {"gone", con.gone}};
    r.devices["debug_exit"] = {{"exit_requests", debug_exit_.exit_requests()}};
    r.devices["post_port"] = {{"writes", post_port_.writes()}};
    nlohmann::json unmapped = nlohmann::json::object();
    for (const auto& u2 : bus_.unmapped()) {
      unmapped[fmt::format("{:#06x}", u2.port)] = {{"reads", u2.reads}, {"writes", u2.writes}};
    }
    r.devices["unmapped_ports"] = unmapped;
  }
  if (control_) r.api_socket = control_->stats_json();
  if (auto* ap = dynamic_cast<loop::AutoPoller*>(&loop_->poller())) {
    const auto s = ap->stats();
    nlohmann::json log = nlohmann::json::array();
    for (const auto& d : ap->decisions()) {
      log.push_back({{"wait", d.wait_index},
                     {"from", std::string(loop::poller_kind_name(d.from))},
                     {"to", std::string(loop::poller_kind_name(d.to))},
                     {"from_ns", d.from_cost.count()},
                     {"to_ns", d.to_cost.count()},
                     {"fds", d.fds},
                     {"trigger", std::string(loop::auto_trigger_name(d.trigger))},
                     {"reason", std::string(loop::auto_reason_name(d.reason))}});
    }
    r.auto_poller = {{"active", std::string(loop::poller_kind_name(s.active))},
                     {"waits", s.waits},
                     {"measured_waits", s.measured_waits},
                     {"trials", s.samples},
                     {"switches", s.switches},
                     {"aborted_trials", s.aborted_trials},
                     {"ppoll_wait_ns", s.ppoll_cost.count()},
                     {"epoll_wait_ns", s.epoll_cost.count()},
                     {"trial_interval", s.trial_interval},
                     {"decisions", log}};
  }
  const VcpuStats vs = vcpu_->stats();
  r.kvm_run_calls = vs.kvm_run_calls;
  r.console_writes = console_sink_.stats().writes;
  for (std::size_t i = 0; i < vs.exits.size(); ++i) {
    r.kvm_exits[std::string(vcpu_exit_name(static_cast<VcpuExit>(i)))] = vs.exits[i];
  }
  return r;
}

}  // namespace minivmm::vmm
