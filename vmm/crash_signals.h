// A crash must not leave the user's terminal raw. For the fatal signals (SIGSEGV, SIGBUS,
// SIGILL, SIGFPE, SIGABRT, SIGSYS) a handler restores the terminal settings ConsoleInput saved,
// puts the previous disposition back (the default, or a sanitizer's handler, which then reports
// as it would have) and lets the signal finish the process: a fault re-executes and faults
// again, a sent signal (kill, abort) is raised again.
//
// Exit paths that are not signals restore the terminal through ConsoleInput's destructor (every
// error is an exception caught in main, after Machine is destroyed). SIGKILL cannot be caught.
//
// Threads: install once, from main, before other threads exist.
#pragma once

namespace minivmm::vmm {

void install_crash_signal_handlers() noexcept;

}  // namespace minivmm::vmm
