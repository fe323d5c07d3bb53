// No signal may end the process and leave the user's terminal raw. For every catchable signal
// whose default action ends the process (signal(7): terminate, or dump core), a handler
// restores the terminal settings ConsoleInput saved, puts the previous disposition back (the
// default, or a sanitizer's handler, which then reports as it would have) and lets the signal
// finish the process: a fault re-executes and faults again, anything else is raised again. The
// parent's wait status is the one it would have seen without the handler: killed by that
// signal, with a core where the signal dumps one.
//
// Taken:
//  - the crash signals SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP, whatever
//    their disposition: the kernel delivers a fault or a breakpoint even to a process that
//    ignores it, abort() raises SIGABRT until it kills, and a sanitizer's handler is chained to;
//  - SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGIO (SIGPOLL),
//    SIGPWR, SIGSTKFLT (SIGEMT where it exists) and the real-time signals, but only while
//    their disposition is still the default: one inherited as ignored (a non-interactive
//    shell's background job ignores SIGINT and SIGQUIT) stays ignored, so it ends nothing.
// Left to their owners:
//  - SIGINT, SIGTERM, SIGHUP: StopSignals ends the run in order (summary, --stats, terminal);
//    SIGTSTP and SIGCONT (job control) are StopSignals' too;
//  - SIGPIPE: main() ignores it (a console whose reader went away is counted, not fatal);
//  - the real-time signals minivmm sends itself: the vCPU kick, the loop alarm's and the vCPU
//    timers' signals, StopSignals' quit.
// SIGKILL and SIGSTOP cannot be caught: `kill -9` leaves a raw terminal (`stty sane` or
// `reset` repairs it).
//
// The handler runs on whichever thread the signal reaches, under that thread's seccomp filter
// (a signal blocked there goes to another thread; none of these is blocked anywhere). It calls
// only tcsetattr on stdin (ioctl TCSETS, TCGETS), sigaction (rt_sigaction) and raise
// (rt_sigprocmask, getpid, gettid, tgkill), or, for a file-backed mapping's lost page (below),
// write on stderr and _exit (exit_group), which every allow-list has, and nothing that is not
// async-signal-safe.
//
// Exit paths that are not signals restore the terminal through ConsoleInput's destructor (every
// error is an exception caught in main, after Machine is destroyed).
//
// Threads: install once, from main, before other threads exist and after SIGPIPE is ignored.
#pragma once

#include <cstddef>

namespace minivmm::vmm {

void install_crash_signal_handlers() noexcept;

// A mapping whose backing file may be cut short under it (a restored guest's RAM, mapped
// MAP_PRIVATE from its snapshot). A SIGBUS for an address in [begin, begin + length) (the
// kernel's "no page behind this address", BUS_ADRERR) then ends the process at once with
// `message` (one line, written as is) and `exit_code`, the terminal restored, instead of a
// crash: the file is the host's business. Set once, before the mapping is touched by any
// thread but this one; `message` must outlive the process.
void set_file_backed_memory(const void* begin, std::size_t length, const char* message,
                            int exit_code) noexcept;

}  // namespace minivmm::vmm
