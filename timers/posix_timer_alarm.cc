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
namespace {

timespec to_timespec(Nanos n) {
  return timespec{static_cast<time_t>(n.count() / 1'000'000'000),
                  static_cast<long>(n.count() % 1'000'000'000)};
}

}  // namespace

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

  sigevent sev{};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signal_number();
  sev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &sev, &timer_) != 0) {
    const int err = errno;
    close(signal_fd_);
    throw std::system_error(err, std::generic_category(), "timer_create");
  }
  timer_created_ = true;
}

PosixTimerAlarm::~PosixTimerAlarm() {
  if (timer_created_) timer_delete(timer_);
  if (signal_fd_ >= 0) close(signal_fd_);
}

bool PosixTimerAlarm::arm(Nanos deadline, Nanos interval) {
  if (deadline <= Nanos{0}) deadline = Nanos{1};  // zero would disarm
  itimerspec spec{};
  spec.it_value = to_timespec(deadline);
  spec.it_interval = to_timespec(interval);
  thread_syscalls().add(Syscall::kTimerSettime);
  return timer_settime(timer_, TIMER_ABSTIME, &spec, nullptr) == 0;
}

bool PosixTimerAlarm::disarm() {
  itimerspec spec{};
  thread_syscalls().add(Syscall::kTimerSettime);
  return timer_settime(timer_, 0, &spec, nullptr) == 0;
}

bool PosixTimerAlarm::consume(bool /*edge*/) {
  // A pending timer signal is not queued twice (later expiries count as overruns), so one
  // siginfo per wakeup is all there can be.
  std::array<signalfd_siginfo, 4> info{};
  thread_syscalls().add(Syscall::kRead);
  const ssize_t n = read(signal_fd_, info.data(), sizeof info);
  return n > 0 || (n < 0 && errno == EAGAIN);
}

}  // namespace minivmm::timers
