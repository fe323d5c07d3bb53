#include "vmm/crash_signals.h"

#include <signal.h>

#include <array>
#include <cstddef>

#include "devices/console_input.h"

namespace minivmm::vmm {
namespace {

constexpr std::array<int, 6> kFatal = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS};
std::array<struct sigaction, kFatal.size()> g_previous{};

void on_fatal(int sig, siginfo_t* info, void*) {
  devices::ConsoleInput::restore_terminal();
  for (std::size_t i = 0; i < kFatal.size(); ++i) {
    if (kFatal[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  }
  // si_code > 0: the kernel raised it for a fault, which returning re-executes. <= 0: sent
  // (kill, tgkill from abort()); it has to be raised again. It stays blocked until this
  // handler returns, so the previous disposition sees it then.
  if (info == nullptr || info->si_code <= 0) ::raise(sig);
}

}  // namespace

void install_crash_signal_handlers() noexcept {
  for (std::size_t i = 0; i < kFatal.size(); ++i) {
    struct sigaction sa {};
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(kFatal[i], &sa, &g_previous[i]);
  }
}

}  // namespace minivmm::vmm
