#include "vmm/machine/vm_handles.h"

#include <string>
#include <system_error>

#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

SeccompSandbox make_sandbox(const Config& c) {
  try {
    return SeccompSandbox(c.seccomp, c.seccomp_selftest);
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("seccomp: ") + e.what());
  }
}

SeccompFacts seccomp_facts(const Config& c, int vm_fd) {
  SeccompFacts f;
  f.vm_fd = vm_fd;
  f.pit_tick_vcpu = c.pit == PitMode::kUser && c.pit_tick == PitTick::kVcpu;
  f.pit_tick_host_kernel = c.pit == PitMode::kUser && c.pit_tick == PitTick::kHostKernel;
  f.alarm_posix_timer = c.alarm == timers::AlarmKind::kDynticks;
  f.alarm_timerfd = c.alarm == timers::AlarmKind::kTimerfd || c.alarm == timers::AlarmKind::kPeriodic;
  using loop::PollerKind;
  f.poll_ppoll = c.poller == PollerKind::kPpoll || c.poller == PollerKind::kAuto;
  f.poll_epoll = c.poller != PollerKind::kPpoll;
  f.poll_timerfd = c.poller == PollerKind::kTimerfdEpoll || c.poller == PollerKind::kAuto;
  f.control_socket = !c.api_socket.empty();
  f.reset_on_exit = c.reset_rounds > 0;
  for (const NetSpec& n : c.nets) {
    (n.kind == NetSpec::Kind::kUser ? f.net_user : f.net_tap) = true;
  }
#ifdef MINIVMM_SANITIZER_RUNTIME
  f.sanitizer_runtime = true;
#endif
  return f;
}

}  // namespace

VmHandles::VmHandles(const Config& config, devices::GuestMemory ram)
    : vm(kvm, ram), sandbox(make_sandbox(config)), facts(seccomp_facts(config, vm.fd())) {}

}  // namespace minivmm::vmm
