#include "vmm/host/stop_signals.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <system_error>

namespace minivmm::vmm {
namespace {

sigset_t waited_set() noexcept {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  // Job control: the terminal has to be given back before the process stops, and taken again
  // when it continues (Machine::on_signal).
  sigaddset(&set, SIGTSTP);
  sigaddset(&set, SIGCONT);
  sigaddset(&set, StopSignals::quit_signal());
  return set;
}

}  // namespace

// Sent by the destructor only, to end the wait; never meaningful from outside.
int StopSignals::quit_signal() noexcept { return SIGRTMIN + 6; }

void StopSignals::block() {
  const sigset_t set = waited_set();
  if (const int err = pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0) {
    throw std::system_error(err, std::generic_category(), "pthread_sigmask");
  }
}

StopSignals::StopSignals(std::function<void(int signo)> on_signal,
                         std::function<bool()> on_start)
    : on_signal_(std::move(on_signal)), on_start_(std::move(on_start)) {
  block();
  thread_ = std::thread([this] { thread_main(); });
}

StopSignals::~StopSignals() {
  pthread_kill(thread_.native_handle(), quit_signal());
  thread_.join();
}

void StopSignals::thread_main() {
  pthread_setname_np(pthread_self(), "signals");
  if (on_start_ && !on_start_()) return;
  const sigset_t set = waited_set();
  for (;;) {
    siginfo_t info{};
    const int sig = sigwaitinfo(&set, &info);
    if (sig < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (sig == quit_signal()) return;
    on_signal_(sig);
  }
}

}  // namespace minivmm::vmm
