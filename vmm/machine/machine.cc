#include "vmm/machine/machine.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "devices/log/log.h"
#include "vmm/host/cpu_affinity.h"
#include "vmm/host/crash_signals.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/vcpu/x86_vcpu_setup.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

// The one place a set-up step's failure becomes a VmmError: a VmmError keeps its code, the
// host refusing something (std::system_error) is kHostFailure, named by the step.
template <typename Step>
void step(const char* name, Step&& s) {
  try {
    s();
  } catch (const VmmError&) {
    throw;
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string(name) + ": " + e.what());
  }
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// A control-socket path the user can fix (missing folder, no permission, read-only, taken) is
// a usage error; running out of fds or memory is the host's.
bool users_socket_error(int err) {
  return err == ENOENT || err == ENOTDIR || err == EACCES || err == EPERM || err == EROFS ||
         err == ELOOP || err == ENAMETOOLONG || err == EADDRINUSE;
}

}  // namespace

Machine::Machine(Config config, std::function<void()> open_outputs, const SnapshotFile* restore)
    : config_(std::move(config)) {
  timed_step("signals", [&] { block_stop_signals(); });
  timed_step("event loop", [&] {
    loop_ = std::make_unique<MachineLoop>(config_);
    run_ = std::make_unique<RunControl>(
        *loop_, [this] {
          if (config_.dump_vcpus_on_duration && !run_->stopping()) {
            hold_.dump_vcpus.store(true, std::memory_order_release);
          }
          request_stop_status(config_.duration_status, "--duration expired");
        });
  });
  // User input first: the kernel, initrd and drives, the socket path, the network back-ends.
  timed_step("boot inputs", [&] {
    std::vector<std::uint64_t> sizes;
    if (restore) sizes = load_machine_config(restore->meta.section("config").data).drive_sizes;
    inputs_ = std::make_unique<BootInputs>(config_, restore, sizes);
    for (const auto& d : inputs_->drives) {
      snap_.drive_sizes.push_back(d.size_bytes());
      snap_.drive_paths.push_back(d.resolved_path());
      if (restore) {
        log::info("--restore: drive {}: {}", snap_.drive_paths.size() - 1, one_line(d.resolved_path()));
      }
    }
    if (restore) {
      snap_.from = restore;
      snap_.backing_gone_message = "minivmm: error: --restore: " + one_line(restore->path) +
                              ": the snapshot file was cut short while the guest ran: its "
                              "memory is gone (exit 18)\n";
      const auto ram = inputs_->ram.memory().bytes();
      set_file_backed_memory(ram.data(), ram.size(), snap_.backing_gone_message.c_str(),
                             to_int(ExitCode::kSnapshotGone));
    }
    std::vector<std::string> paths{config_.kernel_path, config_.initrd_path};
    for (const auto& d : config_.drives) paths.push_back(d.path);
    for (const std::string& path : paths) {
      struct stat st {};
      if (!path.empty() && ::stat(path.c_str(), &st) == 0) {
        snap_.input_inodes.emplace_back(st.st_dev, st.st_ino);
      }
    }
  });
  timed_step("control socket", [&] { bind_control_socket(); });
  timed_step("network", [&] { host_.nets = std::make_unique<NetBackends>(config_, *loop_); });
  timed_step("output files", [&] {
    if (open_outputs) open_outputs();
  });
  timed_step("KVM", [&] { open_vm(); });
  timed_step("board", [&] { build_board(); });
  timed_step("virtio", [&] { build_virtio(); });
  timed_step("console input", [&] { attach_console_input(); });
  timed_step("vCPUs", [&] { build_vcpus(); });
  // --gdb: the stub listens from here; the vCPUs' debug exits go to it.
  if (!config_.gdb.empty()) {
    timed_step("gdb", [&] {
      gdb::KvmGdbHooks h;
      h.pause = [this] { pause(); };
      h.resume = [this] { resume(); };
      h.end_run = [this](int status, const std::string& why) { request_stop_status(status, why); };
      std::vector<int> fds;
      for (const auto& v : vcpus_->all()) fds.push_back(v->fd());
      // KVM_GUESTDBG_BLOCKIRQ (Linux 5.16): a step runs the next instruction, not the tick's
      // interrupt handler.
      const int dbg_flags = ::ioctl(vm_->vm.fd(), KVM_CHECK_EXTENSION, KVM_CAP_SET_GUEST_DEBUG2);
      const bool block_irq = dbg_flags > 0 && (dbg_flags & KVM_GUESTDBG_BLOCKIRQ) != 0;
      gdb_ = std::make_unique<gdb::GdbStub>(
          gdb::GdbOptions{*gdb::parse_gdb_address(config_.gdb), config_.gdb_wait,
                          config_.gdb_on_fault},
          *loop_->loop, std::move(fds), vm_->vm.memory(), block_irq, std::move(h));
      for (const auto& v : vcpus_->all()) {
        v->debug_exit_hook([this, i = v->index()](int fd, const kvm_debug_exit_arch& a) {
          return gdb_->debug_exit(i, fd, a);
        });
      }
      vm_->facts.gdb = true;
    });
  }
  if (restore) timed_step("restore", [&] { restore_from(*restore); });
  timed_step("signals", [&] { start_signal_thread(); });
}

template <typename Step>
void Machine::timed_step(const char* name, Step&& s) {
  const auto t = std::chrono::steady_clock::now();
  step(name, std::forward<Step>(s));
  snap_.phases.emplace_back(name, ms_since(t));
}

Machine::~Machine() {
  stop_signals_.reset();
  if (vcpus_) {
    vcpus_->request_stop();
    vcpus_->join();
  }
  // The mapping and the message go with this Machine.
  if (snap_.from) set_file_backed_memory(nullptr, 0, nullptr, 0);
}

std::optional<std::string> Machine::restored_memory_gone() const {
  if (!snap_.from) return std::nullopt;
  struct stat st {};
  const std::uint64_t needed = snap_.from->meta.memory_offset + snap_.from->meta.memory_bytes;
  if (::fstat(snap_.from->fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) >= needed) {
    return std::nullopt;
  }
  return "--restore: " + one_line(snap_.from->path) +
         ": the snapshot file was cut short while the guest ran (" + std::to_string(st.st_size) +
         " bytes, its memory needs " + std::to_string(needed) + "): the guest's memory is gone";
}

// SIGINT/SIGTERM/SIGHUP (and SIGTSTP/SIGCONT) wait, pending, for the signal thread started at
// the end: a Ctrl-C during set-up (after ConsoleInput made the terminal raw) must not kill the
// process the default way.
void Machine::block_stop_signals() { StopSignals::block(); }

void Machine::bind_control_socket() {
  if (config_.api_socket.empty()) return;
  // The handlers reach the vCPUs and the report, which exist only later: they run on the loop
  // thread, from run(), never during construction.
  ControlHandlers handlers;
  handlers.stats = [this] { return collect_report().to_json(); };
  handlers.pause = [this] {
    if (paused()) return false;
    pause();
    return true;
  };
  handlers.resume = [this] {
    if (hold_.asleep) {
      throw std::runtime_error(R"(the guest is asleep (ACPI S3): {"cmd":"wake"} wakes it)");
    }
    if (!paused()) return false;
    resume();
    return true;
  };
  handlers.wake = [this] { return wake(devices::AcpiPm::WakeReason::kOther); };
  handlers.snapshot = [this](const std::string& path, bool resume) {
    return snapshot(path, resume);
  };
  handlers.reset = [this] { return reset(); };
  handlers.mailbox = [this](const nlohmann::json& request) { return mailbox(request); };
  handlers.quit = [this] { request_stop(ExitCode::kOk, "quit from the control socket"); };
  try {
    host_.control = std::make_unique<ControlSocket>(*loop_->loop, loop_->loop_rt_timers,
                                               config_.api_socket, std::move(handlers));
  } catch (const std::invalid_argument& e) {
    throw VmmError(ExitCode::kUsage, std::string("--api-socket: ") + e.what());
  } catch (const std::system_error& e) {
    throw VmmError(users_socket_error(e.code().value()) ? ExitCode::kUsage
                                                        : ExitCode::kHostFailure,
                   std::string("--api-socket: ") + e.what());
  }
}

void Machine::open_vm() {
  vm_ = std::make_unique<VmHandles>(config_, inputs_->ram.memory());
  snap_.kvm_caps = probe_kvm_state_caps(vm_->kvm);
}

void Machine::build_board() {
  board_ = std::make_unique<PcBoard>(
      config_, *loop_, *vm_, inputs_->kernel,
      [this](int status, const std::string& why) { guest_ended(status, why); },
      [this] { request_suspend(); });
  hold_.rtc_wake = std::make_unique<timers::Timer>(
      loop_->loop_rt_timers, "s3-rtc-wake",
      [this](const timers::Timer::Expiry&) { wake(devices::AcpiPm::WakeReason::kRtc); });
}

void Machine::build_virtio() {
  virtio_ = std::make_unique<VirtioBoard>(config_, *vm_, *loop_, board_->mmio(),
                                          board_->console_sink(), std::move(inputs_->drives),
                                          *host_.nets);
}

void Machine::attach_console_input() {
  if (!config_.console_input) return;
  devices::ConsoleInputOptions opts;
  opts.interactive = config_.interactive;
  auto on_quit = [this] { request_stop(ExitCode::kOk, "quit from the console (Ctrl-A x)"); };
  if (devices::VirtioConsole* console = virtio_->console()) {
    console_input_ = std::make_unique<devices::ConsoleInput>(
        *loop_->loop, static_cast<devices::ConsoleRxPort&>(*console), on_quit, opts);
  } else {
    console_input_ =
        std::make_unique<devices::ConsoleInput>(*loop_->loop, board_->uart(), on_quit, opts);
  }
}

void Machine::build_vcpus() {
  const LoadedKernel& k = inputs_->kernel;
  log::debug("kernel loaded at {:#x}-{:#x}, entry {:#x}, boot info {:#x}", k.load_addr,
             k.load_end, k.entry_addr, k.boot_info_addr);
  vcpus_ = std::make_unique<VcpuSet>(
      config_, *vm_, k, board_->io(), board_->mmio(),
      [this](ExitCode code, const std::string& why) { request_stop(code, why); });
  if (timers::ThreadTimers* t = board_->pit().vcpu_dynticks()) vcpus_->host_pit_timers(*t);
  if (snap_.from) {
    vm_->facts.restored = true;
    vm_->facts.pagemap_fd = inputs_->ram.pagemap_fd();
    for (const auto& v : vcpus_->all()) v->host_fault_check([this] { return restored_memory_gone(); });
  }
  for (const auto& v : vcpus_->all()) {
    vm_->facts.vcpu_fds.push_back(v->fd());
    v->guest_hold(&hold_.suspend);
    v->dump_on_stop(&hold_.dump_vcpus);
  }
}

// Before run() starts the vCPU threads, so that they and every later thread inherit the mask.
void Machine::start_signal_thread() {
  stop_signals_ = std::make_unique<StopSignals>([this](int signo) { on_signal(signo); },
                                                [this] {
                                                  return vm_->sandbox.try_enter(
                                                      ThreadKind::kSignals,
                                                      signals_allow_list(vm_->facts));
                                                });
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

void Machine::guest_ended(int status, const std::string& why) {
  // On the thread of the device the guest wrote (a vCPU's): the reset is the loop's to make.
  {
    std::lock_guard lock(snap_.rounds_mu);
    if (snap_.reset_pending) return;  // the same round ending again before its reset ran
    snap_.round_statuses.push_back(status);
    if (snap_.resets_on_exit < config_.reset_rounds && snap_.from) {
      ++snap_.resets_on_exit;
      snap_.reset_pending = true;
      log::debug("round {} ended ({}): reset to the snapshot", snap_.round_statuses.size(), why);
      loop_->loop->schedule([this] { reset_after_round(); });
      return;
    }
  }
  request_stop_status(status, why);
}

void Machine::reset_after_round() {
  try {
    reset();
  } catch (const std::exception& e) {
    request_stop(ExitCode::kHostFailure, std::string("--reset-on-exit: ") + e.what());
  }
  std::lock_guard lock(snap_.rounds_mu);
  snap_.reset_pending = false;
}

void Machine::request_stop_status(int status, const std::string& why) {
  // --gdb-on-fault: a panic or a triple fault waits for the debugger instead.
  if (gdb_ && gdb_->hold_fault(status, why)) return;
  if (!run_->claim(status, why)) return;
  if (vcpus_) vcpus_->request_stop();
  loop_->loop->stop();
}

void Machine::pause() {
  if (paused()) return;
  vcpus_->pause();
  // kvmclock stops with vm_clock: the guest's own clock does not count the pause either. It
  // goes on from the later of KVM's reading and what a vCPU last saw, so it never goes back.
  hold_.kvmclock = read_kvm_clock(vm_->vm.fd());
  for (const auto& v : vcpus_->all()) {
    if (const auto seen = guest_kvmclock_ns(v->fd(), inputs_->ram.memory())) {
      hold_.kvmclock = std::max(hold_.kvmclock, *seen);
    }
  }
  // Before vm_clock stops: an edge the host kernel fired after the stop would be re-armed on
  // resume.
  for (devices::PausableDevice* d : board_->pausable()) d->pause();
  loop_->vm_clock.pause();
  loop_->dynticks->rearm();
}

void Machine::request_suspend() {
  // The writing vCPU goes no further than its OUT (QEMU's cpu_stop_current()): it and every
  // other vCPU hold at their next exit until the loop parks them.
  hold_.suspend.store(true, std::memory_order_release);
  loop_->loop->schedule([this] { enter_s3(); });
}

void Machine::enter_s3() {
  if (run_->stopping() || hold_.asleep) {
    hold_.suspend.store(false, std::memory_order_release);
    return;
  }
  pause();
  hold_.suspend.store(false, std::memory_order_release);
  hold_.asleep = true;
  // The RTC alarm wakes it, when the guest enabled both the alarm interrupt and RTC_EN (QEMU's
  // wakeup reason RTC). The RTC's own timer runs on vm_clock, stopped now: the alarm's wall
  // time is found once and waited for on rt_clock.
  std::optional<timers::Nanos> at;
  if (board_->rtc() && board_->acpi_pm() && board_->acpi_pm()->rtc_wake_enabled()) {
    at = board_->rtc()->next_alarm_host();
  }
  if (at) {
    if (const auto mono = loop_->wall.to_monotonic(*at)) hold_.rtc_wake->arm_at(*mono);
  }
  log::info("guest suspended (ACPI S3){}", at ? ", the RTC alarm wakes it" : "");
}

bool Machine::wake(devices::AcpiPm::WakeReason reason) {
  if (!hold_.asleep) return false;
  hold_.rtc_wake->cancel();
  const std::uint64_t facs = facs_addr();
  std::uint32_t vector = 0;
  const devices::GuestMemory mem = inputs_->ram.memory();
  if (facs != 0 && mem.contains(facs + 12, 4)) {
    std::memcpy(&vector, mem.slice(facs + 12, 4).data(), 4);  // firmware waking vector
  }
  hold_.asleep = false;
  if (vector == 0 || vector >= 0x100000) {
    // SeaBIOS finds no vector and boots again: a reset, which ends the run as the i8042's does.
    request_stop(ExitCode::kOk, "guest woke from S3 with no real-mode waking vector (a reset)");
    return true;
  }
  try {
    const auto& all = vcpus_->all();
    set_up_s3_resume(all[0]->fd(), vector);
    for (std::size_t i = 1; i < all.size(); ++i) set_up_s3_resume_ap(all[i]->fd());
  } catch (const VmmError& e) {
    log::error("S3 wake: {}", e.what());
    request_stop(ExitCode::kHostFailure, std::string("S3 wake: ") + e.what());
    return true;
  }
  board_->acpi_pm()->wake(reason);
  log::info("guest woke from S3 ({}) at {:#x}", reason == devices::AcpiPm::WakeReason::kRtc
                                                     ? "RTC alarm" : "wake request", vector);
  resume_now();
  return true;
}

void Machine::resume() {
  if (hold_.asleep) return;  // only a wake ends the sleep
  resume_now();
}

void Machine::resume_now() {
  if (!paused()) return;
  set_kvm_clock(vm_->vm.fd(), hold_.kvmclock);
  loop_->vm_clock.resume();
  for (devices::PausableDevice* d : board_->pausable()) d->resume();
  loop_->dynticks->rearm();
  vcpus_->resume();
}

int Machine::run() {
  // This thread is the loop; the vCPUs pin themselves when they start.
  pin_thread(pthread_self(), config_.cpu_affinity.loop, "loop");
  if (config_.timer_slack_ns &&
      ::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(*config_.timer_slack_ns), 0, 0, 0) !=
          0) {
    // Applies to this (the loop) thread's sleeps: ppoll/epoll timeouts and timerfd expiries.
    throw VmmError(ExitCode::kHostFailure,
                   std::string("PR_SET_TIMERSLACK: ") + std::strerror(errno));
  }
  run_->start(config_.duration_s);
  const auto started = std::chrono::steady_clock::now();
  // --gdb-wait: parked before the first instruction, the clocks stopped, until gdb continues.
  if (gdb_ && gdb_->wait_at_start()) {
    pause();
    gdb_->note_initial_stop();
  }
  enter_sandbox_and_start();
  // A restored guest was loaded paused, its vCPUs asked to park before their first KVM_RUN.
  // Wait until every one has (started, pinned, sandboxed: ready to run), then resume: the
  // guest's clocks start when its vCPUs can run at once, not a thread start-up earlier (under
  // nested KVM that start-up was a 40-70 ms gap between the guest's ticks). Resuming before
  // they parked was worse: a vCPU that hosts the PIT's timers (--pit-tick vcpu) re-arms them
  // as it leaves its park, and one that had not reached it yet never did; its guest got no tick.
  if (snap_.restored) {
    snap_.phases.emplace_back("sandbox and threads", ms_since(started));
    auto t = std::chrono::steady_clock::now();
    vcpus_->wait_parked();
    snap_.phases.emplace_back("vCPUs parked", ms_since(t));
    t = std::chrono::steady_clock::now();
    resume();
    snap_.phases.emplace_back("resume", ms_since(t));
    snap_.restore_ms = ms_since(snap_.constructed_at);
    snap_.resumed_monotonic_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count();
  }
  if (!loop_->loop->run()) {
    log::error("main loop failed: {}", std::strerror(errno));
    request_stop(ExitCode::kHostFailure, "main loop failed");
  }
  finish();
  return run_->status();
}

// The seccomp sandbox (vmm/sandbox/seccomp_sandbox.h has the install order): the signal thread
// and the virtio-blk workers filtered themselves as they started; wait until they have, so
// that a failure ends the run before the guest starts. Then the vCPUs, which filter themselves
// before their first KVM_RUN, and this thread's own filter last: it starts no thread after.
void Machine::enter_sandbox_and_start() {
  SeccompSandbox& sandbox = vm_->sandbox;
  sandbox.wait_entered(ThreadKind::kSignals, 1);
  sandbox.wait_entered(ThreadKind::kBlkWorker, virtio_->worker_threads());
  sandbox.wait_entered(ThreadKind::kNinepWorker, virtio_->ninep_threads());
  if (const auto why = sandbox.failure()) throw VmmError(ExitCode::kHostFailure, *why);
  vcpus_->start();
  if (!sandbox.try_enter(ThreadKind::kLoop, loop_allow_list(vm_->facts))) {
    request_stop(ExitCode::kHostFailure, "the loop thread could not be sandboxed");
  }
}

void Machine::finish() {
  if (gdb_) gdb_->run_ended(run_->status());
  vcpus_->request_stop();
  vcpus_->join();
  // Whatever ended the run (a guest fault, most likely), a restored guest that lost its memory
  // ended because of the host: said as such, with its own code.
  if (const auto gone = restored_memory_gone();
      gone && run_->status() != to_int(ExitCode::kSnapshotGone)) {
    log::error("{} (the run had ended: {})", *gone, run_->reason());
    run_->overrule(to_int(ExitCode::kSnapshotGone), *gone);
  }
  board_->uart().flush();
  virtio_->flush_console();
  virtio_->release_drives();
  console_input_.reset();  // restores the terminal before the summary is printed
  report_ = collect_report();
}

}  // namespace minivmm::vmm
