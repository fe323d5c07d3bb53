#include "vmm/kvm/kvm_irq_line.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "timers/syscall_counters.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {

KvmIrqLine::KvmIrqLine(const Vm& vm, std::uint32_t gsi, IrqInject inject, bool track_acks)
    : vm_(vm), gsi_(gsi), inject_(inject) {
  irqfd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (track_acks) resamplefd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!irqfd_.valid() || (track_acks && !resamplefd_.valid())) {
    throw VmmError(ExitCode::kHostFailure, std::string("eventfd: ") + std::strerror(errno));
  }
  vm_.add_irqfd(irqfd_.get(), gsi_, track_acks ? resamplefd_.get() : -1);
}

std::optional<std::uint64_t> KvmIrqLine::acknowledgements() noexcept {
  if (!resamplefd_.valid()) return std::nullopt;
  std::uint64_t n = 0;
  timers::thread_syscalls().add(timers::Syscall::kRead);
  // EAGAIN: no acknowledgement since the last read.
  if (::read(resamplefd_.get(), &n, sizeof n) == static_cast<ssize_t>(sizeof n)) acks_ += n;
  return acks_;
}

KvmIrqLine::~KvmIrqLine() { vm_.remove_irqfd(irqfd_.get(), gsi_); }

void KvmIrqLine::stop_acknowledgements() noexcept {
  if (!resamplefd_.valid()) return;
  // Unbinding the last resampling irqfd of the GSI drops the level its resampler held; the
  // same eventfd then comes back as a plain irqfd (raise and lower per write).
  vm_.remove_irqfd(irqfd_.get(), gsi_);
  resamplefd_.reset();
  try {
    vm_.add_irqfd(irqfd_.get(), gsi_);
  } catch (...) {
    // Nothing sane is left to do from a device's tick path; the run report shows the ticks.
  }
}

// Unbinding the last irqfd of a resampler lowers the level it holds: its shutdown unregisters
// the ack notifier and sets the GSI's resampler source to 0 (virt/kvm/eventfd.c,
// irqfd_resampler_shutdown). The shutdown is queued work, but KVM_IRQFD's deassign flushes that
// queue before it returns, so the level is down by the time the irqfd is bound again here, and
// the next edge raises the line afresh.
bool KvmIrqLine::release_held_level() noexcept {
  if (!resamplefd_.valid()) return false;
  try {
    vm_.remove_irqfd(irqfd_.get(), gsi_);
    vm_.add_irqfd(irqfd_.get(), gsi_, resamplefd_.get());
  } catch (...) {
    return false;  // the line is as it was, or unbound: the PIT's counts show what follows
  }
  return true;
}

void KvmIrqLine::set_level(bool asserted) noexcept { vm_.irq_line(gsi_, asserted); }

void KvmIrqLine::pulse() noexcept {
  if (inject_ == IrqInject::kIoctl) {
    vm_.irq_line(gsi_, true);
    vm_.irq_line(gsi_, false);
    return;
  }
  const std::uint64_t one = 1;
  timers::thread_syscalls().add(timers::Syscall::kWrite);
  [[maybe_unused]] const ssize_t n = ::write(irqfd_.get(), &one, sizeof one);
}

// With a resampler bound, every edge goes through the irqfd. KVM ORs the line's sources: a
// KVM_IRQ_LINE pulse holds the line up (the ioctl source) between its two ioctls, and a resampler
// raise that lands then (the irqfd worker, the other source) makes no edge; the guest's EOI of the
// ioctl's interrupt may already have come, so nothing lowers the resampler's level again, and
// every later edge of either kind merges into it: IRQ0 stuck for good. Seen in loop tick mode
// under load (on-time ticks by irqfd, owed ones by ioctl; CI: a guest without a tick for 4.3 s,
// 70 ticks lost). One source, one level: the catch-up waits in the worker queue too.
// Only where nothing else raises the GSI from the ioctl's source: a host-kernel pulse train's
// plain irqfds are that source too, and there the ioctl is what keeps the line one source.
bool KvmIrqLine::one_source() const noexcept {
  return pulses_through_irqfd_only_ && resamplefd_.valid() && inject_ == IrqInject::kIrqfd;
}

void KvmIrqLine::pulse_now() noexcept {
  if (one_source()) {
    pulse();
    return;
  }
  vm_.irq_line(gsi_, true);
  vm_.irq_line(gsi_, false);
}

bool KvmIrqLine::pulse_checked() noexcept {
  if (one_source()) {
    pulse();  // coalescing shows in the acknowledgement count instead (AckAudit)
    return true;
  }
  const int status = vm_.irq_line(gsi_, true);
  vm_.irq_line(gsi_, false);
  // 0 means the PIC already had the request pending: the guest sees one interrupt for two.
  return status != 0;
}

}  // namespace minivmm::vmm
