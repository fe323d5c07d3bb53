// The vCPU thread (vcpu.h): start, kick, the KVM_RUN loop with its pause and stop checks, and the
// stats. Register set-up, exit handling and the crash report are called from here and live in
// x86_vcpu_setup.cc, vcpu_exits.cc and vcpu_crash_report.cc.
#include "vmm/vcpu/vcpu.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <system_error>

#include "devices/log/log.h"
#include "timers/syscall_counters.h"
#include "vmm/host/cpu_affinity.h"
#include "vmm/kvm/kvm.h"
#include "vmm/vcpu/vcpu_crash_report.h"
#include "vmm/vcpu/x86_vcpu_setup.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

void install_kick_handler() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: KVM_RUN must return
    sigaction(Vcpu::kick_signal(), &sa, nullptr);
    return true;
  }();
  (void)installed;
}

}  // namespace

// A real-time signal whose only job is to make KVM_RUN return EINTR; the handler does nothing.
int Vcpu::kick_signal() noexcept { return SIGRTMIN + 4; }

Vcpu::Vcpu(const Vm& vm, int index, devices::IoBus& io, StopCallback on_stop)
    : vm_(vm), index_(index), io_(io), on_stop_(std::move(on_stop)) {
  fd_.reset(::ioctl(vm.fd(), KVM_CREATE_VCPU, index));
  if (!fd_.valid()) throw_kvm_error("KVM_CREATE_VCPU");
  run_size_ = static_cast<std::size_t>(vm.kvm().vcpu_mmap_size());
  void* p = ::mmap(nullptr, run_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  if (p == MAP_FAILED) throw_kvm_error("mmap(kvm_run)");
  run_ = static_cast<kvm_run*>(p);
}

Vcpu::~Vcpu() {
  request_stop();
  join();
  if (run_) ::munmap(run_, run_size_);
}

void Vcpu::configure(const X86BootState& state, const std::vector<kvm_cpuid_entry2>& cpuid) {
  set_up_boot_vcpu(fd_.get(), index_, state, cpuid);
}

void Vcpu::configure_ap(const std::vector<kvm_cpuid_entry2>& cpuid) {
  set_up_application_vcpu(fd_.get(), index_, cpuid);
}

void Vcpu::start() {
  install_kick_handler();
  thread_ = std::thread([this] { thread_main(); });
}

void Vcpu::kick() noexcept {
  // immediate_exit closes the race where the signal lands just before KVM_RUN is entered.
  __atomic_store_n(&run_->immediate_exit, 1, __ATOMIC_SEQ_CST);
  std::lock_guard lock(kick_mu_);
  if (pthread_) pthread_kill(*pthread_, kick_signal());
}

void Vcpu::request_stop() noexcept {
  gate_.request_stop();
  if (run_) kick();
}

void Vcpu::join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

VcpuStats Vcpu::stats() const noexcept {
  VcpuStats s;
  for (std::size_t i = 0; i < s.exits.size(); ++i) s.exits[i] = exits_[i].load(std::memory_order_relaxed);
  s.unmapped_mmio = unmapped_mmio_.load(std::memory_order_relaxed);
  s.kvm_run_calls = kvm_run_calls_.load(std::memory_order_relaxed);
  const pid_t tid = tid_.load(std::memory_order_acquire);
  const auto live = tid != 0 ? thread_context_switches(tid) : std::nullopt;
  if (live) {
    s.ctx_switches = *live;
  } else {
    std::lock_guard lock(ctx_mu_);
    s.ctx_switches = final_ctx_;
  }
  return s;
}

void Vcpu::thread_main() {
  // Named so that top -H, perf --per-thread and /proc tell the vCPUs from the loop.
  const std::string name = "vcpu" + std::to_string(index_);
  register_thread(name);
  prepare_to_run(name);
  gate_.started();
  if (!gate_.stop_requested() && !run_loop()) {
    log::error("vcpu{}: its timers failed: {}", index_, std::strerror(errno));
    on_stop_(ExitCode::kHostFailure, "vCPU timers failed");
  }
  if (timers_) timers_->suspend();
  unregister_thread();
  gate_.finished();
}

void Vcpu::register_thread(const std::string& name) {
  {
    std::lock_guard lock(kick_mu_);
    pthread_ = pthread_self();
  }
  tid_.store(::gettid(), std::memory_order_release);
  timers::set_thread_syscalls(timers::vcpu_syscalls());
  pthread_setname_np(pthread_self(), name.c_str());
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, kick_signal());
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void Vcpu::prepare_to_run(const std::string& name) {
  try {
    pin_thread(pthread_self(), cpus_, name);
  } catch (const std::exception& e) {
    log::error("{}", e.what());
    on_stop_(ExitCode::kHostFailure, "vCPU thread could not be pinned");
    gate_.request_stop();
  }

  if (timers_) {
    try {
      timers_->attach();
      set_kvm_signal_mask();
    } catch (const std::exception& e) {
      log::error("vcpu{}: cannot host its timers: {}", index_, e.what());
      on_stop_(ExitCode::kHostFailure, "vCPU timers failed");
      timers_ = nullptr;
      gate_.request_stop();
    }
  }
  if (!gate_.stop_requested() && steady_state_hook_ && !steady_state_hook_()) {
    on_stop_(ExitCode::kHostFailure, "vCPU thread could not be sandboxed");
    gate_.request_stop();
  }
}

void Vcpu::unregister_thread() {
  {
    std::lock_guard lock(ctx_mu_);
    final_ctx_ = this_thread_context_switches();
    tid_.store(0, std::memory_order_release);
  }
  std::lock_guard lock(kick_mu_);
  pthread_.reset();
}

void Vcpu::set_kvm_signal_mask() {
  // The mask KVM_RUN runs with: the thread's own minus the timer signal, as the kernel's 8-byte
  // sigset (signals 1-64) right after the u32 length (see kKvmSetSignalMask).
  sigset_t mask;
  if (const int err = pthread_sigmask(SIG_BLOCK, nullptr, &mask); err != 0) {
    throw std::system_error(err, std::generic_category(), "pthread_sigmask");
  }
  sigdelset(&mask, timers::ThreadTimers::signal_number());
  constexpr std::uint32_t kKernelSigsetBytes = 8;
  std::array<std::byte, kKvmSignalMaskHeaderSize + kKernelSigsetBytes> arg{};
  static_assert(sizeof(sigset_t) >= kKernelSigsetBytes);
  std::memcpy(arg.data(), &kKernelSigsetBytes, sizeof kKernelSigsetBytes);
  std::memcpy(arg.data() + kKvmSignalMaskHeaderSize, &mask, kKernelSigsetBytes);
  if (::ioctl(fd_.get(), kKvmSetSignalMask, arg.data()) < 0) {
    throw std::system_error(errno, std::generic_category(), "KVM_SET_SIGNAL_MASK");
  }
}

bool Vcpu::run_loop() {
  while (!gate_.stop_requested()) {
    if (gate_.pause_requested()) {
      // Parked: no expiry is wanted until resume (vm_clock stops too), so disarm.
      if (!gate_.park([this] { return !timers_ || timers_->suspend(); },
                      [this] { return !timers_ || timers_->resume(); })) {
        return false;
      }
      debug_held_ = false;
      continue;
    }
    if (debug_held_ || (hold_ && hold_->load(std::memory_order_acquire))) {
      gate_.wait_for_pause();
      continue;
    }
    __atomic_store_n(&run_->immediate_exit, 0, __ATOMIC_SEQ_CST);
    // After the reset: a timer wake from now on sets immediate_exit again, and one that came
    // earlier left its mark for before_wait() to apply.
    if (timers_ && !timers_->before_wait()) return false;
    // A kick between the checks above and here set immediate_exit again: re-check.
    if (gate_.stop_requested() || gate_.pause_requested()) continue;
    kvm_run_calls_.fetch_add(1, std::memory_order_relaxed);
    timers::thread_syscalls().add(timers::Syscall::kIoctl);
    const int r = ::ioctl(fd_.get(), KVM_RUN, 0);
    // A signal or kick: KVM returns EINTR (or EAGAIN) with exit reason KVM_EXIT_INTR.
    const bool interrupted =
        r < 0 ? errno == EINTR || errno == EAGAIN : run_->exit_reason == KVM_EXIT_INTR;
    if (interrupted) {
      count(VcpuExit::kInterrupted);
      if (timers_ && !timers_->after_interrupted()) return false;
      continue;
    }
    if (r < 0) {
      const int err = errno;
      if (host_faulted()) return true;
      report_crash(std::string("KVM_RUN failed: ") + std::strerror(err));
      on_stop_(ExitCode::kHostFailure, "KVM_RUN failed");
      return true;
    }
    if (!handle_exit()) return true;
  }
  if (dump_on_stop_ && dump_on_stop_->load(std::memory_order_acquire)) {
    report_crash("the run was stopped (--timeout): vCPU " + std::to_string(index_) + " was here");
  }
  return true;
}

bool Vcpu::handle_exit() {
  const VcpuExit exit = classify_exit(run_->exit_reason);
  count(exit);
  if (run_->exit_reason == KVM_EXIT_DEBUG && debug_hook_) {
    debug_held_ = debug_hook_(fd_.get(), run_->debug.arch);
    return true;
  }
  if (exit == VcpuExit::kIo) {
    handle_io_exit(*run_, run_size_, io_);
    return true;
  }
  if (exit == VcpuExit::kMmio) {
    if (!handle_mmio_exit(*run_, mmio_)) unmapped_mmio_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const VcpuStop stop = stop_for_exit(*run_);
  if (stop.crash_headline && host_faulted()) return false;
  if (stop.crash_headline) report_crash(*stop.crash_headline);
  on_stop_(stop.code, stop.why);
  return false;
}

bool Vcpu::host_faulted() {
  if (!host_fault_check_) return false;
  const auto why = host_fault_check_();
  if (!why) return false;
  log::error("{}", *why);
  on_stop_(ExitCode::kSnapshotGone, *why);
  return true;
}

void Vcpu::report_crash(const std::string& what) {
  log_crash_report(fd_.get(), index_, *run_, vm_.memory(), what);
}

}  // namespace minivmm::vmm
