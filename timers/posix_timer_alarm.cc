#include "timers/posix_timer_alarm.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <system_error>

#include "timers/syscall_counters.h"

namespace minivmm::timers {
// A real-time signal: queued per timer, never one that libraries or users send by accident.
int PosixTimerAlarm::signal_number() noexcept { return SIGRTMIN + 3; }

PosixTimerAlarm::PosixTimerAlarm() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal_number());
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
    throw std::system_error(errno, std::generic_category(), "pthread_sigmask");
  }
  signal_fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) throw std::system_error(errno, std::generic_category(), "signalfd");

  try {
    timer_.create(signal_number(), static_cast<pid_t>(syscall(SYS_gettid)));
  } catch (...) {
    close(signal_fd_);
    throw;
  }
}

PosixTimerAlarm::~PosixTimerAlarm() {
  if (signal_fd_ >= 0) close(signal_fd_);
}

bool PosixTimerAlarm::arm(Nanos deadline, Nanos interval) {
  return timer_.arm(deadline, interval);
}

bool PosixTimerAlarm::disarm() { return timer_.disarm(); }

bool PosixTimerAlarm::consume(bool /*edge*/) {
  // A pending timer signal is not queued twice (later expiries count as overruns), so one
  // siginfo per wakeup is all there can be.
  std::array<signalfd_siginfo, 4> info{};
  thread_syscalls().add(Syscall::kRead);
  const ssize_t n = read(signal_fd_, info.data(), sizeof info);
  return n > 0 || (n < 0 && errno == EAGAIN);
}

}  // namespace minivmm::timers
